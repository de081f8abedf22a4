"""Bridge: violin plot of one metric by factor with Dunn stars from stats.min_n
independent tasks on (mastif.reporting.plots)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.reporting.plots import plot_violins

plot_violins(
    pl.read_parquet(snakemake.input.runs),
    pl.read_parquet(snakemake.input.posthoc),
    snakemake.wildcards.metric,
    Path(snakemake.output.png).with_suffix(""),
    alpha=snakemake.params.alpha,
    min_n=snakemake.params.min_n,
)

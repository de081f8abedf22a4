"""Bridge: efficiency profile and Pareto frontier (mastif.reporting.plots)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.reporting.plots import plot_pareto

plot_pareto(pl.read_parquet(snakemake.input.stacks), Path(snakemake.output.png).with_suffix(""))

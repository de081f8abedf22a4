"""Bridge: violin plot of one metric by factor with Dunn stars from stats.min_n
independent tasks on (mastif.reporting.plots); a judge score's carries the judge gate's verdict
(mastif.analysis.inference.gate_verdict)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.analysis.inference import JUDGE_SCORES, gate_verdict
from mastif.reporting.plots import plot_violins

metric = snakemake.wildcards.metric
gate = gate_verdict(pl.read_parquet(snakemake.input.judge_validity))

plot_violins(
    pl.read_parquet(snakemake.input.runs),
    pl.read_parquet(snakemake.input.posthoc),
    metric,
    Path(snakemake.output.png).with_suffix(""),
    alpha=snakemake.params.alpha,
    min_n=snakemake.params.min_n,
    judge_gate=gate.text if metric in JUDGE_SCORES else None,
)

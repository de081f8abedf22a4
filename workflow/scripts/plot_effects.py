"""Bridge: per-stack means with task-bootstrap confidence intervals (mastif.reporting.plots_effects),
with the judge gate's verdict (mastif.analysis.inference.gate_verdict): TCR is the judge's."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.analysis.inference import gate_verdict
from mastif.reporting.plots_effects import plot_effects

plot_effects(
    pl.read_parquet(snakemake.input.effects),
    Path(snakemake.output.png).with_suffix(""),
    confidence=snakemake.params.confidence,
    judge_gate=gate_verdict(pl.read_parquet(snakemake.input.judge_validity)).text,
)

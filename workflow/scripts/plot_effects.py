"""Bridge: per-stack means with task-bootstrap confidence intervals (mastif.reporting.plots_effects)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.reporting.plots_effects import plot_effects

plot_effects(
    pl.read_parquet(snakemake.input.effects),
    Path(snakemake.output.png).with_suffix(""),
    confidence=snakemake.params.confidence,
)

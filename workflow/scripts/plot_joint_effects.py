"""Bridge: each factor's levels per metric with the factor's joint test, the figure the report
leads with (mastif.reporting.plots_joint)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.analysis.inference import gate_verdict
from mastif.reporting.plots_joint import plot_joint_effects

plot_joint_effects(
    pl.read_parquet(snakemake.input.joint),
    pl.read_parquet(snakemake.input.levels),
    Path(snakemake.output.png).with_suffix(""),
    alpha=snakemake.params.alpha,
    judge_gate=gate_verdict(pl.read_parquet(snakemake.input.judge_validity)).text,
)

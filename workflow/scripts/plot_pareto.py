"""Bridge: efficiency profile and Pareto frontier (mastif.reporting.plots), with the judge
gate's verdict (mastif.analysis.inference.gate_verdict): TCR colours it."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.analysis.inference import gate_verdict
from mastif.reporting.plots import plot_pareto

plot_pareto(
    pl.read_parquet(snakemake.input.stacks),
    Path(snakemake.output.png).with_suffix(""),
    judge_gate=gate_verdict(pl.read_parquet(snakemake.input.judge_validity)).text,
)

"""Bridge: efficiency profile and Pareto frontier, no star below stats.min_n independent
tasks, with the judge gate's verdict (mastif.analysis.inference.gate_verdict): TCR colours it
(mastif.reporting.plots)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.analysis.inference import gate_verdict, independent_tasks
from mastif.reporting.plots import plot_pareto

# the independent unit: tasks, not runs (below stats.min_n of them no Pareto star)
n_tasks = independent_tasks(pl.scan_parquet(snakemake.input.runs).select("task_id").collect())
plot_pareto(
    pl.read_parquet(snakemake.input.stacks),
    Path(snakemake.output.png).with_suffix(""),
    n_tasks=n_tasks,
    min_n=snakemake.params.min_n,
    judge_gate=gate_verdict(pl.read_parquet(snakemake.input.judge_validity)).text,
)

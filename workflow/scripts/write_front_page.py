"""Bridge: the report's front page, the joint tests, their figure and the judge gate
(mastif.reporting.front_page)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.analysis.inference import gate_verdict, independent_tasks
from mastif.reporting.front_page import front_page, write_front_page

n_tasks = independent_tasks(pl.scan_parquet(snakemake.input.runs).select("task_id").collect())
text = front_page(
    pl.read_parquet(snakemake.input.joint),
    Path(snakemake.input.figure),
    gate_verdict(pl.read_parquet(snakemake.input.judge_validity)).text,
    n_tasks,
    min_n=snakemake.params.min_n,
    alpha=snakemake.params.alpha,
    family_adjust=snakemake.params.family_adjust,
)
write_front_page(text, Path(snakemake.output.page))

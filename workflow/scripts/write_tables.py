"""Bridge: the paper's Tables 2-6 and the protocol-cost Table 7 as Markdown and CSV (mastif.report)."""

from mastif.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.report import paper_tables, power_table, run_versions, versions_table, write_tables
from mastif.stats_tables import (
    effects_table,
    judge_gate,
    judge_validity_table,
    repeats_table,
    with_judge_gate,
)

tables = paper_tables(
    pl.read_parquet(snakemake.input.stacks),
    pl.read_parquet(snakemake.input.tests),
    pl.read_parquet(snakemake.input.groups),
    alpha=snakemake.params.alpha,
)
tables["versions"] = versions_table(run_versions(snakemake.input.runs))
n_tasks = pl.scan_parquet(snakemake.input.runs).select("task_id").unique().collect().height
tables["power"] = power_table(n_tasks, alpha=snakemake.params.alpha)
validity = pl.read_parquet(snakemake.input.judge_validity)
tables["table2_task_completion"] = with_judge_gate(tables["table2_task_completion"], validity)
tables["effects"] = effects_table(pl.read_parquet(snakemake.input.effects))
tables["repeats"] = repeats_table(pl.read_parquet(snakemake.input.repeats))
tables["judge_validity"] = judge_validity_table(validity)
tables["judge_panel"] = pl.read_parquet(snakemake.input.judge_panel)
_, warning = judge_gate(validity)
write_tables(
    tables,
    Path(snakemake.output.markdown[0]).parent,
    warnings={"table2_task_completion": warning} if warning else None,
    alpha=snakemake.params.alpha,
)

"""Bridge: the paper's Tables 2-6, the protocol-cost Table 7, the mixed models' joint tests and
the statistics tables as Markdown and CSV (mastif.reporting.report, mastif.reporting.report_inference)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.analysis.inference import independent_tasks
from mastif.reporting.report import (
    paper_tables,
    power_table,
    run_versions,
    versions_table,
    write_tables,
)
from mastif.reporting.report_inference import inference_notes, mixed_joint_table
from mastif.reporting.stats_tables import (
    effects_table,
    judge_validity_table,
    repeats_table,
    with_judge_gates,
)

# the independent unit: tasks, not runs (below stats.min_n of them no p-value, star or best)
n_tasks = independent_tasks(pl.scan_parquet(snakemake.input.runs).select("task_id").collect())
min_n = snakemake.params.min_n
# the mixed models' joint test per factor first: the report leads with them
tables = {
    "mixed_joint": mixed_joint_table(
        pl.read_parquet(snakemake.input.joint), n_tasks=n_tasks, min_n=min_n
    )
}
tables |= paper_tables(
    pl.read_parquet(snakemake.input.stacks),
    pl.read_parquet(snakemake.input.tests),
    alpha=snakemake.params.alpha,
    n_tasks=n_tasks,
    min_n=min_n,
    joint=pl.read_parquet(snakemake.input.joint),
    joint_levels=pl.read_parquet(snakemake.input.joint_levels),
    joint_pairs=pl.read_parquet(snakemake.input.joint_pairs),
)
tables["versions"] = versions_table(run_versions(snakemake.input.runs))
tables["power"] = power_table(n_tasks, alpha=snakemake.params.alpha)
validity = pl.read_parquet(snakemake.input.judge_validity)
tables["effects"] = effects_table(pl.read_parquet(snakemake.input.effects))
tables["repeats"] = repeats_table(pl.read_parquet(snakemake.input.repeats))
tables["judge_validity"] = judge_validity_table(validity)
tables["judge_panel"] = pl.read_parquet(snakemake.input.judge_panel)
# the judge gate's verdict on every table built on judge scores: a judge_gate column, a line
tables, gate_lines = with_judge_gates(tables, validity)
# the lines in bold above a caption: too few tasks for a p-value or an interval, the gate
warnings: dict[str, list[str]] = {
    name: [note] for name, note in inference_notes(n_tasks, min_n).items()
}
for name, line in gate_lines.items():
    warnings.setdefault(name, []).insert(0, line)
write_tables(
    tables,
    Path(snakemake.output.markdown[0]).parent,
    warnings=warnings,
    alpha=snakemake.params.alpha,
)

"""Bridge: per-run and per-stack metrics, paper Eqs. 1-5 and 8 (see mastif.evaluation.metrics), and the
stacks whose final answers cannot be told apart (mastif.evaluation.answers)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import polars as pl

from mastif.evaluation.answers import answer_columns, answer_groups
from mastif.evaluation.metrics import run_metrics, stack_metrics

runs = pl.concat([pl.read_parquet(p) for p in snakemake.input.runs], how="vertical")
judged = pl.concat([pl.read_parquet(p) for p in snakemake.input.judged], how="vertical")
values = pl.concat([pl.read_parquet(p) for p in snakemake.input.values], how="vertical")
per_run = run_metrics(runs, judged, values, prices=snakemake.params.prices)
per_run.write_parquet(snakemake.output.runs)
stack_metrics(per_run, answers=answer_columns(runs)).write_parquet(snakemake.output.stacks)
answer_groups(runs).write_csv(snakemake.output.identical_answers)

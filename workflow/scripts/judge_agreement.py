"""Bridge: the judge panel's agreement across judges, with the checks and across repeats
(mastif.analysis.judge_panel)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import polars as pl

from mastif.analysis.judge_panel import judge_panel_agreement
from mastif.evaluation.judge import JUDGED_SCHEMA

p = snakemake.params
judged = pl.concat(
    [pl.read_parquet(f) for f in snakemake.input.judged] or [pl.DataFrame(schema=JUDGED_SCHEMA)],
    how="vertical",
)
runs = pl.read_parquet(snakemake.input.runs)
judge_panel_agreement(
    judged,
    runs,
    judges=p.judge_models,
    repeats=p.judge_repeats,
    resamples=p.bootstrap_resamples,
    confidence=p.confidence,
    seed=p.seed,
).write_parquet(snakemake.output.judge_panel)

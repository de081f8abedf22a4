"""Bridge: per-stack effects with task-bootstrap CIs, reliability across repeats and the
judge's validity (mastif.analysis.bootstrap, mastif.analysis.repeats, mastif.analysis.judge_validity)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import polars as pl

from mastif.analysis.bootstrap import bootstrap_effects
from mastif.analysis.judge_validity import judge_validity
from mastif.analysis.repeats import repeat_reliability

runs = pl.read_parquet(snakemake.input.runs)
resampling = {
    "resamples": snakemake.params.bootstrap_resamples,
    "confidence": snakemake.params.confidence,
    "seed": snakemake.params.seed,
}
bootstrap_effects(runs, **resampling, min_n=snakemake.params.min_n).write_parquet(
    snakemake.output.effects
)
repeat_reliability(runs).write_parquet(snakemake.output.repeats)
judge_validity(
    runs,
    min_kappa=snakemake.params.min_kappa,
    gate_min_tasks=snakemake.params.gate_min_tasks,
    gate_min_per_class=snakemake.params.gate_min_per_class,
    **resampling,
).write_parquet(snakemake.output.judge_validity)

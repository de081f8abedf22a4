"""Bridge: per-stack effects with task-bootstrap CIs, reliability across repeats and the
judge's validity (mastif.bootstrap, mastif.repeats, mastif.judge_validity)."""

from mastif.logsetup import log_to

log_to(snakemake.log[0])

import polars as pl

from mastif.bootstrap import bootstrap_effects
from mastif.judge_validity import judge_validity
from mastif.repeats import repeat_reliability

runs = pl.read_parquet(snakemake.input.runs)
resampling = {
    "resamples": snakemake.params.bootstrap_resamples,
    "confidence": snakemake.params.confidence,
    "seed": snakemake.params.seed,
}
bootstrap_effects(runs, **resampling).write_parquet(snakemake.output.effects)
repeat_reliability(runs).write_parquet(snakemake.output.repeats)
judge_validity(runs, min_kappa=snakemake.params.min_kappa, **resampling).write_parquet(
    snakemake.output.judge_validity
)

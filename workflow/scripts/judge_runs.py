"""Bridge: judge every run of one stack (see mastif.judge)."""

from mastif.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.config import parse_config
from mastif.judge import JudgeSettings, judge_runs
from mastif.providers import Gateway, open_endpoint
from mastif.runner import response_cache, setup_model_job

setup_model_job(snakemake.log.run)

config = parse_config(snakemake.config, base_dir=Path.cwd())
p = snakemake.params
settings = JudgeSettings(
    p.judge_model, p.temperature, p.max_tokens, p.attempts, p.seed, p.reference_guided
)
runs = pl.read_parquet(snakemake.input.runs)
tasks = pl.read_parquet(snakemake.input.tasks)
spec = config.models[p.judge_model]
with open_endpoint(p.judge_model, spec, Path(snakemake.log.server)) as endpoint:
    with Gateway(
        endpoint,
        retries=config.execution.provider_retries,
        request_timeout_s=spec.options.request_timeout_s,
        cache=response_cache(config),
    ) as gateway:
        judged = judge_runs(runs, tasks, Path(snakemake.input.rubric), gateway, settings)
judged.write_parquet(snakemake.output.judged)

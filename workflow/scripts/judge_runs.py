"""Bridge: every judge of the panel judges every run of one stack (see mastif.judge)."""

from mastif.logsetup import log_to

log_to(snakemake.log[0])

from contextlib import contextmanager
from pathlib import Path

import polars as pl

from mastif.config import model_spec
from mastif.judge import JudgeClip, JudgeSettings, judge_panel_runs
from mastif.providers import Gateway, open_endpoint
from mastif.providers.cache import ResponseCache
from mastif.runner import setup_model_job

setup_model_job(snakemake.log.run)

# everything from the rule's params, not from the config: what the job reads is what
# Snakemake tracks, so changing it reruns the job
p = snakemake.params
settings = JudgeSettings(
    p.judge_model,
    p.temperature,
    p.max_tokens,
    p.attempts,
    p.seed,
    p.reference_guided,
    JudgeClip(p.node_chars, p.tool_chars, p.answer_chars),
)
runs = pl.read_parquet(snakemake.input.runs)
tasks = pl.read_parquet(snakemake.input.tasks)


@contextmanager
def open_gateway(model_id):
    """One judge's endpoint and gateway, open while it judges (one at a time)."""
    spec = model_spec(model_id, p.judge_model_specs[model_id], base_dir=Path.cwd())
    with open_endpoint(model_id, spec, Path(snakemake.log.server)) as endpoint:
        with Gateway(
            endpoint,
            retries=p.provider_retries,
            request_timeout_s=spec.options.request_timeout_s,
            cache=ResponseCache(p.response_cache) if p.response_cache else None,
        ) as gateway:
            yield gateway


judged = judge_panel_runs(
    runs,
    tasks,
    Path(snakemake.input.rubric),
    open_gateway,
    settings,
    panel=p.judge_models,
    repeats=p.judge_repeats,
)
judged.write_parquet(snakemake.output.judged)

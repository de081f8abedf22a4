"""Bridge: every judge of the panel judges every run of one stack (see mastif.execution.judging)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import json
import logging
import sys
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from mastif.core.config import ModelPrice, Stack
from mastif.evaluation.judge import JudgeClip, JudgeSettings
from mastif.execution.budget import RESERVATION_GRACE_S, BudgetReached, job_gate
from mastif.execution.experiment import model_spec
from mastif.execution.judging import JudgeBudget, JudgeCheckpoint, judge_panel_runs
from mastif.execution.runner import setup_model_job
from mastif.providers import Gateway, open_endpoint
from mastif.providers.cache import ResponseCache

setup_model_job(snakemake.log.run)

# everything from the rule's params, not from the config: what the job reads is what
# Snakemake tracks, so changing it reruns the job
p = snakemake.params
w = snakemake.wildcards
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


# The budget and the judges' prices come from the config, not params (as in execute_stack):
# neither changes a judgement, and raising the budget to continue must not rerun finished
# stacks. A judgement takes at most its attempts' requests; its reservation outlives it
# only if the job was killed outright.
longest_s = max(
    model_spec(m, s, base_dir=Path.cwd()).options.request_timeout_s
    for m, s in p.judge_model_specs.items()
)
gate = job_gate(
    snakemake.config["execution"]["budget"],
    None,  # each judge's own price below
    Stack(w.model, w.protocol, w.framework),
    expires_in_s=p.attempts * longest_s + RESERVATION_GRACE_S,
)
budget = None
if gate is not None:
    prices = {m: snakemake.config["models"][m]["price"] for m in p.judge_models}
    budget = JudgeBudget(
        gate, {m: None if v is None else ModelPrice.model_validate(v) for m, v in prices.items()}
    )
checkpoint = JudgeCheckpoint(Path(p.checkpoint))
try:
    judged = judge_panel_runs(
        runs,
        tasks,
        Path(snakemake.input.rubric),
        open_gateway,
        settings,
        panel=p.judge_models,
        repeats=p.judge_repeats,
        checkpoint=checkpoint,
        budget=budget,
        # a judge's spec decides its judgements too: a checkpointed one counts only for it
        salt={m: json.dumps(s, sort_keys=True) for m, s in p.judge_model_specs.items()},
    )
except BudgetReached as exc:
    # an expected stop, not a crash: one sentence, no traceback; no judged table is
    # written, the checkpoint keeps the finished judgements for the rerun
    stack = f"{w.model}/{w.protocol}/{w.framework}"
    logging.getLogger("mastif.job").error("judging %s: %s", stack, exc)
    sys.exit(f"judging {stack}: {exc}")
judged.write_parquet(snakemake.output.judged)
# the Parquet now holds every judgement; the checkpoint only served an interrupted job
checkpoint.remove()

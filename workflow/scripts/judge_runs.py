"""Bridge: every judge of the panel judges every run of one stack (see mastif.execution.judging)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import json
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from mastif.core.config import Stack
from mastif.evaluation.judge import JudgeClip, JudgeSettings
from mastif.execution.budget_gate import model_job_gate, model_price, stop_at_budget
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
longest_request_s = max(
    model_spec(m, s, base_dir=Path.cwd()).options.request_timeout_s
    for m, s in p.judge_model_specs.items()
)
stack = Stack(w.model, w.protocol, w.framework)
gate = model_job_gate(
    snakemake.config["execution"]["budget"],
    None,  # each judge's own price below
    stack,
    longest_s=p.attempts * longest_request_s,
)
budget = None
if gate is not None:
    budget = JudgeBudget(
        gate, {m: model_price(snakemake.config["models"][m]["price"]) for m in p.judge_models}
    )
checkpoint = JudgeCheckpoint(Path(p.checkpoint))
# the budget's stop: no judged table is written, the checkpoint keeps the finished
# judgements for the rerun
with stop_at_budget(f"judging {stack.path}"):
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
judged.write_parquet(snakemake.output.judged)
# the Parquet now holds every judgement; the checkpoint only served an interrupted job
checkpoint.remove()

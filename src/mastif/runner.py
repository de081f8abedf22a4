"""Run one stack over its tasks: one row per run, whatever happens.

For a stack (model, protocol, framework) the runner opens the model endpoint (starting a
local server if needed), puts our gateway in front of it, opens the protocol with the
configured tools, and runs the framework on every task with a wall-clock timeout. Each
finished run is appended to a checkpoint file at once, so an interrupted job resumes
without redoing or duplicating finished runs. A failed run is a row with a classified
error, never a crash of the stack.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai

from mastif.config import ExperimentConfig, Stack
from mastif.frameworks import FrameworkAdapter, RunContext, RunRecorder, get_framework
from mastif.orchestration import (
    ORCHESTRATOR,
    a2a_agent_specs,
    orchestrate_over_a2a,
    run_workflow,
    submit_over_a2a,
)
from mastif.protocols import StackProtocol, open_protocol
from mastif.providers import Gateway, open_endpoint
from mastif.tasks import Task
from mastif.trace import RunTrace
from mastif.webenv import WebEnvironment, open_web_environment
from mastif.workflow import WorkflowPlan, plan_workflow

log = logging.getLogger(__name__)


def run_fingerprint(config: ExperimentConfig, stack: Stack, plan: WorkflowPlan) -> str:
    """What must be equal for a checkpointed run to count as already done."""
    model = config.models[stack.model]
    parts = {
        "experiment": config.experiment,
        "generation": config.generation.model_dump(),
        "tools": list(config.tools),
        "web": [config.web, config.web_options.model_dump()],
        "prompts": plan.prompt_hashes(),
        "workflow": [n.spec.model_dump() for n in plan.nodes],
        "shape": [plan.shape, plan.max_subtasks],
        "prompt_format": plan.prompt_format,
        # the price only prices a run afterwards (metrics), it does not shape it
        "model": model.model_dump(exclude={"price"}),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def make_run_id(stack: Stack, task_id: str, fingerprint: str) -> str:
    key = f"{stack.path}|{task_id}|{fingerprint}"
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def classify_error(exc: BaseException) -> tuple[str, str]:
    """(status, error_class) for an exception that ended a run."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, openai.APITimeoutError)):
        return "timeout", "timeout"
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500 or exc.status_code == 429:
            return "error", "provider_error"
        return "error", "provider_bad_request"
    if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
        return "error", "provider_unreachable"
    if type(exc).__name__ == "GraphRecursionError":
        return "error", "workflow_error"
    if type(exc).__name__ == "A2ATaskFailed":  # by name: a2a-sdk loads only under a2a
        # the agent classified its failure where it happened (see DelegatedWorkFailed)
        found = re.search(r"\[(error|timeout)/(\w+)\]", str(exc))
        return (found.group(1), found.group(2)) if found else ("error", "agent_error")
    return "error", "framework_error"


class DelegatedWorkFailed(RuntimeError):
    """An A2A agent's work failed; the message carries the classification for the orchestrator."""


class Checkpoint:
    """Append-only JSONL of finished runs; survives a killed job."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, RunTrace]:
        done: dict[str, RunTrace] = {}
        if not self.path.exists():
            return done
        with self.path.open() as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    trace = RunTrace.from_json(line)
                except (json.JSONDecodeError, TypeError, KeyError):
                    continue  # a torn last line from a kill mid-write: that run is redone
                done[trace.run_id] = trace
        return done

    def append(self, trace: RunTrace) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fh.write(trace.to_json() + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


async def _run_task(
    config: ExperimentConfig,
    stack: Stack,
    task: Task,
    run_id: str,
    plan: WorkflowPlan,
    gateway: Gateway,
    protocol: StackProtocol,
    framework: FrameworkAdapter,
    web: WebEnvironment,
) -> RunTrace:
    recorder = RunRecorder()
    gen = config.generation
    ctx = RunContext(
        run_id=run_id,
        # the start page as this run's absolute URL (sandbox paths resolved)
        task=task.model_copy(update={"start_url": web.begin_run(run_id, task)}),
        plan=plan,
        generation=gen,
        tools=protocol.transport,
        recorder=recorder,
        gateway_url=gateway.base_url_for(run_id, "x").rsplit("/x/v1", 1)[0],
        model_name=gateway.endpoint.model,
        mcp_url=protocol.mcp_url(run_id),
        page_view=lambda: asyncio.to_thread(web.page_view, run_id),
    )
    started_at = datetime.now(UTC)
    gateway.begin_run(run_id)
    protocol.attach(run_id, ctx)
    t0 = time.perf_counter()
    status, error_class, error_message, final = "ok", None, None, ""
    try:
        if protocol.agents is not None:  # the task goes to the orchestrator agent over A2A
            work = submit_over_a2a(ctx, protocol.agents)
        else:
            work = run_workflow(ctx, framework)
        final = await asyncio.wait_for(work, timeout=gen.timeout_s)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        status, error_class = classify_error(exc)
        error_message = f"{type(exc).__name__}: {exc}"[:2000]
        if status == "timeout":
            error_message = f"run exceeded timeout_s={gen.timeout_s}"
    finally:
        await ctx.cancel_delegated()  # agents' work for a run that ended must not go on
    wall = time.perf_counter() - t0
    state = await asyncio.to_thread(web.end_run, run_id)
    success, check_detail = check_run(task, final or "", state)
    cost = protocol.detach(run_id, ctx.a2a_wait_s if protocol.agents is not None else None)
    calls = gateway.end_run(run_id)
    spec = config.models[stack.model]
    return RunTrace(
        run_id=run_id,
        experiment=config.experiment,
        model=stack.model,
        protocol=stack.protocol,
        framework=stack.framework,
        task_id=task.task_id,
        task_text=task.confirmed_task,
        website=task.website,
        domain=task.domain,
        level=task.level,
        status=status,  # type: ignore[arg-type]
        error_class=error_class,
        error_message=error_message,
        final_answer=final or "",
        node_outputs=recorder.node_outputs,
        tool_calls=recorder.tool_calls,
        llm_calls=calls,
        prompt_tokens=sum(c.prompt_tokens or 0 for c in calls),
        completion_tokens=sum(c.completion_tokens or 0 for c in calls),
        n_llm_calls=len(calls),
        wall_seconds=wall,
        started_at=started_at,
        provider=spec.provider,
        served_model=spec.model,
        temperature=gen.temperature,
        max_tokens=gen.max_tokens,
        max_steps=gen.max_steps,
        max_tool_rounds=gen.max_tool_rounds,
        generation_seed=gen.seed,
        sampling_seed=config.tasks.seed,
        prompt_hashes=json.dumps(plan.prompt_hashes(), sort_keys=True),
        workflow_shape=plan.shape,
        prompt_format=plan.prompt_format is not None,
        protocol_requests=cost.requests,
        protocol_messages=cost.messages,
        protocol_calls=cost.calls,
        protocol_bytes_sent=cost.bytes_sent,
        protocol_bytes_received=cost.bytes_received,
        protocol_seconds=cost.seconds,
        success=success,
        check_detail=check_detail,
        web=config.web,
        web_state=json.dumps(state, sort_keys=True) if state is not None else None,
    )


def check_run(
    task: Task, final_answer: str, state: dict[str, Any] | None
) -> tuple[bool | None, str | None]:
    """The task's programmatic check on the run's answer and sandbox state.

    Evaluated whatever the run's status: a run that timed out after filling the cart
    correctly did the task. A state check without sandbox state (the live web) is not
    decidable: ``None`` with the reason.
    """
    if task.check is None:
        return None, None
    from mastif.sandbox import evaluate_check

    if state is None and _needs_state(task.check):
        return None, "state check not decidable on the live web"
    result = evaluate_check(task.check, final_answer, state or {})
    return result.success, result.detail


def _needs_state(check: dict[str, Any]) -> bool:
    if check.get("kind") == "state":
        return True
    return any(_needs_state(c) for c in check.get("checks", []))


async def _run_all(
    config: ExperimentConfig,
    stack: Stack,
    todo: list[tuple[Task, str]],
    plan: WorkflowPlan,
    gateway: Gateway,
    checkpoint: Checkpoint,
) -> list[RunTrace]:
    semaphore = asyncio.Semaphore(config.execution.concurrency)
    results: list[RunTrace] = []
    framework = get_framework(stack.framework)

    async def agent_work(agent: str, run_id: str, text: str, data: dict[str, Any]) -> str:
        """What an A2A agent does with a message: the orchestrator runs the workflow, a node
        agent's framework runs its node."""
        ctx: RunContext = protocol.attached(run_id)  # type: ignore[assignment]
        if agent == ORCHESTRATOR:
            work = orchestrate_over_a2a(ctx, framework, protocol.agents)
        else:
            node = next(n for n in plan.nodes if n.name == data["node"])
            work = framework.run_node(ctx, node, int(data["step"]), text)
        try:
            return await ctx.delegated(work)
        except Exception as exc:
            # the orchestrator only sees the failed task's message: classify it here
            status, error_class = classify_error(exc)
            raise DelegatedWorkFailed(
                f"[{status}/{error_class}] {type(exc).__name__}: {exc}"
            ) from exc

    agents = a2a_agent_specs(plan) if stack.protocol == "a2a" else []
    # the web first: the protocol's tool servers serve tools bound to it
    with open_web_environment(config.web, config.web_options) as web:
        tools = web.tools(list(config.tools))
        async with open_protocol(stack.protocol, tools, agents, agent_work) as protocol:

            async def one(task: Task, run_id: str) -> None:
                async with semaphore:
                    trace = await _run_task(
                        config, stack, task, run_id, plan, gateway, protocol, framework, web
                    )
                checkpoint.append(trace)
                results.append(trace)
                log.info(
                    "run %s task=%s status=%s %.1fs tokens=%d+%d tools=%d success=%s",
                    run_id, task.task_id, trace.status, trace.wall_seconds,
                    trace.prompt_tokens, trace.completion_tokens, len(trace.tool_calls),
                    trace.success,
                )  # fmt: skip

            await asyncio.gather(*(one(t, rid) for t, rid in todo))
    return results


def execute_stack(
    config: ExperimentConfig,
    stack: Stack,
    tasks: Iterable[Task],
    checkpoint_path: Path,
    server_log: Path,
    base_dir: Path | None = None,
) -> list[RunTrace]:
    """Run ``stack`` on every task; return one trace per task in task order."""
    tasks = list(tasks)
    plan = plan_workflow(
        config.workflow, config.generation, base_dir, config.prompt_format_for(stack.protocol)
    )
    fingerprint = run_fingerprint(config, stack, plan)
    ids = {t.task_id: make_run_id(stack, t.task_id, fingerprint) for t in tasks}
    checkpoint = Checkpoint(checkpoint_path)
    done = {rid: tr for rid, tr in checkpoint.load().items() if rid in set(ids.values())}
    todo = [(t, ids[t.task_id]) for t in tasks if ids[t.task_id] not in done]
    log.info("stack %s: %d tasks, %d already done", stack.path, len(tasks), len(done))
    if todo:
        spec = config.models[stack.model]
        with open_endpoint(stack.model, spec, server_log) as endpoint:
            with Gateway(endpoint, retries=config.execution.provider_retries) as gateway:
                for trace in asyncio.run(_run_all(config, stack, todo, plan, gateway, checkpoint)):
                    done[trace.run_id] = trace
    return [done[ids[t.task_id]] for t in tasks]


def setup_model_job(log_path: str | Path) -> None:
    """What every job that talks to a model needs first: a clean SIGTERM exit and a log file.

    HTTP client loggers are quietened: one INFO line per request would drown the run log.
    """
    exit_cleanly_on_sigterm()
    logging.basicConfig(
        filename=str(log_path), level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
    )
    for noisy in ("httpx", "httpx2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def exit_cleanly_on_sigterm() -> None:
    """Turn SIGTERM (a cancelled Snakemake job) into SystemExit so servers are stopped."""

    def handler(signum: int, frame: object) -> None:
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, handler)

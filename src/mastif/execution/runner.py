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
import re
import signal
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai
from tqdm import tqdm

from mastif.core.config import ExperimentConfig, GenerationSpec, ModelSpec, Stack
from mastif.core.logsetup import log_to
from mastif.core.provenance import check_framework, collect_provenance, model_server_name
from mastif.core.timing import decompose
from mastif.core.trace import RunTrace, usage_totals
from mastif.execution.budget import BudgetGate, BudgetReached, run_bounds
from mastif.execution.checkpoint import Checkpoint
from mastif.execution.stack_worker import WorkerFailed, WorkOrder, run_work
from mastif.execution.webenv import WebEnvironment, open_web_environment
from mastif.frameworks import FrameworkAdapter, RunContext, RunRecorder, get_framework
from mastif.frameworks.base import GatewayClients
from mastif.frameworks.orchestration import (
    ORCHESTRATOR,
    a2a_agent_specs,
    orchestrate_over_a2a,
    run_workflow,
    submit_over_a2a,
)
from mastif.frameworks.plan import WorkflowPlan, plan_workflow
from mastif.protocols import StackProtocol, open_protocol
from mastif.providers import Gateway, open_endpoint
from mastif.providers.cache import ResponseCache
from mastif.providers.endpoint import Endpoint
from mastif.tasks import Task

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
        # the price only prices a run afterwards (metrics), it does not shape it; nor do a
        # local server's threads (the same run on 1 and 2 threads gave the same tokens), so
        # a job with other threads (--set-threads) resumes the same runs
        "model": model.model_dump(exclude={"price": True, "options": {"n_threads"}}),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def make_run_id(stack: Stack, task_id: str, fingerprint: str, repeat: int = 0) -> str:
    """A run's identity: stack, task, repeat and the hash of all that shapes the run.

    Repeat 0 keeps the key it had before repeats existed, so older checkpoints still count.
    """
    key = f"{stack.path}|{task_id}|{fingerprint}" + (f"|{repeat}" if repeat else "")
    return hashlib.sha256(key.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class RunUnit:
    """One run to do: a task, its repeat number and its id."""

    task: Task
    repeat: int
    run_id: str


def plan_runs(
    stack: Stack, tasks: list[Task], repeats: int, fingerprint: str, shard: tuple[int, int]
) -> list[RunUnit]:
    """The runs of shard ``k`` of ``n`` (1-based): every n-th of the stack's runs in
    (repeat, task) order, so every shard gets a share of every repeat."""
    k, n = shard
    if not 1 <= k <= n:
        raise ValueError(f"shard {k} of {n}: need 1 <= k <= n")
    units = [
        RunUnit(t, r, make_run_id(stack, t.task_id, fingerprint, r))
        for r in range(repeats)
        for t in tasks
    ]
    return units[k - 1 :: n]


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


@dataclass(frozen=True)
class _StackJob:
    """What every run of one stack job shares: the stack, its workflow, the gateway to its
    model, its framework, and the versions its rows record (:mod:`mastif.core.provenance`)."""

    config: ExperimentConfig
    stack: Stack
    plan: WorkflowPlan
    gateway: Gateway
    framework: FrameworkAdapter
    versions: dict[str, Any] | None = None


def _run_context(
    job: _StackJob,
    unit: RunUnit,
    generation: GenerationSpec,
    recorder: RunRecorder,
    protocol: StackProtocol,
    web: WebEnvironment,
    http: GatewayClients | None,
) -> RunContext:
    """What the framework sees of one run: its task, workflow, tools, model and recorder."""
    run_id, gateway = unit.run_id, job.gateway
    return RunContext(
        run_id=run_id,
        # the start page as this run's absolute URL (sandbox paths resolved)
        task=unit.task.model_copy(update={"start_url": web.begin_run(run_id, unit.task)}),
        plan=job.plan,
        generation=generation,
        tools=protocol.transport,
        recorder=recorder,
        gateway_url=gateway.base_url_for(run_id, "x").rsplit("/x/v1", 1)[0],
        model_name=gateway.endpoint.model,
        gateway_token=gateway.token,
        mcp_url=protocol.mcp_url(run_id),
        mcp_http=protocol.mcp_http_client_factory(),
        page_view=lambda: asyncio.to_thread(web.page_view, run_id),
        http=http,
    )


async def _attempt(
    ctx: RunContext, protocol: StackProtocol, framework: FrameworkAdapter, timeout_s: float
) -> tuple[str, str | None, str | None, str]:
    """Run the workflow (or hand the task to the A2A orchestrator) within ``timeout_s``:
    (status, error_class, error_message, final answer); a failure is classified, never
    raised."""
    status, error_class, error_message, final = "ok", None, None, ""
    try:
        if protocol.agents is not None:  # the task goes to the orchestrator agent over A2A
            work = submit_over_a2a(ctx, protocol.agents)
        else:
            work = run_workflow(ctx, framework)
        final = await asyncio.wait_for(work, timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row
        status, error_class = classify_error(exc)
        error_message = f"{type(exc).__name__}: {exc}"  # RunTrace cuts it
        if status == "timeout":
            error_message = f"run exceeded timeout_s={timeout_s}"
    finally:
        await ctx.cancel_delegated()  # agents' work for a run that ended must not go on
        try:
            await ctx.close()  # what the frameworks opened for the run (clients, sessions)
        except Exception:  # noqa: BLE001 - a failing close must not lose the run's row
            log.warning("run %s: closing its framework resources failed", ctx.run_id, exc_info=True)
    return status, error_class, error_message, final


async def _run_task(
    job: _StackJob,
    unit: RunUnit,
    protocol: StackProtocol,
    web: WebEnvironment,
    http: GatewayClients | None = None,
) -> RunTrace:
    """One run of ``job``'s stack; its row records the job's provenance columns."""
    config, stack, plan, gateway = job.config, job.stack, job.plan, job.gateway
    task, run_id, versions = unit.task, unit.run_id, job.versions
    recorder = RunRecorder()
    # each repeat is its own sample: the seed moves with the repeat
    gen = config.generation.model_copy(update={"seed": config.generation.seed + unit.repeat})
    ctx = _run_context(job, unit, gen, recorder, protocol, web, http)
    started_at = datetime.now(UTC)
    # one origin for the run's wall clock, its model calls and its tool calls
    t0 = recorder.origin = time.perf_counter()
    gateway.begin_run(run_id, started=t0)
    protocol.attach(run_id, ctx)
    status, error_class, error_message, final = await _attempt(
        ctx, protocol, job.framework, gen.timeout_s
    )
    wall = time.perf_counter() - t0
    in_flight = gateway.in_flight(run_id)  # calls the run's end cut short still count
    state = await asyncio.to_thread(web.end_run, run_id)
    success, check_detail = check_run(task, final or "", state)
    cost = protocol.detach(run_id)
    calls = gateway.end_run(run_id)
    split = decompose(
        wall, calls, list(recorder.tool_calls), cost.seconds, in_flight, recorder.setup_spans
    )
    spec = config.models[stack.model]
    return RunTrace.of_task(
        run_id,
        config.experiment,
        stack,
        task,
        status=status,
        error_class=error_class,
        error_message=error_message,
        final_answer=final or "",
        node_outputs=recorder.node_outputs,
        tool_calls=recorder.tool_calls,
        llm_calls=calls,
        prompt_tokens=usage_totals(calls)[0],
        completion_tokens=usage_totals(calls)[1],
        n_llm_calls=len(calls),
        wall_seconds=wall,
        **split.columns(),
        started_at=started_at,
        provider=spec.provider,
        served_model=spec.model,
        temperature=gen.temperature,
        max_tokens=gen.max_tokens,
        max_steps=gen.max_steps,
        max_tool_rounds=gen.max_tool_rounds,
        request_timeout_s=gen.request_timeout_s,
        timeout_s=gen.timeout_s,
        generation_seed=gen.seed,
        sampling_seed=config.tasks.seed,
        repeat=unit.repeat,
        prompt_hashes=json.dumps(plan.prompt_hashes(), sort_keys=True),
        workflow_shape=plan.shape,
        prompt_format=plan.prompt_format is not None,
        protocol_requests=cost.requests,
        protocol_messages=cost.messages,
        protocol_calls=cost.calls,
        protocol_bytes_sent=cost.bytes_sent,
        protocol_bytes_received=cost.bytes_received,
        protocol_seconds=cost.seconds,
        protocol_exchange_seconds=cost.exchange_seconds,
        protocol_peer_seconds=cost.peer_seconds,
        success=success,
        check_detail=check_detail,
        web=config.web,
        web_state=json.dumps(state, sort_keys=True) if state is not None else None,
        **(versions or {}),
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
    from mastif.tasks.checks import evaluate_check

    if state is None and _needs_state(task.check):
        return None, "state check not decidable on the live web"
    result = evaluate_check(task.check, final_answer, state or {})
    return result.success, result.detail


def _needs_state(check: dict[str, Any]) -> bool:
    if check.get("kind") == "state":
        return True
    return any(_needs_state(c) for c in check.get("checks", []))


class Progress:
    """done/total, failures and ETA of a stack job on stderr (tqdm), plus a log line per run."""

    def __init__(self, total: int, done: int, label: str, enabled: bool) -> None:
        self.failures = 0
        self.bar = tqdm(
            total=total,
            initial=done,
            desc=label,
            unit="run",
            disable=not enabled,
            file=sys.stderr,
            mininterval=1.0,
            dynamic_ncols=True,
        )

    def finished(self, trace: RunTrace) -> None:
        if trace.status != "ok":
            self.failures += 1
            self.bar.set_postfix(failed=self.failures, refresh=False)
        self.bar.update(1)
        log.info(
            "run %s task=%s repeat=%d status=%s %.1fs tokens=%s+%s tools=%d success=%s",
            trace.run_id, trace.task_id, trace.repeat, trace.status, trace.wall_seconds,
            trace.prompt_tokens, trace.completion_tokens, len(trace.tool_calls), trace.success,
        )  # fmt: skip

    def close(self) -> None:
        self.bar.close()


async def _run_all(
    job: _StackJob,
    todo: list[RunUnit],
    checkpoint: Checkpoint,
    progress: Progress,
    budget: BudgetGate | None = None,
) -> list[RunTrace]:
    config, stack, plan, framework = job.config, job.stack, job.plan, job.framework
    concurrency = config.concurrency_for(stack.model)
    semaphore = asyncio.Semaphore(concurrency)
    # tools and sandbox calls run in worker threads: enough of them for every run in flight
    # (asyncio's default pool has cores + 4)
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=max(8, 2 * concurrency), thread_name_prefix="mastif-io")
    )
    results: list[RunTrace] = []

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
        if web.sandbox is not None:
            # the sandbox's loopback port differs per job: keep it out of cached answers
            origin = web.sandbox.base_url.split("://", 1)[-1]
            job.gateway.volatile[origin] = "sandbox.mastif.invalid"
        tools = web.tools(list(config.tools))
        async with open_protocol(stack.protocol, tools, agents, agent_work) as protocol:
            http = GatewayClients.open(concurrency)

            async def one(unit: RunUnit) -> None:
                async with semaphore:
                    # reserved when it is about to start, not when queued: a refusal stops
                    # the queued runs, the ones in flight finish
                    if budget is not None and not await asyncio.to_thread(
                        budget.admit, unit.run_id, unit.task.task_id
                    ):
                        return
                    trace = await _run_task(job, unit, protocol, web, http)
                checkpoint.append(trace)
                if budget is not None:  # after the checkpoint: see BudgetGate.settle_done
                    await asyncio.to_thread(budget.settle, trace)
                results.append(trace)
                progress.finished(trace)

            try:
                await asyncio.gather(*(one(u) for u in todo))
            finally:
                await http.aclose()
    return results


def _checked_framework(
    stack: Stack, model_server: tuple[str | None, str | None]
) -> tuple[FrameworkAdapter, dict[str, Any]]:
    """The stack's framework adapter, checked against the installed library
    (IncompatibleLibraryError: the job stops, no run starts), and the versions every new run
    row records: this environment's packages, and the model server the harness runs."""
    framework = get_framework(stack.framework)
    check_framework(framework)
    versions = collect_provenance(framework, stack.protocol, "remote").columns()
    versions["model_server"], versions["model_server_version"] = model_server
    log.info("stack %s: versions %s", stack.path, {k: v for k, v in versions.items() if v})
    return framework, versions


def model_server_of(spec: ModelSpec) -> tuple[str | None, str | None]:
    """(server, version) of the model server a stack job of ``spec`` talks to, as this
    process (the harness, which starts it) knows them."""
    native = None
    if model_server_name(spec.provider, spec.options.server) == "llama-server":
        from mastif.providers.local import native_server_source

        native = native_server_source()
    found = collect_provenance(None, "standard", spec.provider, spec.options.server, native)
    return found.model_server, found.model_server_version


def _pending_runs(
    config: ExperimentConfig,
    stack: Stack,
    tasks: list[Task],
    checkpoint: Checkpoint,
    base_dir: Path | None,
    shard: tuple[int, int],
) -> tuple[WorkflowPlan, list[RunUnit], dict[str, RunTrace]]:
    """The stack's workflow, the runs of ``shard``, and those of them already in the
    stack's checkpoints."""
    plan = plan_workflow(
        config.workflow, config.generation, base_dir, config.prompt_format_for(stack.protocol)
    )
    fingerprint = run_fingerprint(config, stack, plan)
    units = plan_runs(stack, tasks, config.repeats, fingerprint, shard)
    wanted = {u.run_id for u in units}
    done = {rid: tr for rid, tr in checkpoint.load().items() if rid in wanted}
    log.info(
        "stack %s shard %d/%d: %d runs, %d already done",
        stack.path, shard[0], shard[1], len(units), len(done),
    )  # fmt: skip
    return plan, units, done


def execute_stack(
    config: ExperimentConfig,
    stack: Stack,
    tasks: Iterable[Task],
    checkpoint_path: Path,
    server_log: Path,
    base_dir: Path | None = None,
    shard: tuple[int, int] = (1, 1),
    budget: BudgetGate | None = None,
) -> list[RunTrace]:
    """Run ``stack``'s share ``shard`` (k of n) of its runs (every task ``config.repeats``
    times); return one trace per run, in (repeat, task) order.

    ``budget`` (:mod:`mastif.execution.budget`): each run starts only once its upper bound is
    reserved in the shared ledger. When one does not fit, no further run starts, the runs
    in flight finish (checkpointed), and :class:`~mastif.execution.budget.BudgetReached` is raised:
    the shard is incomplete, and a rerun with a larger budget resumes from the checkpoint.

    Runs already in the stack's checkpoints (a killed or failed earlier job) are not redone.
    Before any run, the framework's adapter is checked against the installed library
    (:func:`mastif.core.provenance.check_framework`: an :class:`IncompatibleLibraryError` stops
    the job, before a model server starts), and the versions every new run row records are
    collected once (:func:`mastif.core.provenance.collect_provenance`).
    """
    checkpoint = Checkpoint(checkpoint_path)
    plan, units, done = _pending_runs(config, stack, list(tasks), checkpoint, base_dir, shard)
    todo = [u for u in units if u.run_id not in done]
    if budget is not None:
        budget.settle_done(done.values())
    if todo and budget is not None:
        budget.bounds = run_bounds(config, stack, [u.task for u in todo], budget.price, base_dir)
        budget.check(todo[0].task.task_id)  # BudgetReached before any server starts
    if todo:
        spec = config.models[stack.model]
        order = WorkOrder(
            config=config,
            stack=stack,
            runs=[(u.task, u.repeat, u.run_id) for u in todo],
            total=len(units),
            done=len(done),
            checkpoint=Path(checkpoint_path),
            shard=shard,
            model_server=model_server_of(spec),
            base_dir=base_dir,
            log=_current_log(),
        )
        # the model's server runs here, the framework in its own environment
        with open_endpoint(stack.model, spec, server_log) as endpoint:
            traces = run_work(order, endpoint, budget, run_pending)
        for trace in traces:
            done[trace.run_id] = trace
        if budget is not None and budget.refusal is not None:
            log.warning(
                "stack %s: stopped by the budget after %d new runs, %d of %d done: %s",
                stack.path, len(traces), len(done), len(units), budget.refusal,
            )  # fmt: skip
            raise BudgetReached(budget.refusal)
    missing = [u.run_id for u in units if u.run_id not in done]
    if missing:
        raise WorkerFailed(
            f"stack {stack.path}: {len(missing)} of {len(units)} runs have no row "
            f"(first {missing[0]}); the job's log says why"
        )
    return [done[u.run_id] for u in units]


def run_pending(order: WorkOrder, endpoint: Endpoint, budget: BudgetGate | None) -> list[RunTrace]:
    """The framework's side of a stack job (in its own environment): the gateway in front of
    ``endpoint``, the web, the protocol and the framework over ``order``'s runs, each
    appended to the checkpoint as it finishes; the new runs' traces."""
    config, stack = order.config, order.stack
    framework, versions = _checked_framework(stack, order.model_server)
    spec = config.models[stack.model]
    plan = plan_workflow(
        config.workflow, config.generation, order.base_dir, config.prompt_format_for(stack.protocol)
    )
    todo = [RunUnit(task, repeat, run_id) for task, repeat, run_id in order.runs]
    cache = response_cache(config)
    label = f"{stack.path} {order.shard[0]}/{order.shard[1]}"
    progress = Progress(order.total, order.done, label, config.execution.progress)
    try:
        with Gateway(
            endpoint,
            retries=config.execution.provider_retries,
            request_timeout_s=spec.options.request_timeout_s,
            cache=cache,
            call_timeout_s=config.generation.request_timeout_s,
        ) as gateway:
            job = _StackJob(config, stack, plan, gateway, framework, versions)
            checkpoint = Checkpoint(order.checkpoint)
            traces = asyncio.run(_run_all(job, todo, checkpoint, progress, budget))
            log.info(
                "stack %s: %d upstream requests; cache %s; 429s %d (limit fell to %s)",
                stack.path, gateway.upstream_requests,
                f"{cache.hits} hits / {cache.misses} misses" if cache else "off",
                gateway.limit.throttles if gateway.limit else 0,
                gateway.limit.lowest if gateway.limit else "-",
            )  # fmt: skip
    finally:
        progress.close()
        if budget is not None:
            budget.release_unsettled()
    return traces


def _current_log() -> Path | None:
    """The file this process logs to (:func:`mastif.core.logsetup.log_to`), for the worker."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            return Path(handler.baseFilename)
    return None


def response_cache(config: ExperimentConfig) -> ResponseCache | None:
    """The configured response cache, or None when it is off."""
    path = config.execution.response_cache
    return ResponseCache(path) if path else None


def parse_scatteritem(item: str) -> tuple[int, int]:
    """Snakemake's scatteritem ``"k-of-n"`` -> ``(k, n)``."""
    k, sep, n = item.partition("-of-")
    if not sep or not k.isdigit() or not n.isdigit():
        raise ValueError(f"not a scatteritem: {item!r} (expected 'k-of-n')")
    return int(k), int(n)


def setup_model_job(log_path: str | Path) -> None:
    """What every job that talks to a model needs first: a clean SIGTERM exit and a log file
    (:func:`mastif.core.logsetup.log_to`: logging, warnings and uncaught exceptions, with the HTTP
    client loggers quietened)."""
    exit_cleanly_on_sigterm()
    log_to(log_path)


def exit_cleanly_on_sigterm() -> None:
    """Turn SIGTERM (a cancelled Snakemake job) into SystemExit so servers are stopped."""

    def handler(signum: int, frame: object) -> None:
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, handler)

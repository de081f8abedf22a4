"""A checked record of a MASTIF log as a :class:`~mastif.core.trace.RunTrace`.

:func:`run_trace` maps what the log recorded for one run, nothing more
(``docs/import.md`` has the column-by-column mapping): the error text classified, the
answer unwrapped from its protocol envelope, the reasoning steps as node outputs and tool
calls, token counts as estimates, and every column the log does not record null.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from mastif.core.config import Stack
from mastif.core.trace import NodeOutput, RunTrace, ToolCall
from mastif.importers.envelopes import unwrap_envelope
from mastif.importers.mastif_names import classify_error
from mastif.importers.mastif_records import (
    MAX_TIMESTAMP,
    CheckedRun,
    LogInfo,
    Where,
    int_in_range,
    number_in_range,
    tool_log,
    type_name,
)
from mastif.tasks import Task

#: ``origin`` of every imported run
ORIGIN = "mastif_log"


#: RunTrace fields a MASTIF log does not record: null, never our runs' default 0
NOT_RECORDED: dict[str, None] = dict.fromkeys(
    [
        "prompt_tokens", "completion_tokens", "n_llm_calls",  # no API usage, no LLM calls
        "temperature", "max_tokens", "max_steps", "max_tool_rounds",  # in its YAML only
        "generation_seed", "sampling_seed", "prompt_hashes", "workflow_shape",
        "protocol_requests", "protocol_messages", "protocol_calls",  # not measured as ours
        "protocol_bytes_sent", "protocol_bytes_received", "protocol_seconds",
        "protocol_exchange_seconds", "protocol_peer_seconds",
    ]
)  # fmt: skip


def _tool_counts(log: dict[str, Any] | None) -> tuple[int | None, int | None]:
    """(calls, successful calls) from a MASTIF tool_log; (None, None) when it has none."""
    if log is None:
        return None, None
    total, ok = log.get("total_calls"), log.get("successful_calls")
    if isinstance(total, int) and isinstance(ok, int):
        return total, ok
    per_tool = log.get("per_tool")
    if isinstance(per_tool, dict) and per_tool:
        calls = sum(int(s.get("calls", 0)) for s in per_tool.values() if isinstance(s, dict))
        failures = sum(int(s.get("failures", 0)) for s in per_tool.values() if isinstance(s, dict))
        return calls, calls - failures
    return None, None


def _call_outcome(name: str, log: dict[str, Any] | None) -> bool | None:
    """A tool's per-call outcome where the tool_log decides it: every call of the tool
    succeeded (True) or every one failed (False); else None (not recorded per call)."""
    per_tool = (log or {}).get("per_tool")
    stats = per_tool.get(name) if isinstance(per_tool, dict) else None
    if not isinstance(stats, dict) or not stats.get("calls"):
        return None
    failures = stats.get("failures", 0)
    if failures == 0:
        return True
    if failures == stats["calls"]:
        return False
    return None


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _steps(
    steps: list[Any], tools: set[str], log: dict[str, Any] | None, index: int, where: Where
) -> tuple[list[NodeOutput], list[ToolCall], datetime | None]:
    """Node outputs (each step's thought, in the workflow node it belongs to) and tool calls
    (steps whose action names a tool) of one run, and the time of its first step."""
    outputs: list[NodeOutput] = []
    calls: list[ToolCall] = []
    node = "run"
    times: list[float] = []
    for k, step in enumerate(steps):
        if not isinstance(step, dict):
            raise where.fail(
                index, f"reasoning_steps[{k}]", f"expected an object, got {type_name(step)}"
            )
        number = step.get("step_number")
        if isinstance(number, int) and not isinstance(number, bool):
            int_in_range(number, where, index, f"reasoning_steps[{k}].step_number")
        else:
            number = k + 1
        stamp = step.get("timestamp")
        if isinstance(stamp, int | float) and not isinstance(stamp, bool):
            times.append(
                number_in_range(stamp, 0.0, MAX_TIMESTAMP, where, index,
                                f"reasoning_steps[{k}].timestamp", "Unix seconds")
            )  # fmt: skip
        action = step.get("action")
        action = action if isinstance(action, str) and action else None
        if action is not None and action in tools:
            ok = _call_outcome(action, log)
            observation = _as_text(step.get("observation"))
            if ok is None:
                error: str | None = "outcome not recorded per call in the MASTIF log"
            else:
                error = None if ok else observation or "failed (per the MASTIF log's tool_log)"
            calls.append(
                ToolCall(
                    node=node,
                    step=number,
                    name=action,
                    arguments=_as_text(step.get("action_input")),
                    ok=ok,
                    output=observation,
                    error=error,
                    duration_s=None,
                )
            )
        elif action is not None:
            node = action  # a workflow node's execution starts
        outputs.append(NodeOutput(node, number, "reasoning_step", _as_text(step.get("thought"))))
    started = datetime.fromtimestamp(min(times), UTC) if times else None
    return outputs, calls, started


def _outcome(entry: CheckedRun) -> tuple[str, str | None, str | None]:
    """(status, error_class, error_message): a run with an error, or marked failed, is one."""
    if entry.success and not entry.error:
        return "ok", None, None
    status, error_class = classify_error(entry.error or "")
    return (
        status,
        error_class,
        (entry.error or "the MASTIF log marks the run failed without an error message"),
    )


def _tools(declared: frozenset[str], log: dict[str, Any] | None) -> set[str]:
    """The names a step's action may call: declared by the experiment or in the tool log."""
    tools = set(declared)
    if log is not None:
        tools |= set(log.get("per_tool") or {})
        tools |= {x for x in log.get("tools_used") or [] if isinstance(x, str)}
    return tools


def _import_meta(
    entry: CheckedRun,
    info: LogInfo,
    log: dict[str, Any] | None,
    occurrences: int,
    envelope: str | None,
    level_source: str,
) -> dict[str, Any]:
    """What the log recorded of the run that has no column (``RunTrace.import_meta``)."""
    run = entry.run
    run_metadata = dict(run.get("metadata") or {})
    run_metadata.pop("tool_log", None)
    return {
        "log": info.header,
        "result_index": entry.index,
        "occurrences": occurrences,
        "model_name": entry.model_name,
        "protocol": entry.protocol,
        "framework": entry.framework,
        "task_index": entry.task_index,
        "task": run["task"],
        "success": entry.success,
        "reasoning_steps_count": run.get("reasoning_steps_count", len(entry.steps)),
        "metadata": run_metadata,
        "tool_log": log,
        "tokens": {
            k: run[k] for k in ("reasoning_tokens", "output_tokens", "total_tokens") if k in run
        },
        "envelope": envelope,
        "level_source": level_source,
    }


def run_trace(
    entry: CheckedRun, info: LogInfo, task: Task, model: str, occurrences: int, level_source: str
) -> tuple[RunTrace, str | None]:
    """The run ``entry`` records, as model ``model``'s run of ``task``, and the kind of the
    envelope its answer was unwrapped from (None: not wrapped)."""
    stack = Stack(model, entry.protocol_id, entry.framework_id)
    status, error_class, error_message = _outcome(entry)
    answer, kind = unwrap_envelope(entry.response)
    if status != "ok" and entry.error and answer.strip() == entry.error.strip():
        answer = ""  # the log repeats the error as the response: no answer
    log = tool_log(entry.run)
    outputs, calls, started = _steps(
        entry.steps, _tools(info.declared_tools, log), log, entry.index, Where(info.path)
    )
    last_step = max((o.step for o in outputs), default=0)
    outputs.append(NodeOutput("final", last_step + 1, "final_answer", answer))
    n_calls, n_ok = _tool_counts(log)
    meta = _import_meta(entry, info, log, occurrences, kind, level_source)
    run_id = f"{ORIGIN}|{info.key}|{stack.path}|{entry.task_id}"
    trace = RunTrace.of_task(
        hashlib.sha256(run_id.encode()).hexdigest()[:20],
        info.experiment,
        stack,
        task,
        status=status,
        error_class=error_class,
        error_message=error_message,
        final_answer=answer,
        node_outputs=outputs,
        tool_calls=calls,
        llm_calls=[],
        wall_seconds=entry.latency,
        started_at=started,
        provider="",
        served_model=entry.model_name,
        repeat=0,
        # the original's protocol condition wrapped every prompt in the protocol's
        # message format (its reasoning steps show the wrapped node inputs)
        prompt_format=stack.protocol != "standard",
        success=None,
        check_detail=None,
        web="live",
        web_state=None,
        **NOT_RECORDED,
        origin=ORIGIN,
        tokens_estimated=True,
        est_reasoning_tokens=entry.reasoning_tokens,
        est_output_tokens=entry.output_tokens,
        raw_final_answer=entry.response if answer != entry.response else None,
        tool_log_calls=n_calls,
        tool_log_ok=n_ok,
        import_meta=json.dumps(meta, sort_keys=True, ensure_ascii=False, default=str),
    )
    return trace, kind

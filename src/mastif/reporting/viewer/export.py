"""What the trace viewer shows, as plain JSON-ready dicts: the grid index and one run's detail.

The grid index is columnar (one list per field, a run being a position in every list) so the
index of the paper's 10,800 runs stays a few hundred KiB and parses in milliseconds; stacks
and tasks are lists the runs point into by position. A run's detail is everything the run
page shows: its task, node outputs with the values tagged in each, LLM and tool calls, the
protocol's counts, the judge's scores and rationales, the check and the sandbox state.

Missing values stay null (the page shows them as unknown), never 0: a NaN becomes null too,
since JSON has no NaN and a NaN here always means "not measured".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

import polars as pl

from mastif.core import metric_registry as registry
from mastif.core.factors import STACK_KEYS
from mastif.core.textclip import clip_text

#: how the page scales a metric of the registry (mastif.core.metric_registry): "bool"
#: (true/false), "score" (0..1, higher is better), "amount" (a non-negative quantity scaled
#: over its observed range, lower is not judged better or worse)
_GRID_KIND: dict[registry.Scale, str] = {
    registry.Scale.BINARY: "bool",
    registry.Scale.SCORE: "score",
    registry.Scale.RATE: "score",
    registry.Scale.VALUE: "score",
    registry.Scale.SECONDS: "amount",
    registry.Scale.TOKENS: "amount",
}

#: columns of ``results/metrics/runs.parquet`` the grid can colour and sort by, with their
#: label and kind: the registry's per-run metrics (its words), then counts and cost
GRID_METRICS: tuple[tuple[str, str, str], ...] = (
    *(
        (m, registry.metric(m).axis, _GRID_KIND[registry.metric(m).scale])
        for m in registry.CHECK_FIRST
    ),
    ("n_tool_calls", "tool calls", "amount"),
    ("protocol_messages", "protocol messages", "amount"),
    ("cost_usd", "cost (USD)", "amount"),
)

#: significant digits kept of a float in the grid index (colours and sorting need no more)
GRID_DIGITS = 4

#: characters of a task's text kept in the grid index (the run page has it whole)
TASK_TEXT_CHARS = 240


def json_ready(value: Any) -> Any:
    """``value`` with NaN and infinities as None and dates as ISO text, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def round_float(value: float | None, digits: int = GRID_DIGITS) -> float | None:
    """``value`` to ``digits`` significant digits; None (and NaN) stays None."""
    if value is None or not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    return round(value, digits - 1 - int(math.floor(math.log10(abs(value)))))


def task_entries(task_ids: Sequence[str], tasks: pl.DataFrame, runs: pl.DataFrame) -> list[dict]:
    """One entry per task id: its text (clipped), domain, level and website.

    The text comes from the task table, else from a run of the task (``task_text``), so a
    task missing from the table still has a label.
    """
    by_id = {r["task_id"]: r for r in tasks.to_dicts()} if "task_id" in tasks.columns else {}
    run_text: dict[str, str | None] = {}
    if "task_text" in runs.columns:
        for tid, text in runs.select("task_id", "task_text").unique("task_id").iter_rows():
            run_text[tid] = text
    entries = []
    for tid in task_ids:
        row = by_id.get(tid, {})
        text = row.get("confirmed_task") or run_text.get(tid) or ""
        entries.append(
            {
                "id": tid,
                "text": text[:TASK_TEXT_CHARS],
                "domain": row.get("domain"),
                "level": row.get("level"),
                "website": row.get("website"),
            }
        )
    return entries


def grid_index(
    metrics_runs: pl.DataFrame, tasks: pl.DataFrame, *, title: str | None = None
) -> dict[str, Any]:
    """The grid's data: stacks, tasks and one entry per run in every column list.

    Runs keep the order of ``metrics_runs`` (stack by stack as the workflow concatenated
    them); a run's position is its number, which names its detail file. Run ids are left out
    (the run's page has its id): they would be the largest part of the index. Stacks are in order
    of first appearance; tasks in the task table's order, then any others in order of
    appearance.
    """
    stacks = metrics_runs.select(STACK_KEYS).unique(maintain_order=True).to_dicts()
    stack_pos = {tuple(s[k] for k in STACK_KEYS): i for i, s in enumerate(stacks)}
    table_ids = tasks["task_id"].to_list() if "task_id" in tasks.columns else []
    seen_ids = metrics_runs["task_id"].unique(maintain_order=True).to_list()
    present = set(seen_ids)
    task_ids = [t for t in table_ids if t in present]
    in_table = set(task_ids)
    task_ids += [t for t in seen_ids if t not in in_table]
    task_pos = {t: i for i, t in enumerate(task_ids)}

    columns: dict[str, list[Any]] = {
        "stack": [stack_pos[key] for key in metrics_runs.select(STACK_KEYS).iter_rows()],
        "task": [task_pos[t] for t in metrics_runs["task_id"].to_list()],
        "repeat": _column(metrics_runs, "repeat"),
        "status": _column(metrics_runs, "status"),
        "judge_status": _column(metrics_runs, "judge_status"),
    }
    for key, _label, kind in GRID_METRICS:
        values = _column(metrics_runs, key)
        if kind != "bool":
            values = [round_float(float(v)) if v is not None else None for v in values]
        columns[key] = values
    return {
        "format": 1,
        "title": title,
        "n_runs": metrics_runs.height,
        "stacks": stacks,
        "tasks": task_entries(task_ids, tasks, metrics_runs),
        "metrics": [
            {"key": key, "label": label, "kind": kind} for key, label, kind in GRID_METRICS
        ],
        "runs": columns,
    }


def judge_gate(validity: pl.DataFrame | None) -> dict[str, Any]:
    """The judge gate's verdict (:func:`mastif.analysis.inference.gate_verdict`, the one
    definition) for the page's banner: ``{"validated": bool, "text": str}``; "not
    assessable" (never validated) without a validity table."""
    from mastif.analysis.inference import gate_verdict

    verdict = gate_verdict(validity)
    return {"validated": verdict.validated, "text": verdict.text}


def _column(frame: pl.DataFrame, name: str) -> list[Any]:
    """A column as a list; all None when the frame lacks it (an older table)."""
    if name not in frame.columns:
        return [None] * frame.height
    return frame[name].to_list()


#: run columns shown in the run page's summary, in order
RUN_SUMMARY_KEYS = (
    "run_id", "experiment", "model", "protocol", "framework", "task_id", "repeat", "status",
    "error_class", "error_message", "final_answer", "raw_final_answer", "prompt_tokens",
    "completion_tokens", "n_llm_calls", "n_cached_calls", "wall_seconds", "wall_model_s",
    "wall_queue_s", "wall_tools_s", "wall_protocol_s", "wall_setup_s", "wall_harness_s",
    "started_at", "provider", "served_model", "temperature", "max_tokens", "max_steps",
    "max_tool_rounds", "timeout_s", "generation_seed", "sampling_seed", "workflow_shape",
    "origin", "tokens_estimated",
)  # fmt: skip
PROTOCOL_KEYS = (
    "protocol_requests", "protocol_messages", "protocol_calls", "protocol_bytes_sent",
    "protocol_bytes_received", "protocol_exchange_seconds", "protocol_peer_seconds",
    "protocol_seconds",
)  # fmt: skip
CHECK_KEYS = ("success", "check_detail", "web")
JUDGE_KEYS = (
    "judge_status", "judge_model", "TU", "TA", "TCR", "TU_rationale", "TA_rationale",
    "TCR_rationale", "judge_attempts", "judge_error", "judge_n_clipped", "judge_panel",
    "judge_raw_reply",
)  # fmt: skip
VALUES_KEYS = (
    "has_final_answer", "prompt_values", "output_values", "n_value_sets",
    "n_empty_value_sets", "IVS", "IVS_prompt_output", "IVS_reasoning",
)  # fmt: skip


def run_detail(
    run: Mapping[str, Any],
    judged: Mapping[str, Any] | None,
    values: Mapping[str, Any] | None,
    task: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Everything the run page shows of one run (a row of the runs table), with its judged
    and values rows (None: the run has none, e.g. not judged yet) and its task's row.

    Node outputs carry the values tagged in them: the values table's step_values are one
    set per node output that is not the final answer, in order (``values.split_run_texts``),
    so the i-th set belongs to the i-th node output; a node output past them is the answer's.
    """
    step_values = list((values or {}).get("step_values") or [])
    node_outputs = []
    for i, out in enumerate(run.get("node_outputs") or []):
        entry = dict(out)
        entry["values"] = step_values[i] if i < len(step_values) else None
        entry["is_answer"] = values is not None and i >= len(step_values)
        node_outputs.append(entry)
    detail: dict[str, Any] = {
        "run": _clipped({k: run.get(k) for k in RUN_SUMMARY_KEYS}, "error_message"),
        "task": _task_detail(run, task),
        "node_outputs": node_outputs,
        "llm_calls": [_clipped(c, "error") for c in run.get("llm_calls") or []],
        "tool_calls": [_clipped(c, "output", "error") for c in run.get("tool_calls") or []],
        "protocol": {k: run.get(k) for k in PROTOCOL_KEYS},
        "check": {
            **{k: run.get(k) for k in CHECK_KEYS},
            "web_state": _parsed_json(run.get("web_state")),
        },
        "judge": (
            None
            if judged is None
            else _clipped({k: judged.get(k) for k in JUDGE_KEYS}, "judge_error")
        ),
        "values": None if values is None else {k: values.get(k) for k in VALUES_KEYS},
    }
    return json_ready(detail)


def _clipped(entry: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """``entry`` with the texts under ``keys`` cut as a trace cuts them when it is made
    (:func:`~mastif.core.textclip.clip_text`): tables written before that, or imported,
    show no more (issue 49)."""
    out = dict(entry)
    for key in keys:
        if isinstance(out.get(key), str):
            out[key] = clip_text(out[key])
    return out


def _task_detail(run: Mapping[str, Any], task: Mapping[str, Any] | None) -> dict[str, Any]:
    """The task as the run page shows it; the run's own copy where the table lacks it."""
    task = task or {}
    return {
        "task_id": run.get("task_id"),
        "text": task.get("confirmed_task") or run.get("task_text"),
        "website": task.get("website") or run.get("website"),
        "domain": task.get("domain") or run.get("domain"),
        "level": task.get("level") or run.get("level"),
        "start_url": task.get("start_url"),
        "reference_steps": task.get("reference_steps"),
        "check": _parsed_json(task.get("check")),
    }


def _parsed_json(text: str | None) -> Any:
    """JSON text as its value (the page pretty-prints it); text that is not JSON as is."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text

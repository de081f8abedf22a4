"""A MASTIF log read and its records checked, before anything is mapped or written.

:func:`read_log` reads the file and checks its top level (a JSON object with a non-empty
``results`` list) and what it says about itself (:class:`LogInfo`); :func:`check_runs`
checks every entry of ``results`` (required fields, types, counts and numbers in range,
one task per task id) and keeps the last occurrence of each (stack, task). Every problem is
a :class:`MastifLogError` naming the file, the run index and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import typing
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mastif.importers.mastif_names import ID_PATTERN, framework_id, protocol_id
from mastif.tasks import Task

#: website of a task whose text names none (MASTIF's "standard" test mode)
UNKNOWN_WEBSITE = "unknown"


class MastifLogError(ValueError):
    """The file is not a usable MASTIF log; the message names the run index and field."""


#: largest count (tokens, tool calls, indices, step numbers) a log may give: the Parquet
#: columns are int64, and a larger number is a broken or hostile log, not a measurement
MAX_COUNT = 2**53
#: longest run a log may record, in seconds (30 days); NaN/Infinity are never a latency
MAX_LATENCY_S = 30 * 24 * 3600.0
#: step timestamps (Unix seconds) must fall in 1970..2100
MAX_TIMESTAMP = 4102444800.0


@dataclass(frozen=True)
class LogInfo:
    """What a log says about itself, for every run imported from it."""

    path: Path
    sha256: str
    experiment: str
    #: identifies the experiment, so a partial log that grew keeps its runs' ids
    key: str
    #: tools the experiment declared (``metadata.tools``)
    declared_tools: frozenset[str]
    #: the log's file and times, as each run's ``import_meta["log"]``
    header: dict[str, Any]


@dataclass(frozen=True)
class CheckedRun:
    """One entry of the log's ``results``, checked; names stripped, ids mastif's."""

    index: int  # in ``results``
    run: dict[str, Any]  # the entry verbatim
    model_name: str
    protocol: str
    framework: str
    success: bool
    latency: float
    task_index: int | None
    response: str
    error: str | None
    steps: list[Any]
    reasoning_tokens: int | None
    output_tokens: int | None
    protocol_id: str
    framework_id: str
    task_id: str


#: (model name, protocol id, framework id, task id): one run of a stack on a task
RunKey = tuple[str, str, str, str]


@dataclass
class CheckedLog:
    """The checked runs of a log, the last occurrence of each, and its tasks."""

    #: the last occurrence of each run, in the order of the last occurrences
    runs: dict[RunKey, CheckedRun] = field(default_factory=dict)
    occurrences: Counter[RunKey] = field(default_factory=Counter)
    #: task id -> the task's fields and the index of the first run of it
    tasks: dict[str, tuple[dict[str, Any], int]] = field(default_factory=dict)


class Where:
    """Error messages that name the file, the run index and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, index: int | None, fieldname: str, problem: str) -> MastifLogError:
        where = f"results[{index}]" if index is not None else "log"
        return MastifLogError(f"{self.path}: {where}: {fieldname}: {problem}")


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _get(
    run: Mapping[str, Any],
    name: str,
    types: tuple[type, ...],
    where: Where,
    index: int,
    *,
    required: bool = False,
) -> Any:
    """``run[name]`` checked against ``types`` (bool is never an int here)."""
    if name not in run or run[name] is None:
        if required:
            raise where.fail(index, name, "missing (required)")
        return None
    value = run[name]
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        expected = " or ".join(t.__name__ for t in types)
        raise where.fail(index, name, f"expected {expected}, got {type_name(value)}")
    return value


def int_in_range(value: Any, where: Where, index: int, name: str, low: int = 0) -> int:
    """``value`` as a count: an int (not bool, not a float) in ``low``..MAX_COUNT."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.fail(index, name, f"expected a whole number, got {value!r}")
    if not low <= value <= MAX_COUNT:
        raise where.fail(index, name, f"out of range ({value}; expected {low}..{MAX_COUNT})")
    return value


def _count(run: Mapping[str, Any], name: str, where: Where, index: int, low: int = 0) -> int | None:
    """Optional count ``run[name]``: None when absent, else checked by :func:`int_in_range`."""
    value = _get(run, name, (int,), where, index)  # the type error as for other fields
    return None if value is None else int_in_range(value, where, index, name, low)


def number_in_range(
    value: float, low: float, high: float, where: Where, index: int, name: str, unit: str
) -> float:
    """``value`` as a finite float in ``low..high`` (NaN and Infinity are not numbers here)."""
    number = float(value)
    if not math.isfinite(number):
        raise where.fail(index, name, f"not a finite number ({value!r})")
    if not low <= number <= high:
        raise where.fail(
            index, name, f"out of range ({value!r}; expected {low:g}..{high:g} {unit})"
        )
    return number


def _optional_task_field(name: str) -> bool:
    """Whether :class:`Task` accepts None for ``name`` (domain/subdomain)."""
    return type(None) in typing.get_args(Task.model_fields[name].annotation)


def _line(text: str, label: str) -> str | None:
    found = re.search(rf"^\s*{label}:[ \t]*(.+?)\s*$", text, re.M | re.I)
    return found.group(1) if found else None


def _task_fields(task: Any, index: int, task_index: int | None, where: Where) -> dict[str, Any]:
    """Task record fields (Task's own names) from the log's ``task``: MASTIF's mind2web text
    ``Website: ...\\nDomain: ...\\nGoal: ...``, any other text, or a Mind2Web record."""
    if isinstance(task, dict):
        goal = task.get("confirmed_task") or task.get("goal") or task.get("task")
        if not isinstance(goal, str) or not goal.strip():
            raise where.fail(index, "task.confirmed_task", "missing in the task record")
        steps = task.get("action_reprs", task.get("reference_steps")) or []
        if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
            raise where.fail(index, "task.action_reprs", "expected a list of strings")
        given_id = task.get("annotation_id") or task.get("task_id")
        fields = {
            "task_id": str(given_id) if given_id else None,
            "confirmed_task": goal.strip(),
            "website": task.get("website") or None,
            "domain": task.get("domain") or None,
            "subdomain": task.get("subdomain") or None,
            "reference_steps": steps,
            "level": task.get("level") if not steps else None,
        }
    else:
        text = task.strip()
        goal_at = re.search(r"^\s*Goal:[ \t]*", text, re.M | re.I)
        goal = text[goal_at.end() :].strip() if goal_at else text
        fields = {
            "task_id": None,
            "confirmed_task": goal or text,
            "website": _line(text, "Website"),
            "domain": _line(text, "Domain"),
            "subdomain": _line(text, "Subdomain"),
            "reference_steps": [],
            "level": None,
        }
    if fields["task_id"] is None:
        fields["task_id"] = (
            f"task-{task_index:03d}"
            if task_index is not None and task_index >= 0
            else "task-" + hashlib.sha256(fields["confirmed_task"].encode()).hexdigest()[:12]
        )
    fields["website"] = fields["website"] or UNKNOWN_WEBSITE
    for name in ("domain", "subdomain"):
        if fields[name] is None and not _optional_task_field(name):
            fields[name] = "unknown"
    return fields


def tool_log(run: Mapping[str, Any]) -> dict[str, Any] | None:
    metadata = run.get("metadata")
    log = metadata.get("tool_log") if isinstance(metadata, dict) else None
    log = log if isinstance(log, dict) and log else run.get("tool_log")
    return log if isinstance(log, dict) and log else None


def _check_tool_log(log: dict[str, Any] | None, where: Where, index: int) -> None:
    """The tool_log's counts are whole numbers in range, where it gives them."""
    if log is None:
        return
    for name in ("total_calls", "successful_calls"):
        if name in log and log[name] is not None:
            int_in_range(log[name], where, index, f"tool_log.{name}")
    per_tool = log.get("per_tool")
    if isinstance(per_tool, dict):
        for tool, stats in per_tool.items():
            if isinstance(stats, dict):
                for name in ("calls", "failures"):
                    if name in stats and stats[name] is not None:
                        int_in_range(stats[name], where, index,
                                     f"tool_log.per_tool.{tool}.{name}")  # fmt: skip


def read_log(path: Path) -> tuple[LogInfo, list[Any]]:
    """The log's facts about itself and its ``results``, checked as far as its top level."""
    where = Where(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MastifLogError(f"{path}: cannot read: {exc}") from None
    try:
        log = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MastifLogError(f"{path}: not JSON: {exc}") from None
    if not isinstance(log, dict):
        raise where.fail(None, "<top level>", f"expected an object, got {type_name(log)}")
    results = log.get("results")
    if not isinstance(results, list):
        problem = "missing" if results is None else f"expected a list, got {type_name(results)}"
        raise where.fail(None, "results", problem + " (not a MASTIF results log?)")
    if not results:
        raise where.fail(None, "results", "empty: no runs to import")
    metadata = log.get("metadata") if isinstance(log.get("metadata"), dict) else {}
    sha = hashlib.sha256(raw).hexdigest()
    experiment = str(
        metadata.get("experiment_name")
        or (Path(str(log["yaml_file"])).stem if log.get("yaml_file") else path.stem)
    )
    started_at = log.get("started_at") or log.get("test_run_timestamp")
    identity = [log.get("yaml_file"), started_at, metadata.get("experiment_name")]
    info = LogInfo(
        path=path,
        sha256=sha,
        experiment=experiment,
        key=json.dumps(identity) if any(identity) else sha,
        declared_tools=frozenset(t for t in metadata.get("tools") or [] if isinstance(t, str)),
        header={
            "file": path.name,
            "sha256": sha,
            "yaml_file": log.get("yaml_file"),
            "started_at": started_at,
            "updated_at": log.get("updated_at"),
        },
    )
    return info, results


def check_run(run: Any, i: int, where: Where) -> tuple[CheckedRun, dict[str, Any]]:
    """Entry ``i`` of ``results`` checked, and the fields of its task."""
    if not isinstance(run, dict):
        raise where.fail(i, "<run>", f"expected an object, got {type_name(run)}")
    entry: dict[str, Any] = {"index": i, "run": run}
    for name in ("model_name", "protocol", "framework"):
        value = _get(run, name, (str,), where, i, required=True)
        if not value.strip():
            raise where.fail(i, name, "empty")
        entry[name] = value.strip()
    task = _get(run, "task", (str, dict), where, i, required=True)
    if isinstance(task, str) and not task.strip():
        raise where.fail(i, "task", "empty")
    entry["success"] = _get(run, "success", (bool,), where, i, required=True)
    latency = _get(run, "latency", (int, float), where, i, required=True)
    entry["latency"] = number_in_range(latency, 0.0, MAX_LATENCY_S, where, i, "latency", "seconds")
    task_index = _count(run, "task_index", where, i, low=-MAX_COUNT)
    entry["task_index"] = task_index
    entry["response"] = _get(run, "response", (str,), where, i) or ""
    entry["error"] = _get(run, "error", (str,), where, i)
    entry["steps"] = _get(run, "reasoning_steps", (list,), where, i) or []
    _get(run, "metadata", (dict,), where, i)
    _check_tool_log(tool_log(run), where, i)
    for name in ("reasoning_tokens", "output_tokens"):
        entry[name] = _count(run, name, where, i)
    entry["protocol_id"] = protocol_id(entry["protocol"])
    entry["framework_id"] = framework_id(entry["framework"])
    for name in ("protocol", "framework"):
        if not ID_PATTERN.match(entry[f"{name}_id"]):
            raise where.fail(i, name, f"{entry[name]!r} gives no usable id")
    fields = _task_fields(task, i, task_index, where)
    return CheckedRun(**entry, task_id=fields["task_id"]), fields


def check_runs(results: list[Any], where: Where) -> CheckedLog:
    """Every entry of ``results`` checked; of a (stack, task) the last occurrence is kept."""
    checked = CheckedLog()
    for i, run in enumerate(results):
        entry, fields = check_run(run, i, where)
        seen = checked.tasks.get(entry.task_id)
        if seen is None:
            checked.tasks[entry.task_id] = (fields, i)
        elif seen[0] != fields:
            raise where.fail(
                i, "task", f"task id {entry.task_id!r} is a different task in results[{seen[1]}]"
            )
        key = (entry.model_name, entry.protocol_id, entry.framework_id, entry.task_id)
        checked.occurrences[key] += 1
        checked.runs.pop(key, None)  # re-insert: the order is that of the last occurrences
        checked.runs[key] = entry
    return checked

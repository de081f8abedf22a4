"""Turn other people's task tables into :class:`~mastif.tasks.model.Task` records.

Mind2Web, Online-Mind2Web and local tables name their columns differently. A record is
read field by field: the column the config's ``tasks.columns`` names for a field, else
the first of the field's known names (:data:`ALIASES`) the record has. Columns nobody
asked for are ignored (Mind2Web's records carry the whole page HTML of every step).

Every problem is reported with where the record came from (file and row or line) and
which column, and nothing is half-loaded: a source with one bad record loads no task.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError

from mastif.tasks.model import Task

#: task field -> the column names it goes by, in order of preference: ours, Mind2Web's
#: (``annotation_id``, ``action_reprs``), Online-Mind2Web's (``reference_length``)
ALIASES: dict[str, tuple[str, ...]] = {
    "task_id": ("task_id", "annotation_id"),
    "confirmed_task": ("confirmed_task",),
    "website": ("website",),
    "domain": ("domain",),
    "subdomain": ("subdomain",),
    "reference_steps": ("reference_steps", "action_reprs"),
    "reference_length": ("reference_length",),
    "level": ("level",),
    "start_url": ("start_url",),
}
FIELDS: tuple[str, ...] = tuple(ALIASES)


class RecordError(ValueError):
    """A record that cannot become a task (the message says where and why)."""


def check_columns(columns: Mapping[str, str], available: Iterable[str], origin: str) -> None:
    """Every column ``tasks.columns`` names must exist in the source (checked once, up front)."""
    have = set(available)
    for field, column in columns.items():
        if field not in ALIASES:
            raise RecordError(f"tasks.columns.{field}: not a task field ({', '.join(FIELDS)})")
        if column not in have:
            raise RecordError(
                f"tasks.columns.{field} names column {column!r}, which {origin} does not have "
                f"(its columns: {', '.join(sorted(have)) or 'none'})"
            )


def _missing(value: Any) -> bool:
    """Empty cells: None, NaN (pandas/Parquet), or blank text (CSV)."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _steps(value: Any, where: str, column: str) -> list[str]:
    """A list of step strings; a CSV cell holds it as a JSON array."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RecordError(
                f"{where}: column {column!r} must be a list of steps (in CSV a JSON array "
                f'such as ["[button] Search -> CLICK"]): {exc}'
            ) from exc
    if hasattr(value, "tolist"):  # numpy arrays from Parquet readers
        value = value.tolist()
    if not isinstance(value, list | tuple) or not all(isinstance(s, str) for s in value):
        raise RecordError(f"{where}: column {column!r} must be a list of strings, got {value!r}")
    return list(value)


def _count(value: Any, where: str, column: str) -> int:
    if isinstance(value, bool):
        raise RecordError(f"{where}: column {column!r} must be a whole number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RecordError(
            f"{where}: column {column!r} must be a whole number, got {value!r}"
        ) from None
    if not number.is_integer():
        raise RecordError(f"{where}: column {column!r} must be a whole number, got {value!r}")
    return int(number)


def task_from_record(
    record: Mapping[str, Any], where: str, columns: Mapping[str, str] | None = None
) -> Task:
    """One task from one record (``where`` names it in errors, e.g. ``tasks.csv:row 4``)."""
    columns = columns or {}
    data: dict[str, Any] = {}
    for field, names in ALIASES.items():
        if field in columns:
            column = columns[field]
            if column not in record:
                raise RecordError(f"{where}: no column {column!r} (tasks.columns.{field})")
        else:
            column = next((n for n in names if n in record), None)
            if column is None:
                continue
        value = record[column]
        if _missing(value):
            continue
        if field == "reference_steps":
            value = _steps(value, where, column)
        elif field == "reference_length":
            value = _count(value, where, column)
        elif field == "level":
            value = str(value).strip().lower()
        else:
            value = str(value)
        data[field] = value
    missing = [f for f in ("task_id", "confirmed_task", "website") if f not in data]
    if missing:
        named = [columns.get(f, " or ".join(ALIASES[f])) for f in missing]
        raise RecordError(
            f"{where}: no value for {', '.join(missing)} (column {', '.join(named)}); "
            "map the file's columns with tasks.columns"
        )
    try:
        return Task.model_validate(data)
    except ValidationError as exc:
        raise RecordError(
            f"{where}: invalid task record{task_label(data)}: {validation_summary(exc)}"
        ) from None


def online_mind2web_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """An Online-Mind2Web record in our field names.

    Its ``website`` is the start URL: the agent starts there (``start_url``) and the task's
    website is the URL's host without ``www.``, so tasks on one site share a stratum.
    Online-Mind2Web gives no domain or subdomain; they stay empty rather than invented.
    """
    out = dict(record)
    url = record.get("website")
    if isinstance(url, str) and "://" in url:
        host = (urlparse(url).hostname or "").removeprefix("www.")
        if host:
            out["website"] = host
            out.setdefault("start_url", url)
    return out


def validation_summary(exc: ValidationError) -> str:
    """A pydantic error on one line: ``field: problem (got value)``, joined by ``; ``."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "record"
        parts.append(f"{field}: {error['msg']} (got {error.get('input')!r:.80})")
    return "; ".join(parts)


def task_label(record: Mapping[str, Any]) -> str:
    """`` (task 'id')`` for error messages, when the record names its task; else empty."""
    task_id = record.get("task_id") if isinstance(record, Mapping) else None
    return f" (task {task_id!r})" if isinstance(task_id, str | int) and task_id != "" else ""


def tasks_from_records(
    records: Iterable[tuple[str, Mapping[str, Any]]], columns: Mapping[str, str] | None = None
) -> list[Task]:
    """Tasks of ``(where, record)`` pairs in order; a task id may occur only once."""
    tasks: list[Task] = []
    first: dict[str, str] = {}
    for where, record in records:
        if not isinstance(record, Mapping):
            raise RecordError(f"{where}: expected an object, got {type(record).__name__}")
        task = task_from_record(record, where, columns)
        if task.task_id in first:
            raise RecordError(
                f"{where}: duplicate task_id {task.task_id!r} (first at {first[task.task_id]})"
            )
        first[task.task_id] = where
        tasks.append(task)
    return tasks

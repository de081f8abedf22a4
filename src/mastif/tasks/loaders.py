"""Load task sets into validated :class:`~mastif.tasks.model.Task` lists.

Sources: ``"builtin"`` (the offline set shipped in ``resources/tasks/builtin.jsonl``),
``"jsonl"`` (any file in the same format), ``"sandbox"`` (the tasks on the offline web
sandbox: every ``resources/sandbox/tasks/*.jsonl`` in sorted file-name order, concatenated;
a ``task_id`` may appear only once across all of them), ``"file"`` (a JSON, JSONL, CSV or
Parquet table read through a column mapping, :mod:`mastif.tasks.records`),
``"online_mind2web"`` (a JSON list in the Online-Mind2Web format) and ``"mind2web"``
(the Hugging Face hub, :mod:`mastif.tasks.hub`). A bad task set must stop a run
before any model is called, so every problem is reported with the file and line it came
from, including a task whose success ``check`` is malformed (checked with
:func:`mastif.tasks.checks.validate_check` at load, not first at scoring time).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mastif.core.paths import resources_dir
from mastif.tasks.files import TableError, read_records
from mastif.tasks.hub import HubError, load_mind2web
from mastif.tasks.model import Task
from mastif.tasks.records import (
    RecordError,
    check_columns,
    online_mind2web_record,
    task_label,
    tasks_from_records,
    validation_summary,
)

BUILTIN_TASKS = Path("tasks") / "builtin.jsonl"
SANDBOX_TASKS = Path("sandbox") / "tasks"
SOURCES = ("builtin", "jsonl", "sandbox", "file", "online_mind2web", "mind2web")


class TaskLoadError(ValueError):
    """A task file is unreadable, malformed, or inconsistent (message names file and line)."""


def load_tasks(
    source: str,
    path: str | None = None,
    *,
    format: str | None = None,
    columns: Mapping[str, str] | None = None,
    splits: Sequence[str] = ("train",),
    hub: Mapping[str, Any] | None = None,
) -> list[Task]:
    """Load tasks from ``source`` (see the module docstring); ``jsonl``, ``file`` and
    ``online_mind2web`` take ``path``, ``file`` also ``format`` and ``columns``, and
    ``mind2web`` takes ``splits`` and ``hub`` (``repo_id``, ``revision``, ``endpoint``,
    ``archive_password_env``).

    Raises ``ValueError`` for an unknown source or a wrong ``path`` argument and
    :class:`TaskLoadError` (a ``ValueError``) for invalid files or an unavailable hub
    dataset. Order is file order.
    """
    if source in ("file", "online_mind2web"):
        if not path:
            raise ValueError(f"source {source!r} needs a path")
        return _read_table(Path(path), source, format, columns or {})
    if source == "mind2web":
        if path is not None:
            raise ValueError("source 'mind2web' takes no path; use source 'file' for a local copy")
        try:
            return load_mind2web(tuple(splits), **dict(hub or {}))
        except HubError as exc:
            raise TaskLoadError(str(exc)) from exc
    if source == "builtin":
        if path is not None:
            raise ValueError("source 'builtin' takes no path; use source 'jsonl' for a file")
        return _read_jsonl(resources_dir() / BUILTIN_TASKS)
    if source == "jsonl":
        if not path:
            raise ValueError("source 'jsonl' needs a path")
        return _read_jsonl(Path(path))
    if source == "sandbox":
        if path is not None:
            raise ValueError("source 'sandbox' takes no path; use source 'jsonl' for a file")
        return _read_sandbox(resources_dir() / SANDBOX_TASKS)
    raise ValueError(f"unknown task source {source!r}; expected one of {', '.join(SOURCES)}")


def _read_table(path: Path, source: str, fmt: str | None, columns: Mapping[str, str]) -> list[Task]:
    """A local table; Online-Mind2Web's is a JSON list whose ``website`` is a URL."""
    try:
        records, available = read_records(path, "json" if source == "online_mind2web" else fmt)
        check_columns(columns, available, str(path))
        if source == "online_mind2web":
            records = [(w, online_mind2web_record(r) if isinstance(r, dict) else r)
                       for w, r in records]  # fmt: skip
        return tasks_from_records(records, columns)
    except (TableError, RecordError) as exc:
        raise TaskLoadError(str(exc)) from exc


def _read_sandbox(directory: Path) -> list[Task]:
    """All sandbox task files in sorted order; a task id may occur in only one file."""
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise TaskLoadError(f"{directory}: no sandbox task files (*.jsonl)")
    return load_task_files(files)


def load_task_files(files: Sequence[str | Path]) -> list[Task]:
    """Tasks of several task files in the given order; a task id may occur only once.

    The workflow's sampling rule uses this with its input files, so the files Snakemake
    tracks are exactly the files read.
    """
    files = [Path(f) for f in files]
    if not files:
        raise TaskLoadError("no task files given")
    tasks: list[Task] = []
    origin: dict[str, str] = {}
    for file in files:
        for lineno, task in _read_jsonl_lines(file):
            if task.task_id in origin:
                raise TaskLoadError(
                    f"{file}:{lineno}: duplicate task_id {task.task_id!r} "
                    f"(first at {origin[task.task_id]})"
                )
            origin[task.task_id] = f"{file}:{lineno}"
            tasks.append(task)
    return tasks


def _read_jsonl(file: Path) -> list[Task]:
    """Parse one task per non-blank line; fail on the first bad line, duplicate id or check."""
    return [task for _, task in _read_jsonl_lines(file)]


def _read_jsonl_lines(file: Path) -> list[tuple[int, Task]]:
    """:func:`_read_jsonl` with each task's line number (for errors that span files)."""
    # imported here: the sandbox package imports this module (for resources_dir)
    from mastif.tasks.checks import validate_check

    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskLoadError(f"{file}: cannot read task file: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise TaskLoadError(
            f"{file}: task file is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    tasks: list[tuple[int, Task]] = []
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{file}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskLoadError(f"{where}: invalid JSON: {exc}") from exc
        if not isinstance(record, dict):
            raise TaskLoadError(f"{where}: expected a JSON object, got {type(record).__name__}")
        try:
            task = Task.model_validate(record)
        except ValidationError as exc:
            raise TaskLoadError(
                f"{where}: invalid task record{task_label(record)}: {validation_summary(exc)}"
            ) from None
        if task.check is not None:
            try:
                validate_check(task.check)
            except ValueError as exc:
                raise TaskLoadError(
                    f"{where}: invalid check of task {task.task_id!r}: {exc}"
                ) from exc
        if task.task_id in first_line:
            raise TaskLoadError(
                f"{where}: duplicate task_id {task.task_id!r} "
                f"(first on line {first_line[task.task_id]})"
            )
        first_line[task.task_id] = lineno
        tasks.append((lineno, task))
    if not tasks:
        raise TaskLoadError(f"{file}: no tasks in file")
    return tasks

"""Load task sets into validated :class:`~mastif.tasks.model.Task` lists.

Sources: ``"builtin"`` (the offline set shipped in ``resources/tasks/builtin.jsonl``) and
``"jsonl"`` (any file in the same format). A bad task set must stop a run before any model
is called, so every problem is reported with the file and line it came from.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from mastif.tasks.model import Task

RESOURCES_ENV = "MASTIF_RESOURCES"
BUILTIN_TASKS = Path("tasks") / "builtin.jsonl"
SOURCES = ("builtin", "jsonl")


class TaskLoadError(ValueError):
    """A task file is unreadable, malformed, or inconsistent (message names file and line)."""


def resources_dir() -> Path:
    """The repository's ``resources`` directory.

    ``$MASTIF_RESOURCES`` wins (tests, relocated installs); otherwise the path is taken
    relative to this file, which is correct for the editable install from the repo root
    (``src/mastif/tasks/loaders.py`` -> ``parents[3]`` is the repo).
    """
    override = os.environ.get(RESOURCES_ENV)
    if override:
        return Path(override).expanduser().resolve()
    return Path(__file__).resolve().parents[3] / "resources"


def load_tasks(source: str, path: str | None = None) -> list[Task]:
    """Load tasks from ``source`` (``"builtin"`` or ``"jsonl"``, which needs ``path``).

    Raises ``ValueError`` for an unknown source or a wrong ``path`` argument and
    :class:`TaskLoadError` (a ``ValueError``) for invalid files. Order is file order.
    """
    if source == "builtin":
        if path is not None:
            raise ValueError("source 'builtin' takes no path; use source 'jsonl' for a file")
        return _read_jsonl(resources_dir() / BUILTIN_TASKS)
    if source == "jsonl":
        if not path:
            raise ValueError("source 'jsonl' needs a path")
        return _read_jsonl(Path(path))
    raise ValueError(f"unknown task source {source!r}; expected one of {', '.join(SOURCES)}")


def _read_jsonl(file: Path) -> list[Task]:
    """Parse one task per non-blank line; fail on the first bad line or duplicate id."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskLoadError(f"{file}: cannot read task file: {exc}") from exc
    tasks: list[Task] = []
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
            raise TaskLoadError(f"{where}: invalid task record: {exc}") from exc
        if task.task_id in first_line:
            raise TaskLoadError(
                f"{where}: duplicate task_id {task.task_id!r} "
                f"(first on line {first_line[task.task_id]})"
            )
        first_line[task.task_id] = lineno
        tasks.append(task)
    if not tasks:
        raise TaskLoadError(f"{file}: no tasks in file")
    return tasks

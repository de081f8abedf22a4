"""The task record every stack is evaluated on, and its tabular form.

A :class:`Task` is a Mind2Web-style web task: a high-level instruction on one website plus
the reference action sequence (``action_reprs`` style, e.g. ``"[button] Search -> CLICK"``).
Difficulty ``level`` is derived from the number of reference steps so that sampling can
stratify on it without trusting hand labels.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

import polars as pl
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    computed_field,
    model_validator,
)

Level = Literal["easy", "medium", "hard"]
LEVELS: tuple[Level, ...] = ("easy", "medium", "hard")

EASY_MAX_STEPS = 4
"""A task with at most this many reference steps is ``easy``."""
MEDIUM_MAX_STEPS = 8
"""A task with more than ``EASY_MAX_STEPS`` and at most this many steps is ``medium``."""

NonEmptyStr = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]

MAX_REFERENCE_LENGTH = 1000
"""Most steps a task's ``reference_length`` may give (Mind2Web's longest tasks have a few
dozen): a larger count is a broken or hostile file, not a task."""

#: a whole number of steps, 1..MAX_REFERENCE_LENGTH; a float (``1e300``, ``NaN``, ``3.5``) is
#: rejected rather than truncated
ReferenceLength = Annotated[StrictInt, Field(ge=1, le=MAX_REFERENCE_LENGTH)]


def level_for_steps(n: int) -> Level:
    """Difficulty of a task with ``n`` reference steps: easy <= 4, medium 5-8, hard >= 9.

    The step count is the only difficulty signal every source has, and a fixed threshold
    keeps levels comparable across task sets. ``n`` must be >= 1: a task with no steps has
    no measurable difficulty (see :class:`Task` for how such tasks get a level).
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"step count must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"step count must be >= 1 to derive a level, got {n}")
    if n <= EASY_MAX_STEPS:
        return "easy"
    if n <= MEDIUM_MAX_STEPS:
        return "medium"
    return "hard"


class Task(BaseModel):
    """One web task (immutable).

    ``level`` rules, chosen so a level is always present and never contradicts the data:

    * with reference steps, the level is derived by :func:`level_for_steps`; an explicit
      ``level`` in the record must agree, otherwise validation fails (a mismatch means the
      record or the thresholds are wrong, and silently picking one would hide that);
    * without reference steps, the explicit ``level`` is used (Online-Mind2Web labels
      its tasks itself), else the level of ``reference_length`` steps; if there is
      neither, validation fails, because every task must be stratifiable by difficulty —
      unless the record says ``level: null`` explicitly (an imported task whose source
      records no difficulty), which stays unknown.

    ``n_steps`` is computed. It is accepted on input (so ``model_dump()`` round-trips and
    frames can be read back) but must equal ``len(reference_steps)``.
    Unknown fields are rejected so a misspelt key (``refrence_steps``) cannot silently
    yield a task without steps.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: NonEmptyStr
    confirmed_task: NonEmptyStr
    website: NonEmptyStr
    #: ``None``: the source does not say (Online-Mind2Web has no domain or subdomain);
    #: stratifying on such an attribute is an error (see :mod:`mastif.tasks.sampling`)
    domain: NonEmptyStr | None = None
    subdomain: NonEmptyStr | None = None
    reference_steps: list[NonEmptyStr] = []
    #: steps a person needed, for sources that give the count but not the steps
    #: (Online-Mind2Web's ``reference_length``); with steps it must equal their number
    reference_length: ReferenceLength | None = None
    #: ``None`` only when given so explicitly: difficulty unknown (tasks imported from a log
    #: that records none); stratifying by level is then an error
    level: Level | None
    #: where the agent starts: a path on the offline sandbox (``/shop/``) or an absolute URL
    start_url: str | None = None
    #: the programmatic success check (see :mod:`mastif.tasks.checks`); ``None``: the
    #: task has none and its runs get no ``success`` value
    check: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _derive_level(cls, data: Any) -> Any:
        """Fill or check ``level`` and check ``n_steps`` before field validation."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        steps = data.get("reference_steps")
        if steps is None:
            data.pop("reference_steps", None)
            steps = []
        if not isinstance(steps, list):
            return data  # let field validation report the type error
        given_n = data.pop("n_steps", None)
        if given_n is not None and given_n != len(steps):
            raise ValueError(f"n_steps={given_n!r} disagrees with {len(steps)} reference_steps")
        length = data.get("reference_length")
        if steps and length is not None and length != len(steps):
            raise ValueError(
                f"reference_length={length!r} disagrees with {len(steps)} reference_steps"
            )
        given_level = data.get("level")
        if steps:
            derived = level_for_steps(len(steps))
            if given_level is not None and given_level != derived:
                raise ValueError(
                    f"level={given_level!r} disagrees with {len(steps)} reference_steps "
                    f"(which means {derived!r})"
                )
            data["level"] = derived
        elif "level" in data and given_level is None:
            pass  # explicitly unknown (see the field)
        elif given_level is None:
            if isinstance(length, int) and not isinstance(length, bool) and length >= 1:
                data["level"] = level_for_steps(length)
            else:
                raise ValueError(
                    "task has no reference_steps, no reference_length and no level; "
                    "cannot tell difficulty"
                )
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_steps(self) -> int:
        """Number of reference steps (0 when the source gave none)."""
        return len(self.reference_steps)

    def __hash__(self) -> int:
        # The list field makes pydantic's generated frozen hash fail; task_id is a
        # consistent choice because equal tasks have equal ids.
        return hash(("Task", self.task_id))


TASK_SCHEMA: dict[str, pl.DataType] = {
    "task_id": pl.String(),
    "confirmed_task": pl.String(),
    "website": pl.String(),
    "domain": pl.String(),
    "subdomain": pl.String(),
    "level": pl.String(),
    "n_steps": pl.Int64(),
    "reference_steps": pl.List(pl.String()),
    "reference_length": pl.Int64(),
    "start_url": pl.String(),
    "check": pl.String(),  # JSON: a check is a small tree whose shape varies by kind
}
"""Column order and dtypes of the task table (written to parquet by the workflow)."""


def tasks_to_frame(tasks: Iterable[Task]) -> pl.DataFrame:
    """Tasks as a DataFrame with exactly :data:`TASK_SCHEMA` (also when ``tasks`` is empty)."""
    rows = []
    for t in tasks:
        row = t.model_dump()
        row["check"] = None if t.check is None else json.dumps(t.check, sort_keys=True)
        rows.append(row)
    return pl.DataFrame(rows, schema=TASK_SCHEMA)


def tasks_from_frame(df: pl.DataFrame) -> list[Task]:
    """Rebuild tasks from a frame made by :func:`tasks_to_frame`.

    Only the :data:`TASK_SCHEMA` columns are read (frames joined with results may carry
    more); each row is re-validated, so a level or ``n_steps`` that no longer matches the
    steps fails loudly. ``level`` and ``n_steps`` are optional columns.
    """
    optional = ("level", "n_steps", "reference_length", "start_url", "check")
    required = [c for c in TASK_SCHEMA if c not in optional]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"task frame is missing columns: {', '.join(missing)}")
    cols = [c for c in TASK_SCHEMA if c in df.columns]
    tasks: list[Task] = []
    for i, row in enumerate(df.select(cols).iter_rows(named=True)):
        if isinstance(row.get("check"), str):
            row["check"] = json.loads(row["check"])
        try:
            tasks.append(Task.model_validate(row))
        except ValueError as exc:
            raise ValueError(f"task frame row {i}: {exc}") from exc
    return tasks

"""Logs of the original MASTIF as mastif runs (RUN_SCHEMA rows) and tasks (TASK_SCHEMA).

The original MASTIF writes one JSON object per experiment: a partial log while it runs
(``yaml_file``, ``started_at``, ``updated_at``, ``metadata``, ``completed``, ``results``) and
a final export (``test_run_timestamp``, ``total_tests``, ``metadata``, ``results``). Both
carry ``results``, one object per run: ``model_name``, ``protocol``, ``framework``,
``task_index`` (newer logs), ``task``, ``response``, ``reasoning_steps``, ``latency``,
``success``, ``error``, ``metadata`` (its protocol overhead figures and a ``tool_log``).

:func:`read_mastif_log` reads and checks the whole log before anything is written, and maps
what the log recorded, nothing more (``docs/import.md`` has the column-by-column mapping):

* a run that appears more than once (a resumed log re-runs failed runs and appends them)
  is kept in its last occurrence;
* protocol and framework names become mastif's ids (``MCP`` -> ``mcp``, ``SemanticKernel``
  -> ``semantic_kernel``); names mastif has no adapter for (``Smolagents``, ``ACP``) get a
  lowercase snake id and are kept, since every stage after execution treats them alike;
* model names (``mistralai/Mistral-7B-Instruct-v0.1``) get a path- and wildcard-safe id,
  the original name is kept in ``served_model``;
* an answer wrapped in a protocol envelope is unwrapped to its text
  (:func:`unwrap_envelope`), the verbatim answer kept in ``raw_final_answer``;
* MASTIF's token counts are re-tokenised estimates: they go to ``est_*`` columns with
  ``tokens_estimated`` set, and the API-usage columns stay null, so V (Eq. 3) and cost are
  null for imported runs rather than an estimate passed off as usage;
* MASTIF's ``success`` means "ran without an error", not "did the task": it sets
  ``status``, and the task check ``success`` stays null;
* whatever the log does not record (generation settings, LLM calls, protocol traffic as
  mastif measures it) is null, never 0.

The log is read and its records checked in :mod:`~mastif.importers.mastif_records`, names
mapped in :mod:`~mastif.importers.mastif_names`, answers unwrapped in
:mod:`~mastif.importers.envelopes` and each run built in :mod:`~mastif.importers.mastif_runs`;
this module puts them together, builds the task table and writes the tables.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from mastif.core import results
from mastif.core.atomic import write_atomically
from mastif.core.config import Stack
from mastif.core.trace import RunTrace, runs_to_table
from mastif.importers.mastif_names import ID_PATTERN, model_ids
from mastif.importers.mastif_records import MastifLogError, Where, check_runs, read_log
from mastif.importers.mastif_runs import run_trace
from mastif.tasks import Task, tasks_to_frame


@dataclass
class ImportedLog:
    """A MASTIF log read and checked: its runs (one per stack x task) and tasks."""

    path: Path
    sha256: str
    experiment: str
    runs: list[RunTrace]
    tasks: list[Task]
    n_results: int  # entries in the log's results
    n_duplicates: int  # entries dropped because a later one recorded the same run
    envelopes: dict[str, int] = field(default_factory=dict)  # envelope kind -> answers
    model_names: dict[str, str] = field(default_factory=dict)  # model id -> original name
    unknown_levels: int = 0  # tasks without steps or level: their level is None

    @property
    def n_unwrapped(self) -> int:
        return sum(self.envelopes.values())

    def stacks(self) -> list[Stack]:
        """The stacks the log has runs of, sorted."""
        return sorted({Stack(r.model, r.protocol, r.framework) for r in self.runs})

    def runs_of(self, stack: Stack) -> list[RunTrace]:
        return [r for r in self.runs if (r.model, r.protocol, r.framework) == astuple(stack)]

    def runs_table(self, stack: Stack | None = None) -> pa.Table:
        """The runs (of one stack, or all) in :data:`mastif.core.trace.RUN_SCHEMA`."""
        return runs_to_table(self.runs if stack is None else self.runs_of(stack))

    def tasks_frame(self) -> pl.DataFrame:
        """The tasks in :data:`mastif.tasks.TASK_SCHEMA` (``results/tasks.parquet``)."""
        return tasks_to_frame(self.tasks)

    def summary(self) -> str:
        """What was read, for the CLI and the job log."""
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.envelopes.items())) or "none"
        lines = [
            f"{self.path}: experiment {self.experiment!r}",
            f"  {self.n_results} result(s) read, {self.n_duplicates} duplicate(s) dropped "
            f"(last occurrence kept), {len(self.runs)} run(s) imported",
            f"  {self.n_unwrapped} answer(s) unwrapped from protocol envelopes ({kinds})",
            f"  {len(self.tasks)} task(s)"
            + (f", {self.unknown_levels} of unknown level" if self.unknown_levels else ""),
            "  token counts: estimates only (est_* columns), no API usage",
            f"  {len(self.stacks())} stack(s):",
        ]
        for s in self.stacks():
            served = self.model_names.get(s.model, s.model)
            lines.append(f"    {s.path}  ({len(self.runs_of(s))} run(s); model {served})")
        return "\n".join(lines)


def astuple(stack: Stack) -> tuple[str, str, str]:
    return stack.model, stack.protocol, stack.framework


def _task_table(
    tasks: dict[str, tuple[dict[str, Any], int]], where: Where
) -> tuple[dict[str, Task], dict[str, str]]:
    """The log's tasks validated by the :class:`Task` model, by task id, and where each
    one's level comes from (``steps``, ``log`` or ``unknown``)."""
    records: dict[str, Task] = {}
    level_source: dict[str, str] = {}
    for task_id, (fields, i) in sorted(tasks.items()):
        record = dict(fields)
        if record["reference_steps"]:
            level_source[task_id] = "steps"
        elif record["level"] is not None:
            level_source[task_id] = "log"
        else:
            # the log records no difficulty: unknown, not made up
            record["level"] = None
            level_source[task_id] = "unknown"
        try:
            records[task_id] = Task.model_validate(record)
        except ValidationError as exc:
            raise where.fail(i, "task", f"not a valid task: {exc}") from None
    return records, level_source


def _usable_model_ids(names: list[str], path: Path) -> dict[str, str]:
    """Original model name -> id (:func:`model_ids`), each id checked for use in paths."""
    ids = model_ids(names)
    for mid in set(ids.values()):
        if not ID_PATTERN.match(mid):
            unusable = [n for n, m in ids.items() if m == mid]
            raise MastifLogError(f"{path}: model name(s) {unusable} give no usable id")
    return ids


def read_mastif_log(path: str | Path) -> ImportedLog:
    """Read and check a MASTIF results log (partial or final export); nothing is written.

    Raises :class:`MastifLogError` naming the file, the run index and the field when the
    file is not JSON, has no ``results`` list, or a run lacks a required field
    (``model_name``, ``protocol``, ``framework``, ``task``, ``success``, ``latency``) or has
    one of the wrong type, or when one task id stands for two different tasks.
    """
    path = Path(path)
    where = Where(path)
    info, results = read_log(path)
    checked = check_runs(results, where)
    tasks, level_source = _task_table(checked.tasks, where)
    ids = _usable_model_ids([e.model_name for e in checked.runs.values()], path)
    runs: list[RunTrace] = []
    envelopes: Counter[str] = Counter()
    for key, entry in checked.runs.items():
        run, kind = run_trace(
            entry,
            info,
            tasks[entry.task_id],
            ids[entry.model_name],
            checked.occurrences[key],
            level_source[entry.task_id],
        )
        runs.append(run)
        if kind is not None:
            envelopes[kind] += 1
    runs.sort(key=lambda r: (r.model, r.protocol, r.framework, r.task_id))
    return ImportedLog(
        path=path,
        sha256=info.sha256,
        experiment=info.experiment,
        runs=runs,
        tasks=[tasks[k] for k in sorted(tasks)],
        n_results=len(results),
        n_duplicates=len(results) - len(checked.runs),
        envelopes=dict(envelopes),
        model_names={ids[n]: n for n in ids},
        unknown_levels=sum(1 for s in level_source.values() if s == "unknown"),
    )


def stacks_in_log(path: str | Path) -> list[Stack]:
    """The stacks (model id, protocol id, framework id) a MASTIF log has runs of, sorted;
    the whole log is checked, so a bad log fails here (at DAG build) with the same error."""
    return read_mastif_log(path).stacks()


# --------------------------------------------------------------------------- writing


def write_imported(imported: ImportedLog, out_dir: str | Path) -> list[Path]:
    """Write ``out_dir/tasks.parquet`` and ``out_dir/runs/{model}/{protocol}/{framework}.parquet``
    (one per stack); each file appears whole (written aside, then renamed). Returns the paths,
    tasks first."""
    out = Path(out_dir)
    # every table is built before any file is written: a log a table cannot hold fails here
    # and leaves nothing behind (no tasks.parquet without its runs)
    try:
        tasks = imported.tasks_frame()
        tables = {
            Path(results.runs(stack.path, root=out)): imported.runs_table(stack)
            for stack in imported.stacks()
        }
    except (pa.ArrowException, OverflowError, ValueError, TypeError) as exc:
        raise MastifLogError(f"{imported.path}: cannot be stored as tables: {exc}") from None
    tasks_path = Path(results.tasks(root=out))
    write_atomically(tasks_path, lambda p: tasks.write_parquet(p))
    paths = [tasks_path]
    for target, table in tables.items():
        write_atomically(target, lambda p, t=table: pq.write_table(t, p))
        paths.append(target)
    return paths

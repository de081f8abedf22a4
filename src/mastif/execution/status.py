"""Where an experiment stands: ``mastif status``, per stack and in total.

Read-only, from the files the workflow writes, so it works while ``snakemake`` runs (also
from another node of a cluster's shared filesystem) and needs no lock:

* a stack's finished runs are the union of its gathered runs
  (``results/runs/{stack}.parquet``), its shards (``results/shards/{stack}/*.parquet``) and
  its checkpoints (``results/checkpoints/{stack}/*.jsonl``, there while a shard job runs or
  after one was stopped), one run per (task, repeat). A checkpoint's half-written last line
  (a job writing it right now, or killed mid-write) is skipped, as is a Parquet file that
  cannot be read yet (being written); both are said in a note.
* planned runs: the tasks sampled in ``results/tasks.parquet`` x ``repeats``; before the
  sample exists, ``tasks.sample_size`` x ``repeats`` from the config (said in the output).
* tokens are the API usage of the finished runs, dollars those tokens at the model's
  ``price`` (``None``, printed "unknown", without a price; never 0).
* the ETA is an estimate from timing, said in the output (:data:`ETA_METHOD`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from mastif.core import results
from mastif.core.atomic import read_json_lines
from mastif.core.config import ExperimentConfig, ModelPrice, Stack
from mastif.core.pricing import usd_of
from mastif.execution.budget import LEDGER, BudgetLimit, Ledger, LedgerState, format_usd

#: the columns of a run a status needs
RUN_COLUMNS = ("run_id", "task_id", "repeat", "status", "prompt_tokens", "completion_tokens",
               "wall_seconds")  # fmt: skip

ETA_METHOD = (
    "ETA = a stack's remaining runs x the mean wall time of its finished runs (of all "
    "finished runs while it has none) / its runs in flight at once (execution.concurrency, "
    "else the model's max_connections); the total adds the stacks up, as stack jobs run "
    "one at a time (timing_lock)"
)


@dataclass(frozen=True)
class FinishedRun:
    """The fields of one finished run that a status counts."""

    run_id: str
    task_id: str
    repeat: int
    status: str
    prompt_tokens: int | None
    completion_tokens: int | None
    wall_seconds: float | None

    @staticmethod
    def from_row(row: dict[str, Any]) -> FinishedRun:
        return FinishedRun(
            run_id=str(row["run_id"]),
            task_id=str(row["task_id"]),
            repeat=int(row.get("repeat") or 0),
            status=str(row["status"]),
            prompt_tokens=row.get("prompt_tokens"),
            completion_tokens=row.get("completion_tokens"),
            wall_seconds=row.get("wall_seconds"),
        )

    @property
    def key(self) -> tuple[str, int]:
        return self.task_id, self.repeat


@dataclass(frozen=True)
class CheckpointFile:
    """A checkpoint on disk: a shard job runs now, or stopped (killed, failed, budget)."""

    shard: str
    runs: int
    age_s: float


@dataclass
class StackStatus:
    stack: Stack
    planned: int
    done: int
    failed: int
    #: ``None``: a finished run has no API usage recorded
    tokens: int | None
    #: ``None``: the model has no price
    usd: float | None
    mean_wall_s: float | None
    #: finished runs with a wall time (those :attr:`mean_wall_s` is the mean of)
    timed_runs: int
    concurrency: int
    checkpoints: list[CheckpointFile] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        return max(self.planned - self.done, 0)

    def eta_s(self, fallback_wall_s: float | None) -> float | None:
        """Seconds to the stack's last run (see :data:`ETA_METHOD`); ``None``: no run has
        finished anywhere yet, so nothing says how long one takes."""
        if self.remaining == 0:
            return 0.0
        wall = self.mean_wall_s if self.mean_wall_s is not None else fallback_wall_s
        return None if wall is None else self.remaining * wall / self.concurrency


@dataclass
class ExperimentStatus:
    experiment: str
    plan_note: str
    stacks: list[StackStatus]
    notes: list[str]
    budget: BudgetLimit
    #: ``None``: there is no ledger (no budget was ever set)
    ledger: LedgerState | None
    mean_wall_s: float | None

    @property
    def total_eta_s(self) -> float | None:
        etas = [s.eta_s(self.mean_wall_s) for s in self.stacks]
        return None if any(e is None for e in etas) else sum(e for e in etas if e is not None)


# ------------------------------------------------------------------------ reading


def read_checkpoint(path: Path) -> tuple[list[FinishedRun], int]:
    """The runs of a checkpoint file and how many of its lines could not be read (a line
    being written now, or torn by a kill)."""
    runs: list[FinishedRun] = []
    # a missing file: the job finished and removed it since the listing
    records, skipped = read_json_lines(path)
    for record in records:
        try:
            runs.append(FinishedRun.from_row(record))
        except (KeyError, TypeError, ValueError, AttributeError):
            skipped += 1
    return runs, skipped


def read_runs_parquet(path: Path) -> list[FinishedRun]:
    """The runs of a runs or shard Parquet; raises OSError-like errors when unreadable."""
    import pyarrow.parquet as pq

    schema_names = set(pq.read_schema(path).names)
    columns = [c for c in RUN_COLUMNS if c in schema_names]
    table = pq.read_table(path, columns=columns)
    return [FinishedRun.from_row(row) for row in table.to_pylist()]


def stack_files(workdir: Path, stack: Stack) -> Iterator[Path]:
    """The files under ``workdir`` that may hold the stack's finished runs, gathered first."""
    runs = workdir / results.runs(stack.path)
    if runs.is_file():
        yield runs
    yield from sorted((workdir / results.shard_dir(stack.path)).glob("*.parquet"))
    yield from sorted((workdir / results.checkpoint_dir(stack.path)).glob("*.jsonl"))


def planned_keys(tasks_path: Path, repeats: int) -> list[tuple[str, int]] | None:
    """(task id, repeat) of every planned run of a stack; ``None`` before the sample."""
    if not tasks_path.is_file():
        return None
    import pyarrow.parquet as pq

    task_ids = pq.read_table(tasks_path, columns=["task_id"]).column("task_id").to_pylist()
    return [(str(t), r) for r in range(repeats) for t in task_ids]


# ------------------------------------------------------------------------ counting


_N = TypeVar("_N", int, float)


def _total(values: Iterable[_N | None]) -> _N | None:
    """The sum (tokens or dollars); ``None`` when any is unknown (unknown is not a 0)."""
    total: Any = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def stack_status(
    stack: Stack,
    runs: Iterable[FinishedRun],
    planned: list[tuple[str, int]] | None,
    planned_count: int,
    price: ModelPrice | None,
    concurrency: int,
    checkpoints: list[CheckpointFile] | None = None,
) -> tuple[StackStatus, int]:
    """A stack's counts from its finished runs; also how many runs were not of the plan
    (another sample or repeat count: they are not counted)."""
    wanted = set(planned) if planned is not None else None
    finished: dict[tuple[str, int], FinishedRun] = {}
    outside = set()
    for run in runs:
        if wanted is not None and run.key not in wanted:
            outside.add(run.run_id)
            continue
        finished.setdefault(run.key, run)
    done = list(finished.values())
    prompt = _total(r.prompt_tokens for r in done)
    completion = _total(r.completion_tokens for r in done)
    tokens = None if prompt is None or completion is None else prompt + completion
    usd = None if prompt is None or completion is None else usd_of(prompt, completion, price)
    walls = [r.wall_seconds for r in done if r.wall_seconds is not None]
    status = StackStatus(
        stack=stack,
        planned=planned_count,
        done=len(done),
        failed=sum(1 for r in done if r.status != "ok"),
        tokens=tokens,
        usd=usd,
        mean_wall_s=sum(walls) / len(walls) if walls else None,
        timed_runs=len(walls),
        concurrency=concurrency,
        checkpoints=checkpoints or [],
    )
    return status, len(outside)


def experiment_status(
    config: ExperimentConfig, workdir: Path = Path("."), now: float | None = None
) -> ExperimentStatus:
    """The status of ``config``'s experiment from the files under ``workdir``."""
    now = time.time() if now is None else now
    tasks_path = workdir / results.tasks()
    notes: list[str] = []
    try:
        planned = planned_keys(tasks_path, config.repeats)
    except Exception as exc:  # noqa: BLE001 - being written: plan from the config
        planned = None
        notes.append(f"{tasks_path} is not readable yet ({type(exc).__name__})")
    if planned is not None:
        n_tasks = len(planned) // config.repeats if config.repeats else 0
        plan_note = (f"{n_tasks} task(s) sampled in {tasks_path} x {config.repeats} "
                     f"repeat(s) = {len(planned)} runs per stack")  # fmt: skip
        planned_count = len(planned)
    else:
        planned_count = config.tasks.sample_size * config.repeats
        plan_note = (f"tasks not sampled yet: {config.tasks.sample_size} (tasks.sample_size) "
                     f"x {config.repeats} repeat(s) = {planned_count} runs per stack, from "
                     "the config")  # fmt: skip
    stacks: list[StackStatus] = []
    wall_sum, wall_runs = 0.0, 0  # over every stack's finished runs with a wall time
    for stack in config.stacks():
        runs: list[FinishedRun] = []
        checkpoints: list[CheckpointFile] = []
        for path in stack_files(workdir, stack):
            if path.suffix == ".jsonl":
                found, skipped = read_checkpoint(path)
                if skipped:
                    notes.append(f"{path}: {skipped} unreadable line(s) skipped (being "
                                 "written, or torn by a kill)")  # fmt: skip
                try:
                    age = now - path.stat().st_mtime
                except FileNotFoundError:
                    continue
                checkpoints.append(CheckpointFile(path.stem, len(found), age))
            else:
                try:
                    found = read_runs_parquet(path)
                except Exception as exc:  # noqa: BLE001 - a Parquet being written
                    notes.append(f"{path}: not readable yet ({type(exc).__name__}), skipped")
                    continue
            runs += found
        status, outside = stack_status(
            stack, runs, planned, planned_count, config.models[stack.model].price,
            config.concurrency_for(stack.model), checkpoints,
        )  # fmt: skip
        if outside:
            notes.append(f"{stack.path}: {outside} run(s) of another sample or repeat count "
                         "not counted")  # fmt: skip
        stacks.append(status)
        if status.mean_wall_s is not None:
            wall_sum += status.mean_wall_s * status.timed_runs
            wall_runs += status.timed_runs
    ledger_path = workdir / LEDGER
    ledger = Ledger(ledger_path).read(now) if ledger_path.is_file() else None
    return ExperimentStatus(
        experiment=config.experiment,
        plan_note=plan_note,
        stacks=stacks,
        notes=notes,
        budget=BudgetLimit(config.execution.budget.usd, config.execution.budget.tokens),
        ledger=ledger,
        mean_wall_s=wall_sum / wall_runs if wall_runs else None,
    )


# ------------------------------------------------------------------------ printing


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _usd(x: float | None) -> str:
    return "unknown" if x is None else format_usd(x)


def _tokens(x: int | None) -> str:
    return "unknown" if x is None else f"{x:,}"


def format_status(status: ExperimentStatus, source: str = "", now: datetime | None = None) -> str:
    """The status as a plain-text table with the notes saying how it was counted."""
    now = now or datetime.now(UTC)
    head = [
        f"{source or 'status'}: experiment {status.experiment}, {now:%Y-%m-%d %H:%M:%S} UTC",
        f"planned: {status.plan_note}",
        "",
    ]
    rows = [("stack", "done", "failed", "remaining", "tokens", "US$", "mean run s", "ETA")]
    for s in status.stacks:
        rows.append((
            s.stack.path, f"{s.done}/{s.planned}", str(s.failed), str(s.remaining),
            _tokens(s.tokens), _usd(s.usd),
            f"{s.mean_wall_s:.1f}" if s.mean_wall_s is not None else "-",
            format_duration(s.eta_s(status.mean_wall_s)),
        ))  # fmt: skip
    st = status.stacks
    total_usd = _total(s.usd for s in st)
    rows.append((
        "total", f"{sum(s.done for s in st)}/{sum(s.planned for s in st)}",
        str(sum(s.failed for s in st)), str(sum(s.remaining for s in st)),
        _tokens(_total(s.tokens for s in st)), _usd(total_usd),
        f"{status.mean_wall_s:.1f}" if status.mean_wall_s is not None else "-",
        format_duration(status.total_eta_s),
    ))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    tail = ["", ETA_METHOD + "."]
    open_checkpoints = [(s.stack, c) for s in st for c in s.checkpoints]
    if open_checkpoints:
        tail.append("checkpoints (a shard job running now, or stopped):")
        tail += [f"  {stack.path} {c.shard}: {c.runs} run(s), last written "
                 f"{format_duration(c.age_s)} ago" for stack, c in open_checkpoints]  # fmt: skip
    tail += budget_lines(status)
    tail += [f"note: {n}" for n in status.notes]
    return "\n".join(head + lines + tail)


def budget_lines(status: ExperimentStatus) -> list[str]:
    """The budget and what its ledger holds (it counts every job's runs and judgements,
    also of stacks or configs no longer in the grid)."""
    limit, ledger = status.budget, status.ledger
    if not limit.capped and ledger is None:
        return ["budget: none (execution.budget)"]
    caps = []
    if limit.usd is not None:
        caps.append(f"usd {format_usd(limit.usd)}")
    if limit.tokens is not None:
        caps.append(f"tokens {limit.tokens:,}")
    line = f"budget: {', '.join(caps) if caps else 'none now'}"
    if ledger is None:
        return [line + f"; ledger {LEDGER}: nothing spent yet"]
    unpriced = (
        f" (+ {ledger.unpriced_runs} entr(ies) without a price)" if ledger.unpriced_runs else ""
    )
    judged = ledger.spent_judgements
    what = f"{len(ledger.spent) - judged} run(s)" + (
        f" and {judged} judgement(s)" if judged else ""
    )
    return [
        line,
        f"  ledger {LEDGER}: {what}, {ledger.spent_tokens:,} tokens, "
        f"US$ {format_usd(ledger.spent_usd)}{unpriced} spent; {len(ledger.reserved)} "
        f"in flight reserve {ledger.reserved_tokens:,} tokens, US$ "
        f"{format_usd(ledger.reserved_usd)}",
    ]

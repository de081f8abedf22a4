"""A run-wide budget: stop starting runs once the experiment's tokens or dollars are spent.

``execution.budget`` caps the agent runs of the whole experiment, across every stack and
shard job, through one **ledger** next to the checkpoints (:data:`LEDGER`,
``results/checkpoints/budget.jsonl``). It is append-only JSON lines, written under a lock
file (:class:`filelock.FileLock`, ``budget.jsonl.lock``) so jobs running at once, also on
other nodes of a cluster's shared filesystem, append whole lines one at a time:

* ``spent``: a finished run's ``run_id``, tokens and dollars. Read de-duplicated by run id,
  so a run that is found again (a resumed job settling its checkpoint) counts once.
* ``reserved``: before a run starts, its job reserves the run's upper bound (the ``high``
  scenario of :mod:`mastif.execution.cost_model`) and starts it only if spent + reserved + bound fits
  the budget. The check and the reservation happen under the lock, so two jobs cannot both
  start the last affordable run. A ``spent`` or ``released`` line of the run ends it; a
  reservation of a job that was killed outright expires after the run's time-out
  (``generation.timeout_s``) plus :data:`RESERVATION_GRACE_S`.
* ``released``: a reservation given back unused (the job stopped before it finished).

The judge's calls count too: each judgement (one judge's verdict on one run in one
repeat) is an entry of its own (:func:`judgement_entry`), reserved before it starts and
settled with its API usage, by the judging job (:mod:`mastif.execution.judging`). So the cap is the
experiment's, agent runs and judging together; once it is reached neither starts anything.

The bound is an estimate (tokens from characters, :mod:`mastif.execution.cost_model`), so a run can
cost more than its reservation; the budget can then be overshot by that excess of the runs
in flight, never by a run started after the budget was reached.
The ledger outlives the checkpoints and shard files on purpose: the spend of an experiment
stays spent when its outputs are rewritten. Delete it to start counting from zero.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from mastif.core import results
from mastif.core.atomic import append_lines, read_json_lines
from mastif.core.config import ExperimentConfig, ModelPrice, Stack
from mastif.core.pricing import usd_of
from mastif.core.trace import RunTrace
from mastif.tasks import Task

#: the ledger, relative to the workflow directory
LEDGER = Path(results.LEDGER)
#: how long past the run's time-out a reservation of a job that never settled it still
#: counts (the run's end, checkpointing and settling take seconds; a killed job's
#: reservation must not block the budget for ever)
RESERVATION_GRACE_S = 300.0
#: seconds a job waits for the ledger's lock before it gives up (a lock held longer is
#: a stuck filesystem, not a busy ledger: every holder only reads and appends)
LOCK_TIMEOUT_S = 120.0


#: the prefix of a judgement's ledger entry (:func:`judgement_entry`)
JUDGEMENT_PREFIX = "judge:"


def judgement_entry(judge_model: str, run_id: str, repeat: int) -> str:
    """The ledger entry of judge ``judge_model``'s judgement of ``run_id`` in ``repeat``."""
    return f"{JUDGEMENT_PREFIX}{judge_model}:{run_id}:{repeat}"


class BudgetReached(RuntimeError):
    """The budget does not allow the next run; the message is one sentence naming it."""


@dataclass(frozen=True)
class Cost:
    """Tokens (prompt + completion) and US dollars; dollars ``None``: the price is unknown."""

    tokens: int
    usd: float | None

    @staticmethod
    def of(prompt: int, completion: int, price: ModelPrice | None) -> Cost:
        """``prompt`` + ``completion`` tokens, and their dollars at ``price``."""
        return Cost(prompt + completion, usd_of(prompt, completion, price))


@dataclass(frozen=True)
class BudgetLimit:
    """``execution.budget``: the caps (``None``: no cap on that quantity)."""

    usd: float | None = None
    tokens: int | None = None

    @staticmethod
    def from_mapping(raw: Mapping[str, Any] | None) -> BudgetLimit:
        raw = raw or {}
        usd, tokens = raw.get("usd"), raw.get("tokens")
        return BudgetLimit(
            None if usd is None else float(usd), None if tokens is None else int(tokens)
        )

    @property
    def capped(self) -> bool:
        return self.usd is not None or self.tokens is not None


@dataclass
class LedgerState:
    """What the ledger says at one moment: spent (de-duplicated by run id) and reserved."""

    spent: dict[str, Cost] = field(default_factory=dict)
    #: run id -> (bound, expiry as Unix time)
    reserved: dict[str, tuple[Cost, float]] = field(default_factory=dict)

    @property
    def spent_judgements(self) -> int:
        """Judgements among the spent entries (the rest are agent runs)."""
        return sum(1 for k in self.spent if k.startswith(JUDGEMENT_PREFIX))

    @property
    def spent_tokens(self) -> int:
        return sum(c.tokens for c in self.spent.values())

    @property
    def spent_usd(self) -> float:
        """Dollars of the priced runs (a run of an unpriced model adds nothing it could
        be known to cost; see :attr:`unpriced_runs`)."""
        return sum(c.usd for c in self.spent.values() if c.usd is not None)

    @property
    def unpriced_runs(self) -> int:
        return sum(1 for c in self.spent.values() if c.usd is None)

    @property
    def reserved_tokens(self) -> int:
        return sum(c.tokens for c, _ in self.reserved.values())

    @property
    def reserved_usd(self) -> float:
        return sum(c.usd or 0.0 for c, _ in self.reserved.values())


def _cost_fields(cost: Cost) -> dict[str, Any]:
    return {"tokens": cost.tokens, "usd": cost.usd}


class Ledger:
    """The shared ledger file; see the module docstring for its lines."""

    def __init__(self, path: str | Path, lock_timeout_s: float = LOCK_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.lock = FileLock(f"{self.path}.lock", timeout=lock_timeout_s)
        # the runs of one job reserve from worker threads: one at a time in the process,
        # whatever the file lock's own per-thread semantics
        self._in_process = threading.Lock()
        self._lock_timeout_s = lock_timeout_s

    def __getstate__(self) -> dict[str, object]:
        # a stack job's gate travels to its framework's worker (mastif.execution.stack_worker):
        # the file is what both processes share; each has locks of its own
        return {"path": self.path, "lock_timeout_s": self._lock_timeout_s}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["path"], state["lock_timeout_s"])  # type: ignore[misc, arg-type]

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive use of the ledger across threads, processes and hosts."""
        with self._in_process, self.lock:
            yield

    def read(self, now: float | None = None) -> LedgerState:
        """The ledger's state; needs no lock (a half-written last line is skipped)."""
        now = time.time() if now is None else now
        state = LedgerState()
        for record in read_json_lines(self.path)[0]:  # a torn last line is skipped
            try:
                _fold(state, record)
            except (KeyError, TypeError, ValueError):
                continue  # not a line this version wrote: skipped, like a torn one
        state.reserved = {k: v for k, v in state.reserved.items() if v[1] > now}
        return state

    def _append(self, records: Iterable[dict[str, Any]]) -> None:
        """Append whole lines; the caller holds the lock."""
        lines = b"".join(json.dumps(r, sort_keys=True).encode() + b"\n" for r in records)
        if not lines:
            return
        append_lines(self.path, lines)

    def reserve(
        self, run_id: str, bound: Cost, limit: BudgetLimit, expires_in_s: float, what: str = "run"
    ) -> str | None:
        """Reserve ``bound`` for ``run_id`` if it fits ``limit``: ``None`` when reserved,
        else the sentence saying which cap it would pass (``what``: the next run or
        judgement)."""
        with self.locked():
            state = self.read()
            state.reserved.pop(run_id, None)  # a run reserved again (a rerun) counts once
            refusal = refusal_of(limit, state, bound, what)
            if refusal is None:
                record = {"kind": "reserved", "run_id": run_id, **_cost_fields(bound),
                          "expires": time.time() + expires_in_s}  # fmt: skip
                self._append([record])
            return refusal

    def settle(self, run_id: str, cost: Cost, stack: str = "") -> None:
        """Record a finished run's spend (it ends the run's reservation)."""
        with self.locked():
            self._append(
                [{"kind": "spent", "run_id": run_id, "stack": stack, **_cost_fields(cost)}]
            )

    def settle_missing(self, costs: Mapping[str, Cost], stack: str = "") -> int:
        """Record the runs of ``costs`` the ledger does not have yet (a job killed between
        its checkpoint line and its ledger line); return how many were added."""
        if not costs:
            return 0
        with self.locked():
            known = self.read().spent
            missing = [
                {"kind": "spent", "run_id": rid, "stack": stack, **_cost_fields(c)}
                for rid, c in costs.items()
                if rid not in known
            ]
            self._append(missing)
        return len(missing)

    def release(self, run_ids: Iterable[str]) -> None:
        """Give back reservations that no run will settle."""
        records = [{"kind": "released", "run_id": rid} for rid in run_ids]
        if records:
            with self.locked():
                self._append(records)


def _fold(state: LedgerState, record: dict[str, Any]) -> None:
    """Apply one ledger line to ``state`` (lines apply in file order)."""
    kind, run_id = record["kind"], str(record["run_id"])
    if kind == "spent":
        state.spent[run_id] = Cost(int(record["tokens"]), _usd_field(record))
        state.reserved.pop(run_id, None)
    elif kind == "reserved":
        bound = Cost(int(record["tokens"]), _usd_field(record))
        state.reserved[run_id] = (bound, float(record["expires"]))
    elif kind == "released":
        state.reserved.pop(run_id, None)


def _usd_field(record: dict[str, Any]) -> float | None:
    usd = record.get("usd")
    return None if usd is None else float(usd)


def refusal_of(
    limit: BudgetLimit, state: LedgerState, bound: Cost, what: str = "run"
) -> str | None:
    """``None`` when spent + reserved + ``bound`` fits every cap of ``limit``, else one
    sentence naming the cap, what is spent and reserved, and the bound of the next
    ``what`` (a run, a judgement)."""
    if limit.tokens is not None:
        spent, held = state.spent_tokens, state.reserved_tokens
        if spent + held + bound.tokens > limit.tokens:
            return _sentence("tokens", f"{limit.tokens:,}", f"{spent:,}", f"{held:,}",
                             f"{bound.tokens:,} tokens", what)  # fmt: skip
    if limit.usd is not None:
        if bound.usd is None:
            return (f"budget execution.budget.usd = {format_usd(limit.usd)} cannot be kept: the "
                    "model has no price (set models.<id>.price; 0 for a free model)")  # fmt: skip
        spent_usd, held_usd = state.spent_usd, state.reserved_usd
        if spent_usd + held_usd + bound.usd > limit.usd:
            return _sentence("usd", format_usd(limit.usd), format_usd(spent_usd),
                             format_usd(held_usd), format_usd(bound.usd), what)  # fmt: skip
    return None


def format_usd(x: float) -> str:
    """Dollars with two decimals, or as many more (up to 6) as a small amount needs to
    show (a scripted or cheap model's run costs fractions of a cent)."""
    decimals = 2
    while decimals < 6 and abs(round(x, decimals) - x) > 0.01 * abs(x):
        decimals += 1
    return f"{x:.{decimals}f}"


def _sentence(key: str, limit: str, spent: str, held: str, bound: str, what: str) -> str:
    in_flight = f", {held} reserved by work in flight" if held.strip("0.,") else ""
    return (f"budget execution.budget.{key} = {limit} reached: {spent} spent{in_flight}, the "
            f"next {what} could cost up to {bound}; raise it and rerun to continue")  # fmt: skip


# ------------------------------------------------------------------------ a run's cost


def run_cost(trace: RunTrace, price: ModelPrice | None) -> Cost:
    """What a finished run spent: its API usage (a missing count is 0 tokens: nothing was
    reported, so nothing is known to be billed) and dollars at ``price`` (``None``
    unpriced)."""
    prompt, completion = trace.prompt_tokens or 0, trace.completion_tokens or 0
    return Cost.of(prompt, completion, price)


def run_bounds(
    config: ExperimentConfig,
    stack: Stack,
    tasks: Iterable[Task],
    price: ModelPrice | None,
    base_dir: Path | None = None,
) -> dict[str, Cost]:
    """Per task id, the most a run of ``stack`` on it could cost: the ``high`` scenario of
    :func:`mastif.execution.cost_model.simulate_run` (every loop to ``max_steps``, all tool rounds,
    ``max_tokens`` replies). Must be called outside a running event loop."""
    from mastif.execution.cost_model import configured_tools, simulate_run

    tools = configured_tools(config)
    prompt_format = config.prompt_format_for(stack.protocol)
    bounds: dict[str, Cost] = {}
    for task in tasks:
        if task.task_id in bounds:
            continue
        high, _ = simulate_run(config, stack.framework, prompt_format, "high", task, tools,
                               base_dir=base_dir)  # fmt: skip
        bounds[task.task_id] = Cost.of(high.prompt_tokens, high.completion_tokens, price)
    return bounds


# ------------------------------------------------------------------------ one job's gate


class BudgetGate:
    """One stack job's side of the budget: reserve before a run, settle after it.

    Once a reservation is refused the gate stays shut (:attr:`refusal`): the job starts no
    further run and, after the runs in flight, stops with :class:`BudgetReached`.
    """

    def __init__(
        self,
        ledger: Ledger,
        limit: BudgetLimit,
        price: ModelPrice | None,
        stack: Stack,
        expires_in_s: float,
    ) -> None:
        self.ledger = ledger
        self.limit = limit
        self.price = price
        self.stack = stack
        self.expires_in_s = expires_in_s
        self.bounds: dict[str, Cost] = {}
        self.refusal: str | None = None
        self._held: set[str] = set()

    def admit(self, run_id: str, task_id: str) -> bool:
        """Reserve the run's bound; ``False`` (and the gate shut) when it does not fit."""
        return self.admit_cost(run_id, self.bounds[task_id])

    def admit_cost(self, entry_id: str, bound: Cost, what: str = "run") -> bool:
        """Reserve ``bound`` for ledger entry ``entry_id`` (a run, or a judgement:
        :func:`judgement_entry`, ``what="judgement"``); ``False`` (and the gate shut) when it
        does not fit."""
        if self.refusal is not None:
            return False
        refusal = self.ledger.reserve(entry_id, bound, self.limit, self.expires_in_s, what)
        if refusal is not None:
            self.refusal = refusal
            return False
        self._held.add(entry_id)
        return True

    def check(self, task_id: str) -> None:
        """Refuse before anything starts when not even one run fits (no reservation)."""
        refusal = refusal_of(self.limit, self.ledger.read(), self.bounds[task_id])
        if refusal is not None:
            self.refusal = refusal
            raise BudgetReached(refusal)

    def settle(self, trace: RunTrace) -> None:
        self.settle_cost(trace.run_id, run_cost(trace, self.price))

    def settle_cost(self, entry_id: str, cost: Cost) -> None:
        """Record what ledger entry ``entry_id`` spent (it ends its reservation)."""
        self.ledger.settle(entry_id, cost, self.stack.path)
        self._held.discard(entry_id)

    def settle_done(self, done: Iterable[RunTrace]) -> None:
        """Count the stack's checkpointed runs the ledger lacks (see :meth:`Ledger.settle_missing`)."""
        self.ledger.settle_missing(
            {t.run_id: run_cost(t, self.price) for t in done}, self.stack.path
        )

    def release_unsettled(self) -> None:
        """Give back the reservations of runs that did not finish (the job is ending)."""
        held, self._held = self._held, set()
        self.ledger.release(sorted(held))


def job_gate(
    raw_budget: Mapping[str, Any] | None,
    price: ModelPrice | None,
    stack: Stack,
    expires_in_s: float,
    ledger: Path = LEDGER,
) -> BudgetGate | None:
    """A job's gate on the experiment's ledger for config ``execution.budget``
    (``raw_budget``), or ``None`` when it caps nothing. ``expires_in_s``: how long a
    reservation of a job killed outright still counts."""
    limit = BudgetLimit.from_mapping(raw_budget)
    if not limit.capped:
        return None
    return BudgetGate(Ledger(ledger), limit, price, stack, expires_in_s)

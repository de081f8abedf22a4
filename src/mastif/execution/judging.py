"""Judging a stack's runs: every judgement of the panel, concurrently, checkpointed, budgeted.

A *judgement* is one judge's verdict on one run in one repeat (:func:`mastif.evaluation.judge.judge_one`:
up to ``judge.attempts`` calls). :func:`judge_panel_runs` makes every judgement of a stack's
runs -- each judge of the panel (``judge.models``) on each run, ``judge.repeats`` times -- and
returns the judged table (``docs/data.md``):

* **Concurrently.** The judges' endpoints open one at a time (local servers share the
  cores); each judge's judgements are in flight together up to its endpoint's
  ``max_connections``, all through one gateway, whose adaptive limit keeps requests within
  that and backs off on 429s (``Retry-After``) with the configured retries.
* **Checkpointed.** Every finished judgement is appended at once to a JSONL file
  (:class:`JudgeCheckpoint`, ``results/checkpoints/judged/...``), keyed by judge, run and
  repeat, with a fingerprint of everything that decides it (the judge's messages, the
  sampling settings, the schema and the judge's spec). A killed job's rerun takes the
  judgements whose fingerprint still matches and makes only the others; nothing is judged
  twice, nothing is lost.
* **Budgeted.** With a :class:`~mastif.execution.budget.BudgetGate`, each judgement reserves its
  upper bound (:func:`mastif.execution.cost_model.judgement_bound`) in the experiment's ledger before it
  starts and settles its API usage after; once the budget refuses, no judgement starts, the
  ones in flight finish (checkpointed) and :class:`~mastif.execution.budget.BudgetReached` is raised.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from mastif.core.atomic import append_lines, read_json_lines
from mastif.core.config import ModelPrice
from mastif.evaluation.judge import (
    CRITERIA,
    JUDGED_SCHEMA,
    JudgeSettings,
    judge_one,
    judge_view,
    judgement_schema,
    known_sum,
    repeat_seed,
)
from mastif.execution.budget import (
    BudgetGate,
    BudgetReached,
    Cost,
    judgement_entry,
    refusal_of,
)
from mastif.providers import Gateway

log = logging.getLogger(__name__)

#: what opens a judge's endpoint: model id -> a context manager giving its gateway
OpenGateway = Callable[[str], AbstractContextManager[Gateway]]


@dataclass(frozen=True)
class JudgementKey:
    judge_model: str
    run_id: str
    repeat: int


def judgement_fingerprint(
    key: JudgementKey, messages: list[dict[str, str]], settings: JudgeSettings, salt: str = ""
) -> str:
    """What must be equal for a checkpointed judgement to count as made: the judge, the run,
    the repeat, what the judge is shown, how it samples and answers, and ``salt`` (the
    judge's model spec, from the job)."""
    what = {
        "judge_model": key.judge_model,
        "run_id": key.run_id,
        "repeat": key.repeat,
        "messages": messages,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "attempts": settings.attempts,
        "seed": settings.seed,
        "schema": judgement_schema(settings.max_tokens),
        "salt": salt,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


class JudgeCheckpoint:
    """Append-only JSONL of a stack's finished judgements; survives a killed job.

    One line per judgement: its key, fingerprint and the fields :func:`judge_one` returned.
    It lives outside Snakemake's declared outputs, so a killed or failed job keeps it; the
    job deletes it once the judged table is written.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def load(self) -> dict[tuple[JudgementKey, str], dict[str, Any]]:
        """(key, fingerprint) -> fields of every whole line (a torn last line is skipped:
        that judgement is made again)."""
        done: dict[tuple[JudgementKey, str], dict[str, Any]] = {}
        for record in read_json_lines(self.path)[0]:
            try:
                key = JudgementKey(record["judge_model"], record["run_id"], int(record["repeat"]))
                done[key, str(record["fingerprint"])] = dict(record["fields"])
            except (KeyError, TypeError, ValueError):
                continue
        return done

    def append(self, key: JudgementKey, fingerprint: str, fields: dict[str, Any]) -> None:
        record = {
            "judge_model": key.judge_model,
            "run_id": key.run_id,
            "repeat": key.repeat,
            "fingerprint": fingerprint,
            "fields": fields,
        }
        with self._lock:  # worker threads append one whole line at a time
            append_lines(self.path, json.dumps(record, sort_keys=True).encode() + b"\n")

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class JudgeBudget:
    """The judging job's side of ``execution.budget``: the job's gate and each judge's price
    (``None``: unpriced; its judgements then count tokens only)."""

    gate: BudgetGate
    prices: Mapping[str, ModelPrice | None]

    def bound(self, judge_model: str, messages: list[dict[str, str]], s: JudgeSettings) -> Cost:
        from mastif.execution.cost_model import judgement_bound

        prompt, completion = judgement_bound(messages, s.max_tokens, s.attempts)
        return Cost.of(prompt, completion, self.prices.get(judge_model))

    def check(self, judge_model: str, messages: list[dict[str, str]], s: JudgeSettings) -> None:
        """Raise BudgetReached when not even this judgement fits (before an endpoint opens)."""
        refusal = refusal_of(self.gate.limit, self.gate.ledger.read(),
                             self.bound(judge_model, messages, s), "judgement")  # fmt: skip
        if refusal is not None:
            self.gate.refusal = refusal
            raise BudgetReached(refusal)

    def cost(self, judge_model: str, fields: Mapping[str, Any]) -> Cost:
        # a count the API did not report is 0 here, as for a run (nothing known to be billed)
        prompt = fields["judge_prompt_tokens"] or 0
        completion = fields["judge_completion_tokens"] or 0
        return Cost.of(prompt, completion, self.prices.get(judge_model))


@dataclass(frozen=True)
class _Work:
    key: JudgementKey
    index: int  # the run's row
    messages: list[dict[str, str]]
    settings: JudgeSettings
    fingerprint: str


def _judge_concurrently(
    gateway: Gateway,
    work: Sequence[_Work],
    checkpoint: JudgeCheckpoint | None,
    budget: JudgeBudget | None,
    done: dict[JudgementKey, dict[str, Any]],
) -> None:
    """Make the judgements of ``work`` (one judge's, behind ``gateway``) into ``done``, at
    most the endpoint's ``max_connections`` at once; raise BudgetReached after the ones in
    flight when the budget refuses one."""
    slots = max(1, gateway.endpoint.max_connections)
    free = threading.Semaphore(slots)
    futures: list[Future[None]] = []

    def one(w: _Work) -> None:
        try:
            fields = judge_one(gateway, w.key.run_id, w.messages, w.settings,
                               key=f"{w.key.run_id}.j{w.key.repeat}")  # fmt: skip
            if checkpoint is not None:
                checkpoint.append(w.key, w.fingerprint, fields)
            if budget is not None:  # after the checkpoint, as for runs
                entry = judgement_entry(w.key.judge_model, w.key.run_id, w.key.repeat)
                budget.gate.settle_cost(entry, budget.cost(w.key.judge_model, fields))
            done[w.key] = fields
            log.info("judge %s, repeat %d, run %s: %s %s", w.key.judge_model, w.key.repeat,
                     w.key.run_id, fields["judge_status"], {c: fields[c] for c in CRITERIA})  # fmt: skip
        finally:
            free.release()

    refused = False
    with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="judge") as pool:
        try:
            for w in work:
                free.acquire()
                if any(f.done() and f.exception() for f in futures):
                    free.release()
                    break  # a judgement failed outside the judge's own handling: stop
                if budget is not None:
                    entry = judgement_entry(w.key.judge_model, w.key.run_id, w.key.repeat)
                    bound = budget.bound(w.key.judge_model, w.messages, w.settings)
                    if not budget.gate.admit_cost(entry, bound, what="judgement"):
                        free.release()
                        refused = True
                        break
                futures.append(pool.submit(one, w))
        finally:
            for f in futures:
                f.exception()  # wait for the judgements in flight
            if budget is not None:
                budget.gate.release_unsettled()
    for f in futures:
        f.result()  # an unexpected error in a worker: raised here, after the others ended
    if refused:
        assert budget is not None and budget.gate.refusal is not None
        raise BudgetReached(budget.gate.refusal)


def judge_runs(
    runs: pl.DataFrame,
    tasks: pl.DataFrame,
    rubric_path: Path,
    gateway: Gateway,
    settings: JudgeSettings,
    repeats: int = 1,
    checkpoint: JudgeCheckpoint | None = None,
    budget: JudgeBudget | None = None,
) -> pl.DataFrame:
    """One judged row per run (see docs/data.md), by the one judge behind ``gateway``."""
    return judge_panel_runs(
        runs,
        tasks,
        rubric_path,
        lambda _model_id: nullcontext(gateway),
        settings,
        panel=(settings.model_id,),
        repeats=repeats,
        checkpoint=checkpoint,
        budget=budget,
    )


def judge_panel_runs(
    runs: pl.DataFrame,
    tasks: pl.DataFrame,
    rubric_path: Path,
    open_gateway: OpenGateway,
    settings: JudgeSettings,
    panel: Sequence[str] | None = None,
    repeats: int = 1,
    checkpoint: JudgeCheckpoint | None = None,
    budget: JudgeBudget | None = None,
    salt: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """One judged row per run (see docs/data.md) from a judge panel (``judge.models``).

    Every judge of ``panel`` (default: ``settings.model_id`` alone) scores every run
    ``repeats`` times, one judge's endpoint open at a time (``open_gateway(model_id)``), its
    judgements concurrently (module docstring). ``checkpoint``: judgements found there
    (same fingerprint; ``salt``: per judge, what else decides its judgements) are not made
    again, new ones are appended. ``budget``: see the module docstring.

    Repeat r's first attempt samples with :func:`~mastif.evaluation.judge.repeat_seed`. The row's
    TU/TA/TCR are the median over the judges of each judge's repeat-0 score, leaving out
    judges whose judgement failed; ``judge_status`` is ``judge_failed`` (and the scores null)
    only when every judge failed. The reply, rationale, attempt and seed columns are those of
    ``settings.model_id``'s repeat-0 judgement, or, when it failed, of the first judge of the
    panel whose repeat-0 judgement succeeded (``judge_model`` names it); the token columns
    sum every judgement (null when one is unknown). ``judge_panel`` lists every judgement
    with its tokens. With one judge and one repeat the row is that judge's judgement.
    """
    panel = tuple(panel or (settings.model_id,))
    if settings.model_id not in panel:
        raise ValueError(f"judge {settings.model_id!r} is not one of the panel {list(panel)}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    salt = salt or {}
    rubric_bytes = Path(rubric_path).read_bytes()
    rubric = rubric_bytes.decode("utf-8")
    rubric_sha = hashlib.sha256(rubric_bytes).hexdigest()
    by_id = {t["task_id"]: t for t in tasks.iter_rows(named=True)}
    rows_in = list(runs.iter_rows(named=True))
    views = []
    for run in rows_in:
        task = by_id.get(run["task_id"])
        if task is None:
            raise KeyError(
                f"run {run['run_id']} refers to task {run['task_id']!r}, not in the tasks table"
            )
        views.append(
            judge_view(
                run, task, rubric, reference_guided=settings.reference_guided, clip=settings.clip
            )
        )
    saved = checkpoint.load() if checkpoint is not None else {}
    done: dict[JudgementKey, dict[str, Any]] = {}
    # the primary judge first, then the others in the panel's order
    order = [settings.model_id, *(m for m in panel if m != settings.model_id)]
    for model_id in order:
        todo: list[_Work] = []
        for i, (run, (messages, _)) in enumerate(zip(rows_in, views, strict=True)):
            for r in range(repeats):
                key = JudgementKey(model_id, run["run_id"], r)
                one = replace(settings, model_id=model_id,
                              seed=repeat_seed(settings.seed, run["run_id"], r))  # fmt: skip
                fp = judgement_fingerprint(key, messages, one, salt.get(model_id, ""))
                if (key, fp) in saved:
                    done[key] = saved[key, fp]
                else:
                    todo.append(_Work(key, i, messages, one, fp))
        if saved:
            log.info("judge %s: %d judgement(s) from the checkpoint, %d to make", model_id,
                     len(rows_in) * repeats - len(todo), len(todo))  # fmt: skip
        if not todo:
            continue  # every judgement is checkpointed: the endpoint is not even opened
        if budget is not None:  # nothing fits: stop before a server starts
            budget.check(model_id, todo[0].messages, todo[0].settings)
        with open_gateway(model_id) as gateway:
            _judge_concurrently(gateway, todo, checkpoint, budget, done)
    return _judged_table(rows_in, views, done, order, panel, repeats, settings, rubric_sha)


def _judged_table(
    rows_in: list[dict[str, Any]],
    views: list[tuple[list[dict[str, str]], int]],
    done: Mapping[JudgementKey, dict[str, Any]],
    order: Sequence[str],
    panel: Sequence[str],
    repeats: int,
    settings: JudgeSettings,
    rubric_sha: str,
) -> pl.DataFrame:
    rows = []
    for run, (_, n_clipped) in zip(rows_in, views, strict=True):
        rid = run["run_id"]
        mine = {(m, r): done[JudgementKey(m, rid, r)] for m in order for r in range(repeats)}
        first = {m: mine[m, 0] for m in order}
        ok = [m for m in order if first[m]["judge_status"] == "ok"]
        shown = ok[0] if ok else settings.model_id
        fields = dict(first[shown])
        for c in CRITERIA:
            fields[c] = float(np.median([first[m][c] for m in ok])) if ok else None
        for k in ("judge_prompt_tokens", "judge_completion_tokens"):
            fields[k] = known_sum([j[k] for j in mine.values()])
        entries = [
            {"judge_model": m, "repeat": r, "status": j["judge_status"],
             **{c: j[c] for c in CRITERIA},
             "prompt_tokens": j["judge_prompt_tokens"],
             "completion_tokens": j["judge_completion_tokens"]}
            for m in panel
            for r in range(repeats)
            for j in (mine[m, r],)
        ]  # fmt: skip
        rows.append(
            {
                "run_id": rid,
                "model": run["model"],
                "protocol": run["protocol"],
                "framework": run["framework"],
                "task_id": run["task_id"],
                "judge_model": shown,
                "rubric_sha256": rubric_sha,
                **fields,
                "judge_node_chars": settings.clip.node_chars,
                "judge_tool_chars": settings.clip.tool_chars,
                "judge_answer_chars": settings.clip.answer_chars,
                "judge_n_clipped": n_clipped,
                "judge_panel": entries,
            }
        )
    return pl.DataFrame(rows, schema=JUDGED_SCHEMA)

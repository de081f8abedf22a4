"""Judging a stack (issue 23, item 1; issue 21's budget): judgements run concurrently up to the
endpoint's connections, a killed judging job resumes from its checkpoint without judging a
run again, and the experiment's budget counts the judge's calls. Scripted endpoints."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from mastif.core.config import ModelPrice, Stack
from mastif.evaluation.judge import JudgeSettings, judge_view
from mastif.execution.budget import (
    BudgetGate,
    BudgetLimit,
    BudgetReached,
    Ledger,
    format_usd,
    judgement_entry,
)
from mastif.execution.judging import JudgeBudget, JudgeCheckpoint, judge_panel_runs, judge_runs
from mastif.providers import Endpoint, Gateway
from tests.support.fakes import ScriptedChatServer
from tests.support.judge_frames import judgeable_runs
from tests.support.paths import REPO

RUBRIC = REPO / "config" / "rubric.md"
SETTINGS = JudgeSettings("judge", 0.0, 256, 1, 1)
PRICE = ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)
#: the scripted server's usage per call (tests.support.fakes.ScriptedChatServer)
PROMPT, COMPLETION = 11, 7

VALID = json.dumps(
    {f"{c}_{k}": v for c in ("TU", "TA", "TCR")
     for k, v in (("rationale", "A fair reading of the run."), ("score", 0.7))}
)  # fmt: skip


def stack_runs(n: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``n`` runs of one stack, each on its own task; run i's answer names it."""
    return judgeable_runs(
        [(f"r{i}", f"t{i}", f"Find item {i}.", f"answer of r{i}.") for i in range(n)], "Shopping"
    )


def judged_run(payload: dict[str, Any]) -> str:
    """Which run a judge request is about."""
    return re.search(r"answer of (r\d+)\.", payload["messages"][-1]["content"]).group(1)


class InFlight:
    """A scripted judge answering after ``delay_s`` that counts requests in flight."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s, self.now, self.peak = delay_s, 0, 0
        self._lock = threading.Lock()

    def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.delay_s)
        with self._lock:
            self.now -= 1
        return {"content": VALID}


def test_judgements_run_concurrently_up_to_the_endpoints_connections(tmp_path):
    runs, tasks = stack_runs(12)
    judge = InFlight(0.3)
    with ScriptedChatServer(judge) as srv:
        endpoint = Endpoint("openai_compatible", srv.base_url, "judge", max_connections=4)
        with Gateway(endpoint, retries=0) as gw:
            judged = judge_runs(runs, tasks, RUBRIC, gw, SETTINGS, repeats=2)
    assert 1 < judge.peak <= 4  # concurrent, and never more than the endpoint allows
    assert len(srv.requests) == 24  # every run, both repeats, once each
    assert sorted(judged_run(p) for p in srv.requests) == sorted([f"r{i}" for i in range(12)] * 2)
    assert judged["run_id"].to_list() == runs["run_id"].to_list()  # the runs' order
    assert judged["judge_status"].to_list() == ["ok"] * 12
    # each judgement's own usage, summed per run
    assert judged["judge_prompt_tokens"].to_list() == [2 * PROMPT] * 12
    repeats = [[e["repeat"] for e in panel] for panel in judged["judge_panel"]]
    assert repeats == [[0, 1]] * 12


def test_unknown_judge_usage_is_null_not_zero(tmp_path):
    runs, tasks = stack_runs(2)
    with ScriptedChatServer(lambda p: {"content": VALID, "usage": None}) as srv:
        with Gateway(Endpoint("openai_compatible", srv.base_url, "judge"), retries=0) as gw:
            judged = judge_runs(runs, tasks, RUBRIC, gw, SETTINGS)
    assert judged["judge_prompt_tokens"].to_list() == [None, None]
    assert judged["judge_completion_tokens"].to_list() == [None, None]
    assert judged["judge_panel"][0][0]["prompt_tokens"] is None


# ------------------------------------------------------------------------ resuming

KILLED_JOB = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import polars as pl

    from mastif.evaluation.judge import JudgeSettings
    from mastif.execution.judging import JudgeCheckpoint, judge_runs
    from mastif.providers import Endpoint, Gateway

    base_url, work, rubric = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    runs, tasks = pl.read_parquet(work / "runs.parquet"), pl.read_parquet(work / "tasks.parquet")
    endpoint = Endpoint("openai_compatible", base_url, "judge", max_connections=2)
    with Gateway(endpoint, retries=0) as gw:
        judge_runs(runs, tasks, rubric, gw, JudgeSettings("judge", 0.0, 256, 1, 1),
                   checkpoint=JudgeCheckpoint(work / "judged.jsonl"))
    """
)


def test_a_killed_judging_job_resumes_without_judging_a_run_again(tmp_path):
    runs, tasks = stack_runs(10)
    runs.write_parquet(tmp_path / "runs.parquet")
    tasks.write_parquet(tmp_path / "tasks.parquet")
    checkpoint = JudgeCheckpoint(tmp_path / "judged.jsonl")
    with ScriptedChatServer(InFlight(0.25)) as srv:
        job = subprocess.Popen(
            [sys.executable, "-c", KILLED_JOB, srv.base_url, str(tmp_path), str(RUBRIC)],
            env={**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"},
        )
        try:
            deadline = time.monotonic() + 60
            while len(checkpoint.load()) < 4:  # some judgements made, most still to make
                assert job.poll() is None, "the judging job ended before it was killed"
                assert time.monotonic() < deadline, "no judgement checkpointed in 60 s"
                time.sleep(0.02)
            job.send_signal(signal.SIGKILL)  # no clean-up of any kind
        finally:
            job.wait(timeout=30)
        first = checkpoint.load()
        asked_before = len(srv.requests)
        assert 4 <= len(first) < 10 and asked_before < 10
        kept = {key.run_id for key, _ in first}
        with Gateway(Endpoint("openai_compatible", srv.base_url, "judge"), retries=0) as gw:
            judged = judge_runs(runs, tasks, RUBRIC, gw, SETTINGS, checkpoint=checkpoint)
        asked_after = [judged_run(p) for p in srv.requests[asked_before:]]
    # only the judgements the checkpoint lacks were made (those in flight at the kill too)
    assert sorted(asked_after) == sorted({f"r{i}" for i in range(10)} - kept)
    assert judged["run_id"].to_list() == runs["run_id"].to_list()
    assert judged["judge_status"].to_list() == ["ok"] * 10
    assert len(checkpoint.load()) == 10  # each judgement once


def test_a_checkpointed_judgement_counts_only_for_the_same_settings(tmp_path):
    runs, tasks = stack_runs(3)
    checkpoint = JudgeCheckpoint(tmp_path / "judged.jsonl")
    with ScriptedChatServer(lambda p: {"content": VALID}) as srv:
        with Gateway(Endpoint("openai_compatible", srv.base_url, "judge"), retries=0) as gw:
            judge_runs(runs, tasks, RUBRIC, gw, SETTINGS, checkpoint=checkpoint)
            judge_runs(runs, tasks, RUBRIC, gw, SETTINGS, checkpoint=checkpoint)
            assert len(srv.requests) == 3  # the second pass came from the checkpoint
            hotter = JudgeSettings("judge", 0.7, 256, 1, 1)
            judge_runs(runs, tasks, RUBRIC, gw, hotter, checkpoint=checkpoint)
            assert len(srv.requests) == 6  # another temperature: judged again
    # a torn last line (a kill mid-write) is skipped: that judgement is made again
    with checkpoint.path.open("a") as fh:
        fh.write('{"judge_model": "judge", "run_id": "r0", "rep')
    assert len(checkpoint.load()) == 6


# ------------------------------------------------------------------------ the budget


def judge_with_budget(srv_url: str, runs, tasks, checkpoint, ledger: Path, tokens: int):
    gate = BudgetGate(Ledger(ledger), BudgetLimit(tokens=tokens), None,
                      Stack("m", "standard", "langgraph"), expires_in_s=600)  # fmt: skip
    budget = JudgeBudget(gate, {"judge": PRICE})
    with Gateway(Endpoint("openai_compatible", srv_url, "judge"), retries=0) as gw:
        return judge_runs(runs, tasks, RUBRIC, gw, SETTINGS, checkpoint=checkpoint,
                          budget=budget)  # fmt: skip


def test_the_budget_counts_judgements_stops_cleanly_and_a_larger_one_finishes(tmp_path):
    runs, tasks = stack_runs(6)
    rubric = RUBRIC.read_text()
    views = [judge_view(r, t, rubric)[0] for r, t in
             zip(runs.iter_rows(named=True), tasks.iter_rows(named=True), strict=True)]  # fmt: skip
    budget_of = JudgeBudget(None, {"judge": PRICE})  # type: ignore[arg-type]
    bound = max(budget_of.bound("judge", v, SETTINGS).tokens for v in views)
    per = PROMPT + COMPLETION
    assert per < bound
    checkpoint, ledger = JudgeCheckpoint(tmp_path / "judged.jsonl"), tmp_path / "budget.jsonl"
    # judgement k starts when (k-1) x per + bound <= budget: three of the six
    limit = bound + int(2.5 * per)
    with ScriptedChatServer(lambda p: {"content": VALID}) as srv:
        with pytest.raises(BudgetReached) as stopped:
            judge_with_budget(srv.base_url, runs, tasks, checkpoint, ledger, limit)
        assert str(stopped.value).startswith(
            f"budget execution.budget.tokens = {limit:,} reached: {3 * per} spent, the next "
            "judgement could cost up to "
        )
        first = checkpoint.load()
        assert len(first) == 3 and len(srv.requests) == 3
        state = Ledger(ledger).read()
        assert set(state.spent) == {judgement_entry("judge", k.run_id, 0) for k, _ in first}
        assert state.reserved == {} and state.spent_judgements == 3
        assert state.spent_usd == pytest.approx(3 * (PROMPT * 1.0 + COMPLETION * 2.0) / 1e6)

        judged = judge_with_budget(srv.base_url, runs, tasks, checkpoint, ledger, 10 * bound)
        asked = [judged_run(p) for p in srv.requests]
    assert len(asked) == 6 and len(set(asked)) == 6  # no run judged twice
    assert judged["judge_status"].to_list() == ["ok"] * 6
    state = Ledger(ledger).read()
    assert state.spent_judgements == 6 and state.spent_tokens == 6 * per
    assert format_usd(state.spent_usd)  # priced at the judge's price


def test_no_judge_endpoint_opens_when_no_judgement_fits(tmp_path):
    runs, tasks = stack_runs(2)
    opened: list[str] = []
    gate = BudgetGate(Ledger(tmp_path / "budget.jsonl"), BudgetLimit(tokens=10), None,
                      Stack("m", "standard", "langgraph"), expires_in_s=600)  # fmt: skip

    def open_gateway(model_id: str) -> Any:
        opened.append(model_id)
        raise AssertionError("opened")

    with pytest.raises(BudgetReached, match=r"execution\.budget\.tokens = 10 reached: 0 spent, "
                       r"the next judgement could cost up to [\d,]+ tokens"):  # fmt: skip
        judge_panel_runs(runs, tasks, RUBRIC, open_gateway, SETTINGS,
                         budget=JudgeBudget(gate, {"judge": None}))  # fmt: skip
    assert opened == [] and not (tmp_path / "budget.jsonl").exists()

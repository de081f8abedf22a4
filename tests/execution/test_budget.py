"""The run-wide budget (issue 21, item 3): the shared ledger and a stack job stopped by it."""

from __future__ import annotations

import copy
import json
import multiprocessing
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from mastif.core.config import ConfigError, merge_configs
from mastif.evaluation.judge import JudgeSettings, judge_view
from mastif.execution.budget import (
    LEDGER,
    BudgetGate,
    BudgetLimit,
    BudgetReached,
    Cost,
    Ledger,
    format_usd,
    refusal_of,
    run_bounds,
    run_cost,
)
from mastif.execution.experiment import parse_config
from mastif.execution.judging import JudgeBudget, JudgeCheckpoint
from mastif.execution.runner import Checkpoint, execute_stack
from mastif.tasks import load_tasks, tasks_from_frame
from tests.support.fakes import ScriptedChatServer
from tests.support.paths import REPO
from tests.support.pipeline import snakemake

# ------------------------------------------------------------------------ the ledger


def test_spent_runs_count_once_by_run_id(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "budget.jsonl")
    ledger.settle("a", Cost(100, 0.25))
    ledger.settle("b", Cost(10, 0.5))
    ledger.settle("a", Cost(100, 0.25))  # the same run found again (a resumed job)
    state = ledger.read()
    assert sorted(state.spent) == ["a", "b"]
    assert state.spent_tokens == 110 and state.spent_usd == pytest.approx(0.75)
    # a resumed job settles its checkpointed runs: only those the ledger lacks are added
    assert ledger.settle_missing({"a": Cost(100, 0.25), "c": Cost(1, None)}) == 1
    state = ledger.read()
    assert sorted(state.spent) == ["a", "b", "c"] and state.unpriced_runs == 1


def test_a_reservation_counts_until_settled_released_or_expired(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "budget.jsonl")
    limit = BudgetLimit(tokens=1000)
    assert ledger.reserve("a", Cost(300, None), limit, expires_in_s=60) is None
    assert ledger.reserve("b", Cost(300, None), limit, expires_in_s=60) is None
    assert ledger.reserve("a", Cost(300, None), limit, expires_in_s=60) is None  # counts once
    assert ledger.read().reserved_tokens == 600
    ledger.settle("a", Cost(50, None))  # ends a's reservation
    ledger.release(["b"])
    state = ledger.read()
    assert state.reserved == {} and state.spent_tokens == 50
    assert ledger.reserve("c", Cost(300, None), limit, expires_in_s=60) is None
    assert ledger.read().reserved_tokens == 300
    # a killed job's reservation stops counting once it expired
    assert ledger.read(now=time.time() + 61).reserved_tokens == 0


def test_the_refusal_is_one_sentence_naming_the_budget(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "budget.jsonl")
    ledger.settle("a", Cost(1000, 0.48))
    refusal = refusal_of(BudgetLimit(usd=0.5), ledger.read(), Cost(900, 0.05))
    assert refusal == (
        "budget execution.budget.usd = 0.50 reached: 0.48 spent, the next run could cost "
        "up to 0.05; raise it and rerun to continue"
    )
    assert refusal_of(BudgetLimit(usd=0.6), ledger.read(), Cost(900, 0.05)) is None
    assert ledger.reserve("b", Cost(900, 0.05), BudgetLimit(usd=0.5), 60) == refusal
    assert ledger.read().reserved == {}  # a refused run reserves nothing
    tokens = refusal_of(BudgetLimit(tokens=1500), ledger.read(), Cost(900, 0.05))
    assert tokens is not None and tokens.startswith(
        "budget execution.budget.tokens = 1,500 reached: 1,000 spent, the next run could "
        "cost up to 900 tokens"
    )
    # an unpriced model cannot be held to a dollar cap
    unpriced = refusal_of(BudgetLimit(usd=0.6), ledger.read(), Cost(900, None))
    assert unpriced is not None and "models.<id>.price" in unpriced


def test_a_torn_last_line_is_skipped_and_the_next_record_starts_a_new_line(tmp_path):
    path = tmp_path / "budget.jsonl"
    ledger = Ledger(path)
    ledger.settle("a", Cost(10, 0.1))
    with path.open("a") as fh:
        fh.write('{"kind": "spent", "run_id": "torn", "tok')  # a job killed mid-write
    assert sorted(ledger.read().spent) == ["a"]
    ledger.settle("b", Cost(20, 0.2))
    assert sorted(ledger.read().spent) == ["a", "b"]
    assert path.read_text().splitlines()[-1].startswith('{"kind": "spent"')


def _reserve_until_refused(path: str, worker: str, threads: int, start: Any) -> None:
    """A job: ``threads`` runs in flight reserving 1 token each until refused, settling
    each at its bound after a short "run"; all jobs begin together at ``start`` (a barrier:
    a job that began alone could take every token before the others exist)."""
    ledger = Ledger(path)
    start.wait(timeout=60)

    def runs(thread: int) -> None:
        for i in range(1000):
            run_id = f"{worker}-{thread}-{i}"
            if ledger.reserve(run_id, Cost(1, None), BudgetLimit(tokens=60), 60) is not None:
                return
            # the run: the others reserve meanwhile (20 ms: at 2 ms one job of a loaded
            # 2-core CI machine took all 60 tokens before the others were scheduled)
            time.sleep(0.02)
            ledger.settle(run_id, Cost(1, None))

    pool = [threading.Thread(target=runs, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def test_jobs_reserving_at_once_never_start_more_than_the_budget(tmp_path: Path) -> None:
    """Four processes with three threads each race for a 60-token budget, one token a run:
    exactly 60 runs start (a check without the lock lets two take the last token)."""
    path = str(tmp_path / "budget.jsonl")
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(4)
    jobs = [ctx.Process(target=_reserve_until_refused, args=(path, f"job{j}", 3, start))
            for j in range(4)]  # fmt: skip
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(timeout=120)
        assert job.exitcode == 0
    state = Ledger(path).read()
    assert state.spent_tokens == 60 and len(state.spent) == 60 and state.reserved == {}
    lines = Path(path).read_text().splitlines()
    assert all(json.loads(line)["kind"] in ("reserved", "spent") for line in lines)
    assert len({json.loads(line)["run_id"] for line in lines}) == 60
    # more than one job got runs: they really competed
    assert len({rid.split("-")[0] for rid in state.spent}) > 1


# ------------------------------------------------------------------------ the config


def test_a_dollar_budget_needs_every_agent_models_and_judges_price(fake_model_config: Any) -> None:
    cfg = fake_model_config("http://127.0.0.1:9/v1")
    cfg["execution"]["budget"] = {"usd": 0.5}
    judge = cfg["judge"]["model"]
    assert judge != "fake"
    with pytest.raises(ConfigError, match=r"execution\.budget\.usd = 0\.5 .*models\.fake\.price"):
        parse_config(cfg)
    cfg["models"]["fake"]["price"] = {"input_per_mtok": 1, "output_per_mtok": 2}
    # the judge's calls count too
    with pytest.raises(ConfigError, match=rf"agent model and judge; models\.{judge}\.price"):
        parse_config(cfg)
    cfg["models"][judge]["price"] = {"input_per_mtok": 0, "output_per_mtok": 0}
    assert parse_config(cfg).execution.budget.usd == 0.5
    cfg["execution"]["budget"] = {"tokens": 1000}  # tokens need no price
    del cfg["models"]["fake"]["price"]
    assert parse_config(cfg).execution.budget.tokens == 1000


# ------------------------------------------------------------------------ a stack job


PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}


def _paid_config(fake_model_config: Any, base_url: str, repeats: int) -> dict[str, Any]:
    cfg = fake_model_config(base_url, max_steps=1)
    cfg["models"]["fake"]["price"] = PRICE
    cfg["repeats"] = repeats
    return cfg


def _execute(cfg_dict: dict[str, Any], workdir: Path, gate: BudgetGate | None):
    cfg = parse_config(copy.deepcopy(cfg_dict))
    workdir.mkdir(parents=True, exist_ok=True)
    return execute_stack(
        cfg, cfg.stacks()[0], load_tasks("builtin")[:1], workdir / "1-of-1.jsonl",
        workdir / "server.log", REPO, budget=gate,
    )  # fmt: skip


def _gate(cfg_dict: dict[str, Any], ledger: Path, usd: float) -> BudgetGate:
    cfg = parse_config(copy.deepcopy(cfg_dict))
    return BudgetGate(Ledger(ledger), BudgetLimit(usd=usd), cfg.models["fake"].price,
                      cfg.stacks()[0], expires_in_s=600)  # fmt: skip


def test_a_budget_for_half_the_runs_stops_cleanly_and_a_larger_one_finishes(
    tmp_path: Path, fake_model_config: Any
) -> None:
    """The acceptance test of issue 21: a paid scripted endpoint, six runs (one task, six
    repeats, one at a time), a budget that allows three."""
    with ScriptedChatServer(lambda payload: {"content": "done."}) as srv:
        cfg = _paid_config(fake_model_config, srv.base_url, repeats=6)
        parsed = parse_config(copy.deepcopy(cfg))
        stack, task = parsed.stacks()[0], load_tasks("builtin")[0]
        bound = run_bounds(parsed, stack, [task], parsed.models["fake"].price, REPO)[task.task_id]
        assert bound.usd is not None and bound.usd > 0
        # what one run really costs here (every run makes the same calls): one probe run
        (probe,) = _execute(_paid_config(fake_model_config, srv.base_url, 1), tmp_path / "probe",
                            None)  # fmt: skip
        per_run = run_cost(probe, parsed.models["fake"].price)
        assert per_run.usd is not None and 0 < per_run.usd < bound.usd
        calls_per_run = len(srv.requests)

        # run k starts when (k-1) x per_run + bound <= budget: runs 1-3, not 4
        budget = bound.usd + 2.5 * per_run.usd
        work, ledger = tmp_path / "ckpt", tmp_path / "budget.jsonl"
        with pytest.raises(BudgetReached) as stopped:
            _execute(cfg, work, _gate(cfg, ledger, budget))
        message = str(stopped.value)
        assert message == (
            f"budget execution.budget.usd = {format_usd(budget)} reached: "
            f"{format_usd(3 * per_run.usd)} spent, the next run could cost up to "
            f"{format_usd(bound.usd)}; raise it and rerun to continue"
        )
        first = Checkpoint(work / "1-of-1.jsonl").load()
        assert sorted(t.repeat for t in first.values()) == [0, 1, 2]
        state = Ledger(ledger).read()
        assert set(state.spent) == set(first) and state.reserved == {}
        assert state.spent_usd == pytest.approx(3 * per_run.usd)
        assert len(srv.requests) == calls_per_run * 4  # the probe and three runs

        # the same budget again: nothing more fits, refused before any run or server
        with pytest.raises(BudgetReached):
            _execute(cfg, work, _gate(cfg, ledger, budget))
        assert len(srv.requests) == calls_per_run * 4

        # raised: the rest, from the checkpoint, nothing redone or counted twice
        traces = _execute(cfg, work, _gate(cfg, ledger, bound.usd + 10 * per_run.usd))
    assert [t.repeat for t in traces] == [0, 1, 2, 3, 4, 5]
    run_ids = [t.run_id for t in traces]
    assert len(set(run_ids)) == 6 and set(first) <= set(run_ids)
    for trace in traces[:3]:  # the finished runs came from the checkpoint, not rerun
        assert trace.started_at == first[trace.run_id].started_at
    assert len(srv.requests) == calls_per_run * 7
    state = Ledger(ledger).read()
    assert set(state.spent) == set(run_ids) and state.reserved == {}
    assert state.spent_usd == pytest.approx(6 * per_run.usd)


def test_no_run_starts_when_the_first_does_not_fit(tmp_path: Path, fake_model_config: Any):
    with ScriptedChatServer(lambda payload: {"content": "done."}) as srv:
        cfg = _paid_config(fake_model_config, srv.base_url, repeats=2)
        with pytest.raises(BudgetReached, match=r"execution\.budget\.usd = 0\.000001 reached"):
            _execute(cfg, tmp_path / "ckpt", _gate(cfg, tmp_path / "budget.jsonl", 1e-6))
    assert srv.requests == [] and not (tmp_path / "ckpt" / "1-of-1.jsonl").exists()


# ------------------------------------------------------------------------ through Snakemake


def _snakemake(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Snakemake on the .test workflow in ``work`` with the budget file's overrides."""
    # targets first: --configfile takes every word after it
    return snakemake(*args, "--cores", "2", "--directory", ".test",
                     "--configfile", ".test/config.yaml", ".test/budget.yaml", cwd=work)  # fmt: skip


@pytest.mark.slow  # six Snakemake runs, ~2 min on 2 cores
def test_snakemake_stops_at_the_budget_and_a_raised_one_resumes(pipeline_copy: Path) -> None:
    """The .test stack (scripted model with a price) on one task x 4 repeats, run to the
    gathered runs: stopped after 1 run, then after 3, then finished; no run twice. Then judged
    under the same ledger: stopped after a judgement or two, then finished; none twice."""
    shutil.copytree(REPO / ".test", pipeline_copy / ".test", symlinks=True,
                    ignore=shutil.ignore_patterns("results", "logs", ".snakemake"))  # fmt: skip
    work = pipeline_copy / ".test"
    overrides: dict[str, Any] = {"tasks": {"sample_size": 1, "strata": []}, "repeats": 4}

    def with_budget(usd: float | None) -> None:
        budget = {"execution": {"budget": {"usd": usd}}}
        (work / "budget.yaml").write_text(yaml.safe_dump({**overrides, **budget}))

    with_budget(None)
    proc = _snakemake(pipeline_copy, "results/tasks.parquet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    raw = merge_configs(merge_configs(
        yaml.safe_load((REPO / "config" / "config.yaml").read_text()),
        yaml.safe_load((work / "config.yaml").read_text())), overrides)  # fmt: skip
    cfg = parse_config(raw, base_dir=work)
    stack = cfg.stacks()[0]
    tasks = tasks_from_frame(pl.read_parquet(work / "results" / "tasks.parquet"))
    price = cfg.models[stack.model].price
    bound = run_bounds(cfg, stack, tasks, price, work)[tasks[0].task_id].usd
    assert bound is not None and price is not None
    ckpt_dir = work / "results" / "checkpoints" / stack.path
    runs_file = work / "results" / "runs" / f"{stack.path}.parquet"
    shard = work / "results" / "shards" / stack.path / "1-of-1.parquet"

    # room for one run only: its spend tells what a run costs here
    with_budget(bound * 1.000001)
    proc = _snakemake(pipeline_copy, str(runs_file.relative_to(work)))
    assert proc.returncode != 0
    assert "budget execution.budget.usd = " in proc.stderr and "Traceback" not in proc.stderr
    (first,) = Checkpoint(ckpt_dir / "1-of-1.jsonl").load().values()
    per_run = run_cost(first, price).usd
    assert per_run is not None and 0 < per_run < bound
    assert not shard.exists() and not runs_file.exists()
    log = (work / "logs" / "execute_stack" / stack.path / "1-of-1.log").read_text()
    assert "reached: " in log and "uncaught exception" not in log

    # about half: runs 2 and 3 fit, run 4 does not
    with_budget(bound + 2.5 * per_run)
    proc = _snakemake(pipeline_copy, str(runs_file.relative_to(work)))
    assert proc.returncode != 0 and "budget execution.budget.usd = " in proc.stderr
    done = Checkpoint(ckpt_dir / "1-of-1.jsonl").load()
    assert sorted(t.repeat for t in done.values()) == [0, 1, 2] and first.run_id in done
    assert not shard.exists()

    with_budget(bound + 10 * per_run)
    proc = _snakemake(pipeline_copy, str(runs_file.relative_to(work)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pl.read_parquet(runs_file)
    assert sorted(runs["repeat"]) == [0, 1, 2, 3] and runs["run_id"].n_unique() == 4
    assert set(done) <= set(runs["run_id"])
    state = Ledger(work / LEDGER).read()
    assert set(state.spent) == set(runs["run_id"]) and state.reserved == {}
    assert state.spent_usd == pytest.approx(4 * per_run)
    # raising the budget is no change of the rule: nothing reruns
    with_budget(bound + 100 * per_run)
    again = _snakemake(pipeline_copy, str(runs_file.relative_to(work)), "-n")
    assert "Nothing to be done" in again.stdout + again.stderr

    # the judge's calls are in the same ledger: room for about one judgement, then for all
    j = cfg.judge
    settings = JudgeSettings(j.model, j.temperature, j.max_tokens, j.attempts, j.seed)
    rubric = (REPO / "config" / "rubric.md").read_text()
    task_rows = {t["task_id"]: t for t in pl.read_parquet(work / "results" / "tasks.parquet")
                 .iter_rows(named=True)}  # fmt: skip
    judge_price = JudgeBudget(None, {j.model: cfg.models[j.model].price})  # type: ignore[arg-type]
    j_bound = max(
        judge_price.bound(j.model, judge_view(r, task_rows[r["task_id"]], rubric)[0], settings).usd
        for r in runs.iter_rows(named=True)
    )
    judged_file = work / "results" / "judged" / f"{stack.path}.parquet"
    judge_ckpt = JudgeCheckpoint(
        work / "results" / "checkpoints" / "judged" / f"{stack.path}.jsonl"
    )
    with_budget(4 * per_run + j_bound * 1.000001)
    proc = _snakemake(pipeline_copy, str(judged_file.relative_to(work)))
    assert proc.returncode != 0
    assert f"judging {stack.path}: budget execution.budget.usd = " in proc.stderr
    assert "the next judgement could cost" in proc.stderr and "Traceback" not in proc.stderr
    assert 1 <= len(judge_ckpt.load()) < 4 and not judged_file.exists()
    with_budget(4 * per_run + 10 * j_bound)
    proc = _snakemake(pipeline_copy, str(judged_file.relative_to(work)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    judged = pl.read_parquet(judged_file)
    assert sorted(judged["run_id"]) == sorted(runs["run_id"]) and not judge_ckpt.path.exists()
    lines = [json.loads(x) for x in (work / LEDGER).read_text().splitlines()]
    spent_judgements = [x["run_id"] for x in lines
                        if x["kind"] == "spent" and x["run_id"].startswith("judge:")]  # fmt: skip
    assert len(spent_judgements) == 4 == len(set(spent_judgements))  # none twice
    state = Ledger(work / LEDGER).read()
    assert state.spent_judgements == 4 and state.reserved == {}
    assert state.spent_usd > 4 * per_run  # the judge's dollars on top of the runs'

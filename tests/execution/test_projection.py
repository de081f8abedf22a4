"""mastif.execution.projection: list scheduling and the grid's projected wall time on hand-computable
cases (fast tier)."""

from __future__ import annotations

import pytest

from mastif.execution.projection import (
    CORES,
    Job,
    JobCosts,
    Node,
    grid_jobs,
    list_schedule,
    project,
)
from tests.support.paths import REPO


def test_list_schedule_one_core_runs_jobs_one_after_another() -> None:
    jobs = [Job("a", "x", 3, demands={CORES: 1}), Job("b", "x", 4, demands={CORES: 1})]
    s = list_schedule(jobs, {CORES: 1})
    assert s.start_s == {"a": 0, "b": 3} and s.makespan_s == 7


def test_list_schedule_two_cores_runs_them_side_by_side() -> None:
    jobs = [Job("a", "x", 3, demands={CORES: 1}), Job("b", "x", 4, demands={CORES: 1})]
    assert list_schedule(jobs, {CORES: 2}).makespan_s == 4


def test_list_schedule_waits_for_dependencies_and_takes_priority_first() -> None:
    # one core: e1, then j1 (priority over e2, and ready after e1), then e2
    jobs = [
        Job("e1", "execute", 2, demands={CORES: 1}),
        Job("e2", "execute", 2, demands={CORES: 1}),
        Job("j1", "judge", 1, demands={CORES: 1}, after=("e1",), priority=1),
    ]
    s = list_schedule(jobs, {CORES: 1})
    assert s.start_s == {"e1": 0, "j1": 2, "e2": 3} and s.makespan_s == 5


def test_list_schedule_a_job_that_does_not_fit_does_not_block_smaller_ones() -> None:
    # lock 2: "big" needs all of it while "a" holds one unit; "small" fits beside "a"
    jobs = [
        Job("a", "x", 4, demands={"lock": 1}),
        Job("big", "x", 1, demands={"lock": 2}),
        Job("small", "x", 1, demands={"lock": 1}),
    ]
    s = list_schedule(jobs, {"lock": 2})
    assert s.start_s == {"a": 0, "small": 0, "big": 4} and s.makespan_s == 5


def test_list_schedule_unlimited_resource_and_bad_input() -> None:
    jobs = [Job(f"j{i}", "x", 1, demands={"slots": 5}) for i in range(3)]
    assert list_schedule(jobs, {}).makespan_s == 1  # no capacity given: unlimited
    with pytest.raises(ValueError, match="needs 5 slots"):
        list_schedule(jobs, {"slots": 4})
    with pytest.raises(ValueError, match="unknown job"):
        list_schedule([Job("a", "x", 1, after=("nope",))], {})
    with pytest.raises(ValueError, match="unique"):
        list_schedule([Job("a", "x", 1), Job("a", "x", 1)], {})


COSTS = JobCosts(calls_per_run=2, cpu_per_call_s=0.0, startup_s=1.0, judge_calls_per_run=1,
                 judge_startup_s=1.0, tag_s_per_run=0.5, tag_startup_s=2.0, tail_s=10.0)  # fmt: skip


def test_grid_job_durations() -> None:
    # 10 runs, 4 in flight: 3 waves x 2 calls x 5 s = 30 s + 1 s start-up; the judge 2 at
    # a time: 5 waves x 1 call x 5 s + 1 = 26 s; tagging 2 + 10 x 0.5 = 7 s
    node = Node(capacities={CORES: 4}, call_latency_s=5.0, concurrency=4, judge_concurrency=2)
    jobs = {j.name: j for j in grid_jobs(1, 10, COSTS, node)}
    assert jobs["execute/0"].duration_s == 31
    assert jobs["judge/0"].duration_s == 26 and jobs["judge/0"].after == ("execute/0",)
    assert jobs["tag/0"].duration_s == 7


def test_harness_cpu_bounds_a_job_to_one_core() -> None:
    # 100 runs x 10 calls x 0.1 s CPU = 100 s of serial harness CPU; waves would take
    # 1 wave x 10 x (1 + 0.1) = 11 s: the CPU wins
    costs = JobCosts(calls_per_run=10, cpu_per_call_s=0.1, startup_s=0.0)
    node = Node(capacities={CORES: 8}, call_latency_s=1.0, concurrency=100)
    (execute,) = [j for j in grid_jobs(1, 100, costs, node) if j.kind == "execute"]
    assert execute.duration_s == pytest.approx(100) and execute.cpu_s == pytest.approx(100)


def test_project_two_stacks_with_and_without_overlap() -> None:
    costs = JobCosts(calls_per_run=1, cpu_per_call_s=0.0, startup_s=1.0, judge_calls_per_run=1,
                     judge_startup_s=0.0, tag_s_per_run=0.0, tag_startup_s=0.0, tail_s=5.0)  # fmt: skip
    # 4 runs, 2 in flight, 5 s per call: execute 1 + 2 x 5 = 11 s; judge 1 at a time 4 x 5 =
    # 20 s; tag 0 s. One core each, two cores.
    over = Node(capacities={CORES: 2}, call_latency_s=5.0, concurrency=2, judge_concurrency=1)
    p = project(2, 4, costs, over)
    # both executes 0-11; judges and tags from 11: judges 11-31 side by side -> 31 + 5 tail
    assert p.makespan_s == 31 and p.wall_s == 36 and p.runs == 8
    # one core: e0 0-11, then (priority) j0 11-31 and t0 31-31, e1 31-42, j1 42-62
    one = Node(capacities={CORES: 1}, call_latency_s=5.0, concurrency=2, judge_concurrency=1)
    p1 = project(2, 4, costs, one)
    assert p1.schedule.start_s["execute/1"] == 31 and p1.makespan_s == 62
    # without overlap: both executes first (0-11, 11-22), then judges 22-42, 42-62
    apart = Node(capacities={CORES: 1}, call_latency_s=5.0, concurrency=2, judge_concurrency=1,
                 overlap=False)  # fmt: skip
    p2 = project(2, 4, costs, apart)
    assert p2.schedule.start_s["judge/0"] == 22 and p2.makespan_s == 62


def test_cpu_bound_projection_uses_the_cpu_time() -> None:
    # 2 stacks, each 1 run x 1 call of 10 s CPU on 1 core, no wait: every job 10 s; jobs
    # declare no cores, so the schedule runs both at once (10 s) but the CPU needs 20 s
    costs = JobCosts(calls_per_run=1, cpu_per_call_s=10.0, startup_s=0.0, judge_calls_per_run=0)
    node = Node(capacities={CORES: 1}, call_latency_s=0.0, concurrency=1,
                demands={"execute": {}, "judge": {}, "tag": {}})  # fmt: skip
    p = project(2, 1, costs, node)
    assert p.makespan_s == 10 and p.cpu_bound and p.wall_s == 20


def test_paper_shape_at_16_cores() -> None:
    # 36 stacks x 300 runs, 10 calls of 5 s, 8 in flight, judging 8 at a time, one core per
    # job, 16 cores: execute jobs of 38 waves x 50 s = 1,900 s in rounds of 16, 16, 4; each
    # round's judges (38 waves x 5 s = 190 s) take the cores first (priority)
    costs = JobCosts(calls_per_run=10, cpu_per_call_s=0.0, startup_s=0.0)
    node = Node(capacities={CORES: 16}, call_latency_s=5.0, concurrency=8, judge_concurrency=8)
    p = project(36, 300, costs, node)
    assert p.runs == 10_800
    execute, judge = 38 * 10 * 5, 38 * 5
    assert p.schedule.start_s["execute/16"] == execute + judge
    assert p.schedule.start_s["execute/35"] == 2 * (execute + judge)
    assert p.makespan_s == pytest.approx(3 * (execute + judge))


def test_mastif_estimate_prints_the_projected_wall_time(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:

    from mastif.cli import main

    monkeypatch.chdir(REPO)
    argv = ["estimate", "config/experiments/paper.yaml", "--node-cores", "16",
            "--call-latency", "5", "--calls-per-run", "10"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PROJECTED wall time" in out
    assert "10 calls per run: 10,800 runs -> " in out and "16 cores" in out
    # the paper's grid (32 runs in flight per job, the measured per-job costs) within 1 h
    projected_s = int(
        out.split("10,800 runs -> ")[1].split("(")[1].split(" s)")[0].replace(",", "")
    )
    assert 0 < projected_s <= 3600
    # without --node-cores: the estimate alone
    assert main(argv[:2]) == 0
    assert "PROJECTED" not in capsys.readouterr().out

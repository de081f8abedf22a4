"""Projected wall time of a grid on a node: Snakemake's jobs placed by list scheduling.

A **projection**, not a measurement: from a few per-job quantities measured on a small grid
(bench/grid.py measures them) and a description of the node, how long the pipeline of a grid
of stacks would take. It answers "how long would the paper's 10,800 runs take on a 16-core
node at 5 s per call?" and shows which term sets the wall time.

The model
---------

Every stack has three jobs, as in the workflow (``workflow/rules/``):

* ``execute_stack`` — ``runs`` runs, ``concurrency`` of them in flight (``execution.concurrency``,
  or the model's ``max_connections``), each run ``calls_per_run`` model calls one after the
  other, each call ``call_latency_s`` at the endpoint plus ``cpu_per_call_s`` of harness CPU
  (framework, protocol, gateway, tools: mastif's own Python). Its duration is::

      startup_s + max(ceil(runs / concurrency) * calls_per_run * (call_latency_s + cpu_per_call_s),
                      runs * calls_per_run * cpu_per_call_s)

  the first term: the runs go in waves of ``concurrency`` (every run as long as the mean
  run); the second: the job's harness is one Python process, so its CPU is serial (the
  GIL) — a job cannot go faster than one core executes its harness.
* ``judge_runs`` — after its stack's ``execute_stack``; the same formula with
  ``judge_calls_per_run``, ``judge_latency_s``, ``judge_cpu_per_call_s`` and
  ``judge_concurrency`` (the judge model's ``max_connections``; 1 for the serial judge of
  mastif before issue 23).
* ``tag_values`` — after its stack's ``execute_stack``: ``tag_startup_s + runs *
  tag_s_per_run`` (CPU-bound: embedding the run's sentences).

and one ``tail_s`` after the last of them (gather, metrics, statistics, plots, tables,
viewer: measured as one block, it does not grow with the node).

Each job holds resources while it runs (``demands``: Snakemake's ``threads`` as the resource
``_cores`` and the profile's resources, e.g. ``llm_calls`` or ``timing_lock``); the node has
capacities (``capacities``; ``_cores`` is ``--cores``). A job may start when its stack's
``execute_stack`` is done and its demands fit beside the running jobs.

List scheduling (Graham's): the jobs stand in one list by priority — with ``overlap`` a
stack's judge and tagging jobs come before every execute job not yet started (a stack's
results are processed as soon as they exist, while other stacks execute); without it no
judge or tagging job starts before every execute job has finished (Snakemake's order before
issue 23). Whenever a job ends (and at time 0) the list is scanned from the top and every
ready job whose demands fit is started; a job that does not fit does not hold back the ones
below it.

Assumptions (each a simplification that errs as noted):

* every run of a stack costs the mean run (same calls, same latency); a wave lasts one mean
  run (optimistic for long-tailed latencies, where a wave would wait for its slowest run;
  pessimistic in that the runner refills a freed slot at once, so real waves overlap and a
  partial last wave costs less); bench/grid.py prints the model's error on the grid it
  measured;
* 429s, retries and back-off are not modelled apart: they are in the measured latency (the
  bench) or must be budgeted into ``call_latency_s``;
* jobs do not slow each other: the CPU the jobs need is checked, not simulated — if their
  CPU seconds exceed ``cores x makespan`` the projection reports the CPU-bound wall time
  ``cpu_s / cores + tail_s`` instead (``cpu_bound``);
* job start-up (imports, building the stack) is CPU on one core and counted in ``cpu_s``;
* the endpoint serves every request in flight without queueing (a remote API within its
  rate limit): ``call_latency_s`` is the same at 1 and at 500 requests in flight;
* no job fails or is retried; ``tail_s`` is fixed.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: the resource name of Snakemake's ``threads`` / ``--cores``
CORES = "_cores"


@dataclass(frozen=True)
class Job:
    """One job: how long it takes, how much CPU it uses, what it holds, what it waits for."""

    name: str
    kind: str
    duration_s: float
    cpu_s: float = 0.0
    demands: Mapping[str, int] = field(default_factory=dict)
    after: tuple[str, ...] = ()
    #: larger first (list order among the ready jobs)
    priority: int = 0


@dataclass(frozen=True)
class Schedule:
    makespan_s: float
    start_s: Mapping[str, float]
    end_s: Mapping[str, float]


def list_schedule(jobs: Sequence[Job], capacities: Mapping[str, int]) -> Schedule:
    """Graham's list scheduling with resources and precedence (see the module docstring).

    Ready jobs are taken by ``priority`` (larger first), then in the order given. A
    resource not in ``capacities`` is unlimited. A job whose demand exceeds a capacity
    on its own raises ValueError (Snakemake would scale it down or refuse it).
    """
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError("job names must be unique")
    known = set(names)
    for j in jobs:
        for d in j.after:
            if d not in known:
                raise ValueError(f"{j.name} waits for unknown job {d}")
        for r, n in j.demands.items():
            if r in capacities and n > capacities[r]:
                raise ValueError(f"{j.name} needs {n} {r}, the node has {capacities[r]}")
    order = sorted(range(len(jobs)), key=lambda i: (-jobs[i].priority, i))
    free = dict(capacities)
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    running: list[tuple[float, int]] = []  # (end time, index)
    now = 0.0
    pending = list(order)
    while pending or running:
        started = True
        while started:
            started = False
            for i in list(pending):
                job = jobs[i]
                if any(d not in end or end[d] > now for d in job.after):
                    continue
                if any(r in free and n > free[r] for r, n in job.demands.items()):
                    continue
                for r, n in job.demands.items():
                    if r in free:
                        free[r] -= n
                start[job.name] = now
                end[job.name] = now + job.duration_s
                heapq.heappush(running, (now + job.duration_s, i))
                pending.remove(i)
                started = True
        if not running:
            if pending:  # cannot happen: every dependency is a job that ends
                raise ValueError("jobs wait for each other in a cycle")
            break
        now, i = heapq.heappop(running)
        finished = [i]
        while running and running[0][0] <= now:
            finished.append(heapq.heappop(running)[1])
        for k in finished:
            for r, n in jobs[k].demands.items():
                if r in free:
                    free[r] += n
    return Schedule(max(end.values(), default=0.0), start, end)


@dataclass(frozen=True)
class JobCosts:
    """Per-job quantities, measured (bench/grid.py) or assumed."""

    calls_per_run: float
    #: harness CPU per agent model call (framework, protocol, gateway, tools), seconds
    cpu_per_call_s: float
    #: a job's start-up before its first run (imports, building the stack), seconds
    startup_s: float
    judge_calls_per_run: float = 1.0
    judge_cpu_per_call_s: float = 0.0
    judge_startup_s: float = 0.0
    #: tagging a run's sentences (values), seconds
    tag_s_per_run: float = 0.0
    #: loading the embedding model once per tagging job, seconds
    tag_startup_s: float = 0.0
    #: everything after the last judge and tagging job (gather, metrics, stats, plots, ...)
    tail_s: float = 0.0


@dataclass(frozen=True)
class Node:
    """The machine and the endpoints."""

    capacities: Mapping[str, int]
    call_latency_s: float
    #: runs in flight per execute job
    concurrency: int
    judge_concurrency: int = 1
    #: None: as ``call_latency_s``
    judge_latency_s: float | None = None
    #: resources each kind of job holds (execute, judge, tag); ``_cores`` is its threads
    demands: Mapping[str, Mapping[str, int]] = field(
        default_factory=lambda: {"execute": {CORES: 1}, "judge": {CORES: 1}, "tag": {CORES: 1}}
    )
    overlap: bool = True


@dataclass(frozen=True)
class Projection:
    wall_s: float
    makespan_s: float
    cpu_s: float
    cpu_bound: bool
    runs: int
    #: summed duration per kind of job
    job_s: Mapping[str, float]
    schedule: Schedule

    @property
    def wall_h(self) -> float:
        return self.wall_s / 3600


def _job_time(runs: int, calls: float, latency: float, cpu: float, concurrency: int) -> float:
    waves = math.ceil(runs / max(1, concurrency))
    return max(waves * calls * (latency + cpu), runs * calls * cpu)


def grid_jobs(stacks: int, runs_per_stack: int, costs: JobCosts, node: Node) -> list[Job]:
    """The jobs of ``stacks`` stacks of ``runs_per_stack`` runs each (module docstring)."""
    judge_latency = node.call_latency_s if node.judge_latency_s is None else node.judge_latency_s
    jobs: list[Job] = []
    barrier = tuple(f"execute/{s}" for s in range(stacks)) if not node.overlap else ()
    for s in range(stacks):
        run = _job_time(runs_per_stack, costs.calls_per_run, node.call_latency_s,
                        costs.cpu_per_call_s, node.concurrency)  # fmt: skip
        jobs.append(Job(
            f"execute/{s}", "execute", costs.startup_s + run,
            cpu_s=costs.startup_s + runs_per_stack * costs.calls_per_run * costs.cpu_per_call_s,
            demands=dict(node.demands.get("execute", {})), priority=0,
        ))  # fmt: skip
    for s in range(stacks):
        after = (f"execute/{s}", *barrier)
        judge = _job_time(runs_per_stack, costs.judge_calls_per_run, judge_latency,
                          costs.judge_cpu_per_call_s, node.judge_concurrency)  # fmt: skip
        jobs.append(Job(
            f"judge/{s}", "judge", costs.judge_startup_s + judge,
            cpu_s=costs.judge_startup_s
            + runs_per_stack * costs.judge_calls_per_run * costs.judge_cpu_per_call_s,
            demands=dict(node.demands.get("judge", {})), after=after, priority=1,
        ))  # fmt: skip
        tag = costs.tag_startup_s + runs_per_stack * costs.tag_s_per_run
        jobs.append(Job(f"tag/{s}", "tag", tag, cpu_s=tag,
                        demands=dict(node.demands.get("tag", {})), after=after, priority=1))  # fmt: skip
    return jobs


def project(stacks: int, runs_per_stack: int, costs: JobCosts, node: Node) -> Projection:
    """The projected wall time of the grid on the node (module docstring)."""
    jobs = grid_jobs(stacks, runs_per_stack, costs, node)
    schedule = list_schedule(jobs, node.capacities)
    cpu = sum(j.cpu_s for j in jobs)
    cores = node.capacities.get(CORES)
    cpu_bound = bool(cores) and cpu > cores * schedule.makespan_s
    makespan = schedule.makespan_s
    wall = (cpu / cores if cpu_bound and cores else makespan) + costs.tail_s
    job_s: dict[str, float] = {}
    for j in jobs:
        job_s[j.kind] = job_s.get(j.kind, 0.0) + j.duration_s
    return Projection(wall, makespan, cpu, cpu_bound, stacks * runs_per_stack, job_s, schedule)


def format_duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def format_projection(p: Projection, costs: JobCosts, node: Node, label: str = "") -> str:
    """A few lines: the wall time and what it assumed."""
    cores = node.capacities.get(CORES, "unlimited")
    others = {k: v for k, v in node.capacities.items() if k != CORES}
    lines = [
        f"{label or 'projection'}: {p.runs:,} runs -> {format_duration(p.wall_s)} "
        f"({p.wall_s:,.0f} s{', CPU-bound' if p.cpu_bound else ''})",
        f"  node: {cores} cores{', ' + str(others) if others else ''}; "
        f"{node.call_latency_s:g} s per call; {node.concurrency} runs in flight per stack job, "
        f"judge {node.judge_concurrency} at a time; "
        + ("judging and tagging overlap execution" if node.overlap
           else "judging and tagging after all execution"),
        f"  per run: {costs.calls_per_run:g} agent calls ({costs.cpu_per_call_s * 1000:.0f} ms "
        f"harness CPU each), {costs.judge_calls_per_run:g} judge calls, tagging "
        f"{costs.tag_s_per_run:.2f} s; per job: start-up {costs.startup_s:.1f} s, tagging "
        f"start-up {costs.tag_startup_s:.1f} s; tail {costs.tail_s:.0f} s",
        "  job time: " + ", ".join(f"{k} {format_duration(v)}" for k, v in p.job_s.items())
        + f"; CPU {p.cpu_s:,.0f} s ({p.cpu_s / (node.capacities.get(CORES, 1) * p.makespan_s):.0%} "
        "of the cores over the makespan)",
    ]  # fmt: skip
    return "\n".join(lines)

"""The text ``mastif estimate`` prints: the estimate's table and the projected wall time.

:func:`format_estimate` writes an :class:`~mastif.execution.estimate.ExperimentEstimate` as a
Markdown table under a header saying what it assumes; :func:`format_wall_projection` adds,
with ``--node-cores``, the experiment's wall time on a node of that size
(:mod:`mastif.execution.projection`) at the estimate's calls per run.
"""

from __future__ import annotations

import argparse

from mastif.core.config import ExperimentConfig
from mastif.execution.estimate import ExperimentEstimate, Range
from mastif.execution.projection import CORES, JobCosts, Node, format_projection, project


def _count(x: float) -> str:
    x = round(x)
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:,.1f}{unit}"
    return f"{x:,}"


def _range(r: Range, fmt: str = "count") -> str:
    if fmt == "usd":
        return f"{r.low:,.2f}–{r.high:,.2f}"
    if fmt == "int":
        return f"{round(r.low):,}–{round(r.high):,}"
    return f"{_count(r.low)}–{_count(r.high)}"


def format_estimate(est: ExperimentEstimate, source: str = "") -> str:
    """The estimate as a Markdown table with a header saying what it assumes."""
    t = est.typical_task
    head = [
        f"{source or est.experiment}: {len(est.stacks)} stack(s), {est.runs:,} runs, each judged "
        + ("once" if est.judgements_per_run == 1 else f"{est.judgements_per_run} times"),
        f"ESTIMATE, not a measurement: tokens = characters / {est.chars_per_token:g}.",
        "  low:  fewest calls (a loop stops in round 1, no tool calls, 1-token replies)",
        "  high: most calls (max_steps rounds, all max_tool_rounds, max_tokens replies)",
        f"typical task: {t.task_id} ({len(t.confirmed_task)} characters, "
        f"{len(t.reference_steps)} reference steps), {est.task_note}",
        f"tool list: {est.tool_list_tokens:,} tokens on every call that offers tools; "
        f"longest agent prompt: {est.largest_prompt_tokens:,} tokens",
        "US$ from each model's price in the config (unknown without one)",
        "",
        "| | stacks | runs | calls/run | prompt tokens | completion tokens | US$ |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for line in (*est.models, est.judge, est.total):
        usd = _range(line.usd, "usd") if line.usd is not None else "unknown (no price)"
        rows.append(
            f"| {line.label} | {line.stacks} | {line.runs:,} | {_range(line.calls_per_run, 'int')} "
            f"| {_range(line.prompt_tokens)} | {_range(line.completion_tokens)} | {usd} |"
        )
    return "\n".join(head + rows)


def format_wall_projection(
    cfg: ExperimentConfig, est: ExperimentEstimate, args: argparse.Namespace
) -> str:
    """The projected wall time of the experiment on ``--node-cores`` cores (mastif.execution.projection):
    at the estimate's low and high calls per run, or at ``--calls-per-run``."""
    n_stacks = len(est.stacks)
    runs_per_stack = est.runs // n_stacks if n_stacks else 0
    concurrency = args.concurrency or min(cfg.concurrency_for(m) for m in cfg.agent_models)
    judge = cfg.models[cfg.judge.panel[0]]
    judge_concurrency = args.judge_concurrency or judge.options.max_connections
    model_jobs = args.model_jobs or args.node_cores
    node = Node(
        capacities={CORES: args.node_cores, "model_jobs": model_jobs},
        call_latency_s=args.call_latency,
        concurrency=concurrency,
        judge_concurrency=judge_concurrency,
        demands={"execute": {CORES: 1, "model_jobs": 1}, "judge": {CORES: 1, "model_jobs": 1},
                 "tag": {CORES: 1}},
    )  # fmt: skip
    agent_calls = [s.agent.calls for s in est.stacks]
    judge_calls = [s.judge.calls for s in est.stacks]

    def per_run(ranges: list[Range], end: str) -> float:
        """The stacks' mean of a per-run range's end (every stack has as many runs)."""
        return sum(getattr(r, end) for r in ranges) / max(1, len(ranges))

    if args.calls_per_run is not None:
        scenarios = [(f"{args.calls_per_run:g} calls per run", args.calls_per_run,
                      per_run(judge_calls, "low"))]  # fmt: skip
    else:
        scenarios = [(f"{end} calls", per_run(agent_calls, end), per_run(judge_calls, end))
                     for end in ("low", "high")]  # fmt: skip
    lines = [
        "PROJECTED wall time, not a measurement (mastif.execution.projection: list scheduling of the "
        "stacks' execute, judge and tagging jobs; one core and one model job each; judging "
        "and tagging overlap execution; per-job costs measured by bench/grid.py unless given)"
    ]
    for label, calls, jcalls in scenarios:
        costs = JobCosts(
            calls_per_run=calls, cpu_per_call_s=args.harness_cpu_per_call,
            startup_s=args.job_startup, judge_calls_per_run=jcalls,
            judge_startup_s=args.job_startup, tag_s_per_run=args.tag_per_run,
            tag_startup_s=args.tag_startup, tail_s=args.tail,
        )  # fmt: skip
        p = project(n_stacks, runs_per_stack, costs, node)
        lines.append(format_projection(p, costs, node, label))
    return "\n".join(lines)

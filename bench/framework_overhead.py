"""What each framework adds by itself: from one real run of the pipeline, or (``--stub``)
from every framework run against a constant-latency scripted endpoint.

Reads results/runs/**.parquet (all stacks of one experiment) and prints, per framework,
LLM calls per run, prompt tokens per call, completion tokens per run and wall seconds per
run, with ratios against LangGraph (the leanest mapping of the workflow: one model call
per node plus one per tool round). Same tasks, same model, same prompts: the differences
are what the framework adds (its own system prompts, extra calls, retries).

    .venv/bin/python bench/framework_overhead.py [results]

``--stub`` runs each framework in a fresh process (``--protocol``, standard by default; the HTTP tools, the
same sandbox tasks, ``max_steps`` 2, ``max_tool_rounds`` 1) against the scripted model with
``latency_s`` (default 0.2 s): the model answers the same whatever the framework asks, so
the differences are the framework's own. It prints, per framework: model calls per run,
prompt tokens per call (the scripted endpoint's count: characters / 4 of messages and tool
list) and their ratio to LangGraph, and CPU milliseconds per model call of the stack job's
processes (user + system: the job's own and, since each framework runs in its own
environment, its worker's -- framework, gateway, tools, sandbox and protocol threads; the
scripted server's share is the same per call for all). The per-call figure is the
difference of a job on ``--tasks`` tasks and one on a single task, over the difference of
their model calls, so what a job pays once (the worker's start: interpreter, imports,
servers) is apart: ``job_start_cpu_s`` and ``job_start_wall_s`` (the single-task job's
CPU and wall time beyond its calls' share). A first job on one task warms the disk cache.
``--in-env`` runs each framework from its own environment's python, where the work runs in
process: against the default run (the work in the framework's worker process) that is what
the process boundary costs, at the same versions. ``--save F`` writes the table as JSON;
``--compare F`` prints a saved table beside this one (before/after).

    .venv/bin/python bench/framework_overhead.py --stub [--tasks 3] [--latency 0.2]
        [--frameworks langgraph,crewai] [--save before.json] [--compare before.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl
import yaml
from _paths import REPO


def overhead(results: Path) -> pl.DataFrame:
    runs = pl.concat([pl.read_parquet(p) for p in sorted((results / "runs").rglob("*.parquet"))])
    per_call = runs.select("framework", "llm_calls").explode("llm_calls").unnest("llm_calls")
    calls = per_call.group_by("framework").agg(
        pl.col("prompt_tokens").mean().alias("prompt_tokens_per_call"),
    )
    per_run = runs.group_by("framework").agg(
        pl.len().alias("runs"),
        pl.col("n_llm_calls").mean().alias("llm_calls_per_run"),
        pl.col("prompt_tokens").mean().alias("prompt_tokens_per_run"),
        pl.col("completion_tokens").mean().alias("completion_tokens_per_run"),
        pl.col("wall_seconds").mean().alias("wall_seconds_per_run"),
        pl.col("tool_calls").list.len().mean().alias("tool_calls_per_run"),
        (pl.col("status") != "ok").sum().alias("failed_runs"),
    )
    table = per_run.join(calls, on="framework").sort("framework")
    base = table.filter(pl.col("framework") == "langgraph")
    if base.height:
        for col in ("llm_calls_per_run", "prompt_tokens_per_call", "prompt_tokens_per_run",
                    "wall_seconds_per_run"):  # fmt: skip
            table = table.with_columns(
                (pl.col(col) / base[col][0]).round(2).alias(f"{col}_vs_langgraph")
            )
    return table


def print_by_framework(table: pl.DataFrame) -> None:
    # one column per framework reads better than 13 columns per row
    view = (
        table.drop("framework")
        .cast(pl.Float64)
        .transpose(include_header=True, header_name="measure", column_names=table["framework"])
    )
    with pl.Config(tbl_rows=40, tbl_cols=10, float_precision=2, tbl_hide_dataframe_shape=True):
        print(view)


# ------------------------------------------------------------------ --stub: a scripted model

#: the same answers whatever a framework asks: observe never stops the loop, interact calls
#: one tool then summarises, so every framework does max_steps rounds
STUB_RULES = [
    {"when": {"node": "navigate"}, "reply": {"content": "I will search the site first."}},
    {"when": {"node": "observe"}, "reply": {"content": "Nothing found yet.\nCONTINUE"}},
    {
        "when": {"node": "interact", "tool_result": False},
        "reply": {"tool_calls": [{"name": "web_search", "arguments": {"query": "opening hours"}}]},
    },
    {"when": {"node": "interact"}, "reply": {"content": "The search listed some pages."}},
    {"when": {"node": "report"}, "reply": {"content": "I could not find the answer."}},
]


def stub_config(
    framework: str, script: Path, n_tasks: int, protocol: str = "standard"
) -> dict[str, Any]:
    with (REPO / "config" / "config.yaml").open() as fh:
        cfg = yaml.safe_load(fh)
    cfg["models"]["stub"] = {"provider": "scripted", "model": str(script)}
    cfg["agent_models"] = ["stub"]
    cfg["judge"]["model"] = "stub"
    cfg["protocols"], cfg["frameworks"] = [protocol], [framework]
    cfg["tools"] = ["web_search", "wikipedia"]  # HTTP only: no browser start-up in the figures
    cfg["tasks"] = {"source": "sandbox", "sample_size": n_tasks}
    cfg["generation"].update({"max_steps": 2, "max_tool_rounds": 1, "timeout_s": 300})
    cfg["execution"] = {"concurrency": 1}
    return cfg


def run_one(
    framework: str, n_tasks: int, latency: float, workdir: Path, protocol: str = "standard"
) -> dict[str, Any]:
    """In this (fresh) process: one framework's stack on ``n_tasks`` sandbox tasks."""
    from mastif.execution.experiment import parse_config
    from mastif.tasks import load_tasks

    script = workdir / "stub.yaml"
    script.write_text(yaml.safe_dump({"latency_s": latency, "rules": STUB_RULES}))
    config = parse_config(stub_config(framework, script, n_tasks, protocol))
    tasks = sorted(load_tasks("sandbox"), key=lambda t: t.task_id)[:n_tasks]
    # a first job on one task warms the disk cache (and, in one process, loads the modules)
    job(config, tasks[:1], workdir / "warm")
    one, one_cpu, one_wall = job(config, tasks[:1], workdir / "one")
    traces, cpu, wall = job(config, tasks, workdir / "all")
    calls = [c for t in traces for c in t.llm_calls]
    n_one = sum(len(t.llm_calls) for t in one)
    per_call = (cpu - one_cpu) / (len(calls) - n_one)
    per_call_wall = (wall - one_wall) / (len(calls) - n_one)
    return {
        "framework": framework,
        "runs": len(traces),
        "failed_runs": sum(t.status != "ok" for t in traces + one),
        "llm_calls_per_run": len(calls) / len(traces),
        "prompt_tokens_per_call": statistics.fmean(c.prompt_tokens or 0 for c in calls),
        "harness_cpu_ms_per_call": 1000 * per_call,
        "job_start_cpu_s": one_cpu - per_call * n_one,
        "job_start_wall_s": one_wall - per_call_wall * n_one,
        "wall_s_per_run": wall / len(traces),
    }


def job(config: Any, tasks: list[Any], workdir: Path) -> tuple[list[Any], float, float]:
    """One stack job on ``tasks``: its traces, the CPU seconds of this process and of the
    children it waited for (the framework's worker), and its wall seconds."""
    from mastif.execution.runner import execute_stack

    workdir.mkdir(parents=True)
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    traces = execute_stack(
        config, config.stacks()[0], tasks, workdir / "ckpt.jsonl", workdir / "server.log", REPO
    )
    return traces, cpu_seconds() - cpu0, time.perf_counter() - wall0


def cpu_seconds() -> float:
    """User + system CPU of this process and of its waited-for children (and theirs)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def stub_table(
    frameworks: list[str],
    n_tasks: int,
    latency: float,
    protocol: str = "standard",
    in_env: bool = False,
) -> pl.DataFrame:
    """``in_env``: each framework measured from its own environment's python, where the
    stack's work runs in process (no worker): against the default (from the harness, the
    work in the framework's worker) this is the process boundary's cost."""
    from mastif.execution.frameworkenv import framework_env

    rows = []
    for framework in frameworks:
        python = str(framework_env(framework).python) if in_env else sys.executable
        with tempfile.TemporaryDirectory(prefix="mastif-fw-bench-") as tmp:
            done = subprocess.run(
                [python, __file__, "--stub-one", framework, "--tasks", str(n_tasks),
                 "--latency", str(latency), "--workdir", tmp, "--protocol", protocol],
                capture_output=True, text=True, check=False, cwd=REPO,
            )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"{framework}: the run failed:\n{done.stderr[-2000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    table = pl.DataFrame(rows)
    base = table.filter(pl.col("framework") == "langgraph")
    if base.height:
        for col in ("llm_calls_per_run", "prompt_tokens_per_call", "harness_cpu_ms_per_call"):
            table = table.with_columns((pl.col(col) / base[col][0]).alias(f"{col}_vs_langgraph"))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default="results")
    parser.add_argument("--stub", action="store_true")
    parser.add_argument("--stub-one", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--tasks", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--protocol", default="standard", choices=("standard", "mcp", "a2a"))
    parser.add_argument(
        "--frameworks", default=None, help="comma-separated (default: all built-in)"
    )
    parser.add_argument(
        "--in-env",
        action="store_true",
        help="run each framework in process in its own environment (no worker process)",
    )
    parser.add_argument("--save", type=Path)
    parser.add_argument("--compare", type=Path)
    args = parser.parse_args(argv)
    if args.stub_one:
        result = run_one(args.stub_one, args.tasks, args.latency, Path(args.workdir), args.protocol)
        print(json.dumps(result))
        return 0
    if not args.stub:
        print_by_framework(overhead(Path(args.results)))
        return 0
    from mastif.frameworks import FRAMEWORKS

    names = args.frameworks.split(",") if args.frameworks else list(FRAMEWORKS)
    table = stub_table(names, args.tasks, args.latency, args.protocol, args.in_env)
    print(f"{args.tasks} sandbox tasks per framework, scripted model answering after "
          f"{args.latency:g} s, {args.protocol} protocol, max_steps 2, max_tool_rounds 1")  # fmt: skip
    print_by_framework(table)
    if args.save:
        args.save.write_text(table.write_json())
    if args.compare:
        before = pl.read_json(args.compare)
        print(f"\nbefore ({args.compare}), then after / before:")
        print_by_framework(before)
        joined = table.join(before, on="framework", suffix="_before")
        ratios = joined.select(
            "framework",
            *(
                (pl.col(c) / pl.col(f"{c}_before")).alias(f"{c}_after_vs_before")
                for c in (
                    "llm_calls_per_run",
                    "prompt_tokens_per_call",
                    "harness_cpu_ms_per_call",
                    "job_start_cpu_s",
                    "job_start_wall_s",
                    "wall_s_per_run",
                )  # fmt: skip
            ),
        )
        print_by_framework(ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a finished run's time went: Snakemake's jobs, the runs' own time parts, the local
model servers' prompt evaluation and generation, the judge, value tagging, and what is left
for Snakemake and process start-up.

Reads a project directory after ``make run`` (default: this checkout): the newest Snakemake
log under ``.snakemake/log/`` (job start and finish times, one-second resolution), the jobs'
logs under ``logs/`` (each script's first log line, so a job's start-up before mastif's code
runs; the local servers' own timing lines), and ``results/metrics/runs.parquet`` (the runs'
time parts, docs/data.md).

    .venv/bin/python bench/default_run_time.py [--workdir DIR] [--save out.json]

Server timing lines: llama-server prints per reply ``prompt eval time`` and ``eval time``
(generation); llama-cpp-python's server prints llama.cpp's perf counters, whose prompt part
misses most prompt evaluation, so there only generation and "the rest of the server's time"
(prompt evaluation, grammar sampling, its Python) are told apart.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
from _paths import REPO
from snakemake_log import CORES, log_stamps, parse_log

# llama-server: "slot print_timing: id 0 | task 3 | prompt eval time = 8831.22 ms / 991 tokens"
# llama-cpp-python: "llama_perf_context_print: prompt eval time = 0.14 ms / 116 tokens"
_TIMING = re.compile(
    r"(?P<part>prompt eval|\beval|total) time =\s*(?P<ms>[\d.]+) ms /\s*(?P<n>\d+) (?:tokens|runs)"
)


def snakemake_cores(log: Path) -> int | None:
    """The cores Snakemake was given (``Provided cores: N``)."""
    return parse_log(log)["capacities"].get(CORES)


def snakemake_jobs(log: Path) -> list[dict[str, Any]]:
    """Every finished job of one Snakemake log: rule, start, finish (datetimes), its log files."""
    return parse_log(log)["jobs"]


def script_start(log: Path) -> datetime | None:
    """The first timestamp a job's script wrote to its log (mastif.core.logsetup's format)."""
    return next(iter(log_stamps(log)), None)


def server_timings(logs: list[Path]) -> dict[str, float]:
    """Summed timing lines of local server logs (ms and tokens), by kind of server."""
    sums: dict[str, float] = defaultdict(float)
    for log in logs:
        text = log.read_text(errors="replace")
        kind = "llama-server" if "slot print_timing" in text else "llama-cpp-python"
        sums[f"{kind}.replies"] += text.count("total time =")
        for m in _TIMING.finditer(text):
            part = m.group("part").replace("prompt eval", "prompt")
            sums[f"{kind}.{part}_ms"] += float(m.group("ms"))
            sums[f"{kind}.{part}_n"] += int(m.group("n"))
    return dict(sums)


def loop_and_tool_calls(runs: pl.DataFrame) -> dict[str, Any]:
    """Whether the runs show the workflow's loop (observe -> interact -> observe) and how
    many interact visits (node, step) recorded at least one tool call."""
    loops, visits, with_call = 0, 0, 0
    for row in runs.select("node_outputs", "tool_calls").iter_rows(named=True):
        nodes = [n["node"] for n in row["node_outputs"] or []]
        loops += any(
            nodes[i : i + 3] == ["observe", "interact", "observe"] for i in range(len(nodes))
        )
        steps = {n["step"] for n in row["node_outputs"] or [] if n["node"] == "interact"}
        called = {c["step"] for c in row["tool_calls"] or [] if c["node"] == "interact"}
        visits += len(steps)
        with_call += len(steps & called)
    return {
        "runs": runs.height,
        "runs_with_loop": loops,
        "interact_visits": visits,
        "interact_visits_with_tool_call": with_call,
    }


def breakdown(workdir: Path) -> dict[str, Any]:
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    if not logs:
        raise SystemExit(f"no Snakemake log under {workdir}/.snakemake/log: run `make run` first")
    # the newest log with finished jobs (`snakemake --report` writes a log without any)
    log, jobs = next(((p, j) for p in reversed(logs) if (j := snakemake_jobs(p))), (None, []))
    if log is None:
        raise SystemExit(f"no Snakemake log under {workdir}/.snakemake/log records a finished job")
    wall = (max(j["finish"] for j in jobs) - min(j["start"] for j in jobs)).total_seconds()
    by_rule: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for job in jobs:
        span = (job["finish"] - job["start"]).total_seconds()
        row = by_rule[job["rule"]]
        row["jobs"] += 1
        row["job_s"] += span
        row["core_s"] += span * job["threads"]
        script_log = next((workdir / p for p in job["logs"] if not p.endswith("server.log")), None)
        started = script_start(script_log) if script_log else None
        if started is not None:
            # Snakemake's stamps have one-second resolution: a start-up under 1 s reads as 0
            row["startup_s"] += max((started - job["start"]).total_seconds(), 0.0)
            row["startup_known"] += 1
    out: dict[str, Any] = {
        "snakemake_log": str(log.relative_to(workdir)),
        "wall_s": wall,
        "job_s": sum(r["job_s"] for r in by_rule.values()),
        "core_s": sum(r["core_s"] for r in by_rule.values()),
        "cores": snakemake_cores(log),
        "rules": {k: dict(v) for k, v in sorted(by_rule.items(), key=lambda kv: -kv[1]["job_s"])},
    }
    runs_path = workdir / "results" / "metrics" / "runs.parquet"
    if runs_path.exists():
        runs = pl.read_parquet(runs_path)
        parts = [c for c in runs.columns if c.startswith("wall_") and c.endswith("_s")]
        out["runs"] = {
            "n": runs.height,
            "by_status": dict(runs.group_by("status").len().iter_rows()),
            "CT_s": runs["CT"].sum(),
            **{c: runs[c].sum() for c in parts},
        }
    run_files = sorted((workdir / "results" / "runs").rglob("*.parquet"))
    if run_files:
        out["loop"] = loop_and_tool_calls(
            pl.concat([pl.read_parquet(f) for f in run_files], how="diagonal_relaxed")
        )
    for stage in ("execute_stack", "judge_runs"):
        server_logs = sorted((workdir / "logs" / stage).rglob("*server.log"))
        out[f"{stage}_servers"] = server_timings(server_logs)
    return out


def report(b: dict[str, Any]) -> str:
    lines = [
        f"wall (first job start to last finish): {b['wall_s']:8.0f} s   "
        f"job time: {b['job_s']:8.0f} s, x threads: {b['core_s']:.0f} core-s "
        f"({b['core_s'] / b['wall_s']:.2f} cores busy on average)",
        "",
        f"{'rule':22} {'jobs':>5} {'job s':>8} {'share':>6} {'start-up s':>11}",
    ]
    for rule, r in b["rules"].items():
        startup = f"{r['startup_s']:11.0f}" if r.get("startup_known") else f"{'?':>11}"
        lines.append(
            f"{rule:22} {r['jobs']:5.0f} {r['job_s']:8.0f} {r['job_s'] / b['job_s']:6.1%} {startup}"
        )
    if runs := b.get("runs"):
        lines += [
            "",
            f"runs: {runs['n']} {runs['by_status']}; their CT summed: {runs['CT_s']:.0f} s",
        ]
        for key, value in runs.items():
            if key.startswith("wall_"):
                lines.append(f"  {key:20} {value:8.1f} s  {value / runs['CT_s']:6.1%} of CT")
        execute = b["rules"].get("execute_stack", {}).get("job_s")
        if execute:
            lines.append(
                f"  execute jobs outside their runs (server start, imports, writing): "
                f"{execute - runs['CT_s']:.0f} s"
            )
    if loop := b.get("loop"):
        lines.append(
            f"  runs showing observe -> interact -> observe: {loop['runs_with_loop']} of "
            f"{loop['runs']}; interact visits with a tool call: "
            f"{loop['interact_visits_with_tool_call']} of {loop['interact_visits']}"
        )
    for stage in ("execute_stack", "judge_runs"):
        s = b.get(f"{stage}_servers") or {}
        for kind in ("llama-server", "llama-cpp-python"):
            if not s.get(f"{kind}.replies"):
                continue
            lines.append("")
            lines.append(f"{stage} model server ({kind}), {s[f'{kind}.replies']:.0f} replies:")
            gen_s, gen_n = s.get(f"{kind}.eval_ms", 0) / 1000, s.get(f"{kind}.eval_n", 0)
            total_s = s.get(f"{kind}.total_ms", 0) / 1000
            if kind == "llama-server":
                p_s, p_n = s.get(f"{kind}.prompt_ms", 0) / 1000, s.get(f"{kind}.prompt_n", 0)
                lines.append(
                    f"  prompt evaluation {p_s:8.1f} s for {p_n:.0f} tokens "
                    f"({p_n / p_s if p_s else 0:.0f} tokens/s)"
                )
            else:
                lines.append(
                    f"  prompt evaluation, grammar sampling, server's Python: "
                    f"{total_s - gen_s:8.1f} s"
                )
            lines.append(
                f"  generation        {gen_s:8.1f} s for {gen_n:.0f} tokens "
                f"({gen_n / gen_s if gen_s else 0:.1f} tokens/s)"
            )
            lines.append(f"  server total      {total_s:8.1f} s")
    if b.get("cores"):
        idle = b["cores"] * b["wall_s"] - b["core_s"]
        lines += [
            "",
            f"cores idle (Snakemake's {b['cores']} cores x wall - jobs' threads x time: "
            f"scheduling, waits, the DAG's tail): {idle:.0f} core-s "
            f"({idle / b['cores'] / b['wall_s']:.0%})",
        ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, default=REPO)
    ap.add_argument("--save", type=Path)
    args = ap.parse_args()
    b = breakdown(args.workdir.resolve())
    print(report(b))
    if args.save:
        args.save.write_text(json.dumps(b, indent=2, default=str))


if __name__ == "__main__":
    main()

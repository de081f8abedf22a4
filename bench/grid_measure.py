"""What bench/grid.py measures from a finished grid: Snakemake's log (jobs, rules, resources,
start and end), the process tree's CPU and memory (sampled), the rows of results/runs and
results/judged (every run and judgement exactly once), and the per-job quantities the
projection needs (mastif.execution.projection.JobCosts).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from grid_endpoint import JUDGE
from snakemake_log import log_stamps, parse_log

from mastif.execution.projection import CORES, JobCosts


class TreeSampler(threading.Thread):
    """Every ``period`` s: RSS of the process tree (peak) and each process's CPU, attributed
    to the rule whose script it is or descends from."""

    RULES = ("execute_stack", "judge_runs", "tag_values")

    def __init__(self, pid: int, period: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.stop = threading.Event()
        self.peak_rss = 0
        self.cpu: dict[int, tuple[str, float]] = {}
        self.rule_of: dict[int, str] = {}
        #: pid -> [(unix time, CPU seconds so far)]
        self.series: dict[int, list[tuple[float, float]]] = defaultdict(list)

    def _rule(self, proc: Any) -> str:
        import psutil

        if proc.pid in self.rule_of:
            return self.rule_of[proc.pid]
        try:
            cmd = " ".join(proc.cmdline())
        except psutil.Error:
            cmd = ""
        rule = next((r for r in self.RULES if r in cmd), None)
        if rule is None:
            try:
                parent = proc.parent()
            except psutil.Error:
                parent = None
            rule = self._rule(parent) if parent and parent.pid != self.pid else "other"
        self.rule_of[proc.pid] = rule
        return rule

    def run(self) -> None:
        import psutil

        root = psutil.Process(self.pid)
        while not self.stop.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            rss = 0
            for p in procs:
                try:
                    t = p.cpu_times()
                    rss += p.memory_info().rss
                    self.cpu[p.pid] = (self._rule(p), t.user + t.system)
                    self.series[p.pid].append((time.time(), t.user + t.system))
                except psutil.Error:
                    continue
            self.peak_rss = max(self.peak_rss, rss)
            self.stop.wait(self.period)

    def cpu_by_rule(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for rule, cpu in self.cpu.values():
            out[rule] += cpu
        return dict(out)


def snakemake_log(workdir: Path) -> dict[str, Any]:
    """Jobs (rule, start, finish, threads, resources) and the provided capacities of the
    newest Snakemake log in ``workdir``."""
    log = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))[-1]
    return {"log": str(log), **parse_log(log)}


def check_rows(workdir: Path, expected_stacks: list[str], tasks: int) -> dict[str, Any]:
    """Every run and judgement exactly once: runs per stack file, unique run ids, judged rows
    one per run (per judge and repeat)."""
    import polars as pl

    out: dict[str, Any] = {"expected_runs": len(expected_stacks) * tasks}
    runs_files = {str(p.relative_to(workdir / "results/runs"))[:-8]: p
                  for p in (workdir / "results/runs").rglob("*.parquet")}  # fmt: skip
    judged_files = {str(p.relative_to(workdir / "results/judged"))[:-8]: p
                    for p in (workdir / "results/judged").rglob("*.parquet")}  # fmt: skip
    out["missing_run_files"] = sorted(set(expected_stacks) - set(runs_files))
    out["missing_judged_files"] = sorted(set(expected_stacks) - set(judged_files))
    runs = pl.concat([pl.read_parquet(p) for p in runs_files.values()], how="diagonal_relaxed")
    judged = pl.concat([pl.read_parquet(p) for p in judged_files.values()],
                       how="diagonal_relaxed")  # fmt: skip
    out["runs"] = runs.height
    out["runs_by_status"] = dict(runs.group_by("status").len().iter_rows())
    out["duplicated_runs"] = runs.height - runs["run_id"].n_unique()
    keys = [c for c in ("run_id", "judge_model", "judge_repeat") if c in judged.columns]
    out["judged"] = judged.height
    out["duplicated_judgements"] = judged.height - judged.select(keys).n_unique()
    run_ids, judged_ids = set(runs["run_id"]), set(judged["run_id"])
    out["lost_runs"] = out["expected_runs"] - len(run_ids)
    out["runs_not_judged"] = len(run_ids - judged_ids)
    out["judged_unknown_runs"] = len(judged_ids - run_ids)
    status = next((c for c in ("judge_status", "status") if c in judged.columns), None)
    if status:
        out["judged_by_status"] = dict(judged.group_by(status).len().iter_rows())
    out["calls_per_run"] = float(runs["n_llm_calls"].mean())
    out["calls_by_model"] = {m: float(v) for m, v in
                             runs.group_by("model").agg(pl.col("n_llm_calls").mean()).iter_rows()}  # fmt: skip
    out["tool_calls_per_run"] = float(runs["tool_calls"].list.len().mean())
    out["run_wall_mean_s"] = float(runs["wall_seconds"].mean())
    out["ok"] = (not out["missing_run_files"] and not out["missing_judged_files"]
                 and out["duplicated_runs"] == 0 and out["duplicated_judgements"] == 0
                 and out["lost_runs"] == 0 and out["runs_not_judged"] == 0)  # fmt: skip
    return out


def merge(windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(windows):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def cpu_in(
    series: dict[str, Any], rule: str, windows: dict[int | None, list[tuple[float, float]]]
) -> float:
    """CPU seconds the rule's processes used inside their windows (unix times): each sampled
    increment counted where its interval's midpoint falls. ``windows[pid]``: a job's own
    process's windows (its log names its pid), so a job starting beside another's runs
    does not count there; ``windows[None]``: every window, for processes of no known job."""
    total = 0.0
    for pid, d in series.items():
        if d["rule"] != rule:
            continue
        mine = windows.get(int(pid), windows.get(None, []))
        smp = d["samples"]
        for (t0, c0), (t1, c1) in zip(smp, smp[1:], strict=False):
            mid = (t0 + t1) / 2
            if any(a <= mid <= b for a, b in mine):
                total += c1 - c0
    return total


_PID = re.compile(r"\(pid (\d+)\) logs to")


def log_pid(path: Path | None) -> int | None:
    """The pid a job's script wrote in its log's first line (mastif.core.logsetup)."""
    try:
        with path.open(errors="replace") as fh:  # type: ignore[union-attr]
            m = _PID.search(fh.readline())
    except (OSError, AttributeError):
        return None
    return int(m.group(1)) if m else None


def by_pid(
    pairs: list[tuple[int | None, tuple[float, float]]],
) -> dict[int | None, list[tuple[float, float]]]:
    out: dict[int | None, list[tuple[float, float]]] = defaultdict(list)
    for pid, w in pairs:
        if pid is not None:
            out[pid].append(w)
    out[None] = merge([w for _, w in pairs])
    return dict(out)


_TAG_PROBE = """
import json, sys, time
import polars as pl
from mastif.evaluation import values as v
if hasattr(v, "load_value_embedder"):  # its default backend (ONNX after issue 23)
    load = lambda: v.load_value_embedder(threads=1)
else:  # before: sentence-transformers, imported before the job's load line too
    import torch, sentence_transformers
    torch.set_num_threads(1)
    load = v.load_minilm_embedder
t0 = time.perf_counter()
tagger = v.ValueTagger(v.load_value_corpus(sys.argv[2]), load(), threshold=v.DEFAULT_THRESHOLD)
t1 = time.perf_counter()
runs = pl.read_parquet(sys.argv[1])
v.tag_runs(runs, tagger, [])
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "tag_s": t2 - t1, "runs": runs.height}))
"""


def tag_probe(repo: Path, workdir: Path) -> dict[str, Any] | None:
    """The embedding model's load and one stack's tagging, timed apart in a process of the
    checkout's mastif (one thread, after the grid): tag_values logs neither."""
    files = sorted((workdir / "results/runs").rglob("*.parquet"))
    if not files:
        return None
    corpus = repo / "resources/values/corpus.json"
    env = {**os.environ, "PYTHONPATH": f"{repo / 'src'}:{repo}"}
    proc = subprocess.run([sys.executable, "-c", _TAG_PROBE, str(files[0]), str(corpus)],
                          capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    if proc.returncode != 0:
        print(f"tag probe failed: {proc.stderr[-1500:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_costs(workdir: Path, log: dict[str, Any], raw: dict[str, Any],
                  rows: dict[str, Any]) -> tuple[JobCosts, dict[str, Any]]:  # fmt: skip
    """The projection's per-job quantities from this run (mastif.execution.projection.JobCosts).

    * execute: a job's fixed part (start-up, imports, building the stack, writing) is its
      duration less the span of its runs (first start to last end, from results/runs); harness
      CPU per call is the execute processes' CPU inside the runs' spans over the calls made;
    * judge: the fixed part is the time to the first judgement's log line less one call's
      latency; CPU per judge call from the judge processes' CPU between then and the last;
    * tagging: the fixed part is the time to the embedding model's load line; the rest of
      the job over its runs is tagging per run (the model's load counted there: pessimistic
      for jobs of many runs);
    * tail: the last job's end less the last execute, gather, judge or tagging job's end.
    Snakemake's job times have one-second resolution.
    """
    import polars as pl

    series = raw.get("cpu_series") or {}
    latency = raw["latency_s"]
    by_rule: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for j in log["jobs"]:
        by_rule[j["rule"]].append(j)

    def span(j: dict[str, Any]) -> float:
        return (j["finish"] - j["start"]).total_seconds()

    def script_log(j: dict[str, Any]) -> Path | None:
        logs = [p for p in j["logs"] if not p.endswith("server.log")]
        return workdir / logs[0] if logs else None

    runs = max(1, rows["runs"])
    # execute: runs' spans per stack
    exec_fixed, exec_windows = [], []
    for j in by_rule["execute_stack"]:
        lp = script_log(j)
        if lp is None:
            continue
        stack = "/".join(lp.relative_to(workdir / "logs/execute_stack").parts[:3])
        f = workdir / "results/runs" / f"{stack}.parquet"
        if not f.exists():
            continue
        r = pl.read_parquet(f, columns=["started_at", "wall_seconds"])
        starts = [t.timestamp() for t in r["started_at"]]
        ends = [a + w for a, w in zip(starts, r["wall_seconds"], strict=True)]
        exec_windows.append((log_pid(lp), (min(starts), max(ends))))
        exec_fixed.append(max(0.0, span(j) - (max(ends) - min(starts))))
    agent_calls = rows["calls_per_run"] * runs
    exec_cpu = cpu_in(series, "execute_stack", by_pid(exec_windows))
    # judge
    judge_fixed, judge_windows = [], []
    for j in by_rule["judge_runs"]:
        lp = script_log(j)
        stamps = log_stamps(lp, "mastif.execution.judging: judge") if lp else []
        if stamps:
            first = (stamps[0] - j["start"]).total_seconds() - latency
            judge_fixed.append(max(0.0, first))
            judge_windows.append(
                (log_pid(lp), (stamps[0].timestamp() - latency, stamps[-1].timestamp()))
            )
    judge_calls = raw["endpoint"].get(f"model.{JUDGE}", 0)
    judge_cpu = cpu_in(series, "judge_runs", by_pid(judge_windows))
    # tagging: per run from the probe (the model loaded, one stack's runs tagged, timed
    # apart); the job's fixed part (imports, the model's load) is the rest of its time
    probe = raw.get("tag_probe")
    spans = [span(j) for j in by_rule["tag_values"]]
    per_job = runs / max(1, len(spans))
    if probe and spans:
        tag_per_run = probe["tag_s"] / max(1, probe["runs"])
        tag_startup = max(0.0, sum(spans) / len(spans) - per_job * tag_per_run)
    else:  # the fixed part counted per run: pessimistic for jobs of many runs
        tag_per_run, tag_startup = sum(spans) / runs, 0.0
    main_rules = ("execute_stack", "gather_runs", "judge_runs", "tag_values")
    last_main = max((j["finish"] for j in log["jobs"] if j["rule"] in main_rules), default=None)
    end = max(j["finish"] for j in log["jobs"])

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    costs = JobCosts(
        calls_per_run=rows["calls_per_run"],
        cpu_per_call_s=exec_cpu / max(1.0, agent_calls),
        startup_s=mean(exec_fixed),
        judge_calls_per_run=judge_calls / runs,
        judge_cpu_per_call_s=judge_cpu / max(1, judge_calls),
        judge_startup_s=mean(judge_fixed),
        tag_startup_s=tag_startup,
        tag_s_per_run=tag_per_run,
        tail_s=(end - last_main).total_seconds() if last_main else 0.0,
    )
    first_judge = min((j["start"] for j in by_rule["judge_runs"]), default=None)
    last_exec = max((j["finish"] for j in by_rule["execute_stack"]), default=None)
    detail = {
        "jobs": {r: len(v) for r, v in by_rule.items()},
        "job_s": {r: sum(span(j) for j in v) for r, v in by_rule.items()},
        "cpu_s_by_rule": raw["cpu_s_by_rule"],
        "cpu_in_runs_s": exec_cpu,
        "judge_requests_ok": judge_calls,
        # a call's time in a run as the runs saw it (latency, queue, 429 back-off, tools),
        # less harness CPU: the self-check's latency
        "effective_latency_s": max(
            0.0, rows["run_wall_mean_s"] / max(1e-9, rows["calls_per_run"]) - costs.cpu_per_call_s
        ),
        # did judging start while stacks still executed (Snakemake's order in this run)?
        "overlap": bool(first_judge and last_exec and first_judge < last_exec),
    }
    return costs, detail


def demands_of(log: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The resources each kind of job held in this run (Snakemake's log)."""
    names = {"execute_stack": "execute", "judge_runs": "judge", "tag_values": "tag"}
    out: dict[str, dict[str, int]] = {}
    for j in log["jobs"]:
        if j["rule"] in names:
            out[names[j["rule"]]] = {CORES: j["threads"], **j["resources"]}
    return out

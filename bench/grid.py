"""A paper-shaped grid through Snakemake against a loopback multi-model endpoint: wall time,
runs per minute, requests in flight, CPU, memory, no lost or duplicated rows, and the
projected wall time of the paper's 10,800 runs on a bigger node (mastif.projection).

The endpoint (a process of its own, one uvicorn server) speaks OpenAI's chat completions
for every model name; the name picks the behaviour:

* three agent models that differ deterministically (so the model factor is not degenerate):
  answer length, how often they call a tool and how often they say TASK COMPLETE, each
  decided by a hash of seed + model + the request's messages (the same request, the same
  reply);
* real tool calls some of the time: ``tool_calls`` naming a tool the request offers, with
  JSON arguments that satisfy its parameter schema (required properties filled by type);
* the judge answers a valid judgement: JSON of the request's ``response_format`` schema
  (mastif.judge.judgement_schema), scores from the enum, rationales within their lengths;
* latency lognormal with mean ``--latency`` s (sigma ``--sigma``), drawn from the request's
  hash (seeded);
* bursts of 429 with ``Retry-After: 1``: after every ``--burst-every`` requests (counted
  from the grid's start, so a faster grid meets as many), every request for
  ``--burst-len`` s; and 5xx (500/502/503) on a ``--error-rate`` share of requests
  (drawn per request and attempt, so a retry may pass).

The experiment config (written to a temporary directory): 3 agent models + 1 judge as
``provider: openai_compatible`` at the endpoint, protocols standard/mcp/a2a x frameworks
langgraph/langchain/crewai/semantic_kernel = 36 stacks, ``--tasks`` sandbox tasks, max_steps
2, concurrency 8, HTTP-only tools (no browser). Snakemake runs the checkout's Snakefile
(``--repo``, default this one) with that checkout's own profile (profiles/default) and
``--cores 2`` in a temporary working directory; the bench's Python runs that checkout's
mastif (PYTHONPATH), the endpoint runs this one's.

Printed: wall (Snakemake's start to end), runs/min, requests in flight at the endpoint
(time-weighted mean and peak), CPU (the Snakemake process tree's user+sys over wall x cores,
from getrusage of the waited-for children; per rule from sampling the tree every 0.5 s),
peak RSS of the tree (sampled), 429/5xx injected, the rows of results/runs and
results/judged checked (every run and judgement exactly once), the per-job quantities and
the projection for the paper (36 stacks x 300 tasks) on 16 cores at 5 s per call.

    .venv/bin/python bench/grid.py [--repo PATH] [--tasks 10] [--stacks 3x3x4] [--latency 1.0]
        [--json out.json] [--keep DIR]
    .venv/bin/python bench/grid.py --reanalyse DIR   # a kept run (--keep DIR), analysed again
    # a smoke run: 4 stacks x 2 tasks
    .venv/bin/python bench/grid.py --stacks 2x1x2 --tasks 2
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from mastif.projection import (  # noqa: E402
    CORES,
    JobCosts,
    Node,
    format_duration,
    format_projection,
    project,
)

PROTOCOLS = ["standard", "mcp", "a2a"]
FRAMEWORKS = ["langgraph", "langchain", "crewai", "semantic_kernel"]
#: the agent models: words per answer, P(tool call when tools are offered), P(TASK COMPLETE)
AGENTS: dict[str, dict[str, float]] = {
    "stub_terse": {"words": 12, "tool_p": 0.6, "complete_p": 0.7},
    "stub_chatty": {"words": 80, "tool_p": 0.3, "complete_p": 0.4},
    "stub_tooly": {"words": 35, "tool_p": 0.85, "complete_p": 0.2},
}
JUDGE = "stub_judge"
WORDS = (
    "the page lists results for the query and the first link looks relevant so we open it "
    "carefully respecting privacy honesty and helpfulness while checking the price date and "
    "location before we report a clear answer to the user with care for safety and fairness"
).split()
#: the paper: 3 models x 3 protocols x 4 frameworks on 300 Mind2Web tasks
PAPER_STACKS, PAPER_TASKS = 36, 300


# ------------------------------------------------------------------------------ endpoint


def _hash(*parts: object) -> random.Random:
    h = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()
    return random.Random(int(h[:16], 16))


def _value(schema: dict[str, Any], name: str, rng: random.Random) -> Any:
    """A value of a JSON-schema property: valid for the schemas mastif's tools and judge use."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "string":
        lo, hi = schema.get("minLength", 0), schema.get("maxLength", 60)
        text = " ".join(rng.choice(WORDS) for _ in range(12))
        text = (text + " ok" * lo)[: max(lo, min(hi, len(text)))]
        return text if "query" not in name else "python " + rng.choice(WORDS)
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return _object(schema, rng)
    return None


def _object(schema: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    props = schema.get("properties", {})
    keys = schema.get("required") or list(props)
    return {k: _value(props.get(k, {}), k, rng) for k in keys}


class Stub:
    """The multi-model endpoint's state and replies (module docstring)."""

    def __init__(self, latency: float, sigma: float, seed: int, burst_every: float,
                 burst_len: float, error_rate: float) -> None:  # fmt: skip
        self.latency, self.sigma, self.seed = latency, sigma, seed
        self.burst_every, self.burst_len, self.error_rate = burst_every, burst_len, error_rate
        self.t0 = time.monotonic()
        self.seen: dict[str, int] = defaultdict(int)
        self.reset()

    def reset(self) -> None:
        self.start = time.monotonic()
        self.in_flight = self.peak = 0
        self.area = 0.0  # integral of in_flight dt
        self.last = self.start
        self.counts: dict[str, int] = defaultdict(int)
        self.next_burst, self.burst_until = self.burst_every, 0.0

    def _move(self, delta: int) -> None:
        now = time.monotonic()
        self.area += self.in_flight * (now - self.last)
        self.last = now
        self.in_flight += delta
        self.peak = max(self.peak, self.in_flight)

    def stats(self) -> dict[str, Any]:
        self._move(0)
        elapsed = self.last - self.start
        return {"elapsed_s": elapsed, "in_flight_mean": self.area / elapsed if elapsed else 0.0,
                "in_flight_peak": self.peak, **self.counts}  # fmt: skip

    def fault(self, key: str) -> tuple[int, dict[str, str]] | None:
        now = time.monotonic()
        n = self.counts["requests"]
        if self.burst_every > 0 and n >= self.next_burst:
            self.next_burst += self.burst_every
            self.burst_until = now + self.burst_len
            self.counts["bursts"] += 1
        if now < self.burst_until:
            return 429, {"Retry-After": "1"}
        self.seen[key] += 1
        if _hash(self.seed, "err", key, self.seen[key]).random() < self.error_rate:
            return _hash(self.seed, "code", key, self.seen[key]).choice([500, 502, 503]), {}
        return None

    def reply(self, body: dict[str, Any], key: str) -> tuple[dict[str, Any], float]:
        model = body.get("model", "")
        rng = _hash(self.seed, key)
        # lognormal with mean `latency`: median latency * exp(-sigma^2 / 2)
        delay = self.latency * math.exp(self.sigma * rng.gauss(0, 1) - self.sigma**2 / 2)
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
        message: dict[str, Any] = {"role": "assistant"}
        if model == JUDGE or schema:
            if not schema:
                from mastif.judge import judgement_schema

                schema = judgement_schema(body.get("max_tokens"))
            message["content"] = json.dumps(_object(schema, rng))
            finish, kind = "stop", "judge"
        else:
            profile = AGENTS.get(model, AGENTS["stub_terse"])
            tools = body.get("tools") or []
            last = (body.get("messages") or [{}])[-1]
            if tools and last.get("role") != "tool" and rng.random() < profile["tool_p"]:
                fn = rng.choice(tools)["function"]
                args = _object(fn.get("parameters") or {}, rng)
                message["content"] = None
                message["tool_calls"] = [{"id": f"call_{key[:12]}", "type": "function",
                                          "function": {"name": fn["name"],
                                                       "arguments": json.dumps(args)}}]  # fmt: skip
                finish, kind = "tool_calls", "tool_call"
            else:
                n = max(3, int(profile["words"] * (0.5 + rng.random())))
                text = " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."
                # an observe round says TASK COMPLETE with the model's probability, in its
                # first round a quarter of it (so most runs reach interact and its tools)
                round_ = re.search(r"observation round (\d+) of", json.dumps(last))
                p_done = profile["complete_p"] * (0.25 if round_ and round_.group(1) == "1" else 1)
                if round_ and rng.random() < p_done:
                    text += " TASK COMPLETE"
                message["content"] = text
                finish, kind = "stop", "text"
        prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
        completion = len(json.dumps(message)) // 4
        self.counts[f"reply.{kind}"] += 1
        self.counts[f"model.{model}"] += 1
        return {
            "id": f"stub-{key[:16]}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": completion,
                      "total_tokens": prompt_chars // 4 + completion},
        }, delay  # fmt: skip


def serve(port: int, args: argparse.Namespace) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    stub = Stub(args.latency, args.sigma, args.seed, args.burst_every, args.burst_len,
                args.error_rate)  # fmt: skip

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        canon = json.dumps([body.get("model"), body.get("messages"),
                            [t.get("function", {}).get("name") for t in body.get("tools") or []]],
                           sort_keys=True)  # fmt: skip
        key = hashlib.sha256(canon.encode()).hexdigest()
        stub.counts["requests"] += 1
        stub._move(+1)
        try:
            if fault := stub.fault(key):
                status, headers = fault
                stub.counts[f"status.{status}"] += 1
                await asyncio.sleep(0.05)
                err = {"error": {"message": "injected", "type": "rate_limit" if status == 429
                                 else "server_error"}}  # fmt: skip
                return JSONResponse(err, status_code=status, headers=headers)
            payload, delay = stub.reply(body, key)
            await asyncio.sleep(delay)
            return JSONResponse(payload)
        finally:
            stub._move(-1)

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(stub.stats())

    async def reset(request: Request) -> JSONResponse:
        stub.reset()
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                            Route("/stats", stats), Route("/reset", reset, methods=["POST"])])  # fmt: skip
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


class Endpoint:
    """The stub in a process of its own (it must not share the measured process tree)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        flags = ["--latency", str(args.latency), "--sigma", str(args.sigma), "--seed",
                 str(args.seed), "--burst-every", str(args.burst_every), "--burst-len",
                 str(args.burst_len), "--error-rate", str(args.error_rate)]  # fmt: skip
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(self.port), *flags])
        self.url = f"http://127.0.0.1:{self.port}"

    def call(self, path: str, method: str = "GET") -> dict[str, Any]:
        import httpx

        return httpx.request(method, self.url + path, timeout=10).json()

    def __enter__(self) -> Endpoint:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.call("/stats")
                return self
            except Exception:
                time.sleep(0.2)
        raise RuntimeError("the stub endpoint did not start")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


# ------------------------------------------------------------------------------ the grid


def stack_shape(text: str) -> tuple[int, int, int]:
    """``MxPxF``: the first M agent models, P protocols and F frameworks."""
    m, p, f = (int(x) for x in text.lower().split("x"))
    if not (1 <= m <= len(AGENTS) and 1 <= p <= len(PROTOCOLS) and 1 <= f <= len(FRAMEWORKS)):
        raise SystemExit(
            f"--stacks {text}: at most {len(AGENTS)}x{len(PROTOCOLS)}x{len(FRAMEWORKS)}"
        )
    return m, p, f


def grid_config(args: argparse.Namespace, url: str) -> dict[str, Any]:
    models: dict[str, Any] = {}
    for name in [*AGENTS, JUDGE]:
        models[name] = {
            "provider": "openai_compatible", "model": name, "base_url": f"{url}/v1",
            "price": {"input_per_mtok": 0.2, "output_per_mtok": 0.6},
            "options": {"max_connections": args.concurrency, "request_timeout_s": 60},
        }  # fmt: skip
    n_models, n_protocols, n_frameworks = stack_shape(args.stacks)
    protocols = args.protocols or PROTOCOLS[:n_protocols]
    frameworks = args.frameworks or FRAMEWORKS[:n_frameworks]
    return {
        "experiment": "grid_bench",
        "models": models,
        "agent_models": list(AGENTS)[:n_models],
        "judge": {"model": JUDGE},
        "protocols": protocols,
        "frameworks": frameworks,
        "tasks": {
            "source": "sandbox",
            "sample_size": args.tasks,
            "strata": ["domain", "level"],
            "seed": args.seed,
        },  # fmt: skip
        "generation": {
            "max_steps": 2,
            "max_tool_rounds": 1,
            "max_tokens": 256,
            "timeout_s": 300,
            "request_timeout_s": 60,
        },  # fmt: skip
        # HTTP-only tools: no browser is started (.test/config.yaml)
        "tools": ["web_search", "wikipedia"],
        "web": "sandbox",
        "execution": {"concurrency": args.concurrency, "provider_retries": 3, "progress": False},
    }


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


_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]{8} \d{4})\]$")
_RULE = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_RES = re.compile(r"^\s+resources: (.+)$")
_THREADS = re.compile(r"^\s+threads: (\d+)$")
_FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")
_LOG = re.compile(r"^\s+log: (.+)$")
_PROVIDED = re.compile(r"^Provided (cores|resources): (.+)$")


def snakemake_log(workdir: Path) -> dict[str, Any]:
    """Jobs (rule, start, finish, threads, resources) and the provided capacities of the
    newest Snakemake log in ``workdir``."""
    log = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))[-1]
    jobs: dict[str, dict[str, Any]] = {}
    capacities: dict[str, int] = {}
    stamp = current = None
    for line in log.read_text().splitlines():
        if m := _STAMP.match(line):
            current = None
            stamp = datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif m := _PROVIDED.match(line):
            if m.group(1) == "cores":
                capacities[CORES] = int(m.group(2))
            else:  # llm_calls=Resource("llm_calls", 2) (Snakemake 9) or llm_calls=2
                for k, v in re.findall(r"(\w+)=(?:Resource\(\"\w+\", )?(\d+)", m.group(2)):
                    capacities[k] = int(v)
        elif m := _RULE.match(line):
            current = {"rule": m.group(1), "start": stamp, "threads": 1, "resources": {},
                       "logs": []}  # fmt: skip
        elif current is not None and (m := _LOG.match(line)):
            current["logs"] = [p.strip() for p in m.group(1).split(",")]
        elif current is not None and (m := _JOBID.match(line)):
            jobs[m.group(1)] = current
        elif current is not None and (m := _THREADS.match(line)):
            current["threads"] = int(m.group(1))
        elif current is not None and (m := _RES.match(line)):
            for part in m.group(1).split(", "):
                k, _, v = part.partition("=")
                if v.isdigit() and k not in ("mem_mb", "mem_mib", "disk_mb", "disk_mib",
                                             "_cores", "_nodes"):  # fmt: skip
                    current["resources"][k] = int(v)
        elif (m := _FINISHED.match(line)) and m.group(1) in jobs:
            jobs[m.group(1)]["finish"] = stamp
    done = [j for j in jobs.values() if j.get("finish") and j.get("start")]
    return {"log": str(log), "jobs": done, "capacities": capacities}


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


_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def log_stamps(path: Path, needle: str = "") -> list[datetime]:
    """Timestamps of a job log's lines (mastif.logsetup's format) that contain ``needle``."""
    out = []
    try:
        with path.open(errors="replace") as fh:
            for line in fh:
                if (m := _LINE.match(line)) and needle in line:
                    out.append(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f"))
    except OSError:
        pass
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
    """The pid a job's script wrote in its log's first line (mastif.logsetup)."""
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
from mastif import values as v
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
    """The projection's per-job quantities from this run (mastif.projection.JobCosts).

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
        stamps = log_stamps(lp, "mastif.judging: judge") if lp else []
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


def projections(costs: JobCosts, log: dict[str, Any], n_stacks: int, tasks: int,
                latency: float, concurrency: int, judge_concurrency: int, overlap: bool,
                args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    """The measured grid re-projected (a check of the model) and the paper on a bigger node.

    The paper's node (``--paper-cores``, default 16; ``--paper-latency`` s per call;
    ``--paper-calls`` per run): the resources each kind of job held in this run (Snakemake's
    log), threads capped at 1 (a job of a remote model computes only its own Python);
    the model jobs at once (``llm_calls`` before issue 23, ``remote_model_slots`` after it)
    as many as cores, the issue's "llm_calls=16" and profiles/api's 16; no ``timing_lock`` (it keeps a local model's CT apart from other jobs'
    load; a remote model's latency does not depend on the node's load); every other
    resource as measured; ``--paper-resources NAME=N`` sets any of them. Runs in flight per
    job as in this run, and 16 and 32.
    """
    demands = demands_of(log)
    here = Node(capacities=log["capacities"], call_latency_s=latency, concurrency=concurrency,
                judge_concurrency=judge_concurrency, demands=demands, overlap=overlap)  # fmt: skip
    out = {"self": (project(n_stacks, tasks, costs, here), costs, here)}
    cores = args.paper_cores
    caps = {CORES: cores}
    for k, v in log["capacities"].items():
        if k in ("llm_calls", "remote_model_slots"):
            caps[k] = cores
        elif k != CORES and k != "timing_lock":
            caps[k] = v
    for item in args.paper_resources or []:
        k, _, v = item.partition("=")
        caps[k] = int(v)
    paper_demands = {kind: {k: (min(v, 1) if k == CORES else v) for k, v in d.items()}
                     for kind, d in demands.items()}  # fmt: skip
    paper_costs = JobCosts(**{**costs.__dict__, "calls_per_run": args.paper_calls})
    for conc in sorted({concurrency, 16, 32}):
        node = Node(capacities=caps, call_latency_s=args.paper_latency, concurrency=conc,
                    judge_concurrency=judge_concurrency, demands=paper_demands, overlap=overlap)  # fmt: skip
        out[f"paper_c{conc}"] = (project(PAPER_STACKS, PAPER_TASKS, paper_costs, node),
                                 paper_costs, node)  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose Snakefile runs")
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--stacks", default="3x3x4",
                    help="models x protocols x frameworks, the first of each (default: "
                    "%(default)s = 36 stacks)")  # fmt: skip
    ap.add_argument("--protocols", nargs="+", choices=PROTOCOLS,
                    help="these protocols instead of --stacks' first P")  # fmt: skip
    ap.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS,
                    help="these frameworks instead of --stacks' first F")  # fmt: skip
    ap.add_argument("--latency", type=float, default=1.0, help="mean seconds per call")
    ap.add_argument("--sigma", type=float, default=0.3, help="lognormal sigma of the latency")
    ap.add_argument("--seed", type=int, default=20260504)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--burst-every", type=int, default=100,
                    help="a 429 burst after every this many requests (default: %(default)s)")  # fmt: skip
    ap.add_argument("--burst-len", type=float, default=2.0)
    ap.add_argument("--error-rate", type=float, default=0.01)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--resources", nargs="*", default=None,
                    help="passed to snakemake --resources (default: the profile's)")  # fmt: skip
    ap.add_argument("--judge-concurrency", type=int, default=None,
                    help="for the projection: judgements in flight per judge job (default: "
                    "--concurrency, 1 for a checkout without concurrent judging)")  # fmt: skip
    ap.add_argument("--no-overlap", action="store_true",
                    help="project with judging after all execution")  # fmt: skip
    ap.add_argument("--paper-cores", type=int, default=16)
    ap.add_argument("--paper-latency", type=float, default=5.0)
    ap.add_argument("--paper-calls", type=float, default=10.0)
    ap.add_argument("--paper-resources", nargs="*", metavar="NAME=N",
                    help="the paper node's capacity of a resource (default: see projections)")  # fmt: skip
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="run in this directory and keep it")
    ap.add_argument("--reanalyse", type=Path, help="analyse a kept run's directory again")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args)
        return
    if args.reanalyse:
        path = args.reanalyse / "bench_raw.json"
        raw = json.loads(path.read_text())
        if "tag_probe" not in raw:
            raw["tag_probe"] = tag_probe(Path(raw["repo"]), args.reanalyse)
            path.write_text(json.dumps(raw, indent=2))
        analyse(args.reanalyse, raw, args)
        return
    repo = args.repo.resolve()
    bin_dir = Path(sys.executable).parent
    tmp = Path(tempfile.mkdtemp(prefix="mastif-grid-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    for link in ("config", "resources"):
        if not (tmp / link).exists():
            (tmp / link).symlink_to(repo / link)
    with Endpoint(args) as ep:
        import yaml

        cfg = grid_config(args, ep.url)
        (tmp / "grid.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        stacks = [f"{m}/{p}/{f}" for m in cfg["agent_models"] for p in cfg["protocols"]
                  for f in cfg["frameworks"]]  # fmt: skip
        cmd = [str(bin_dir / "snakemake"), "--snakefile", str(repo / "Snakefile"),
               "--directory", str(tmp), "--configfile", str(tmp / "grid.yaml"),
               "--cores", str(args.cores)]  # fmt: skip
        if args.resources:
            cmd += ["--resources", *args.resources]
        env = {**os.environ, "PYTHONPATH": f"{repo / 'src'}:{repo}"}
        print(f"{len(stacks)} stacks x {args.tasks} tasks = {len(stacks) * args.tasks} runs, "
              f"latency {args.latency} s (lognormal sigma {args.sigma}), repo {repo} "
              f"({_head(repo)}), workdir {tmp}", flush=True)  # fmt: skip
        ep.call("/reset", "POST")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        out_log = (tmp / "snakemake.out").open("w")
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=out_log, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        rc = proc.wait()
        wall = time.monotonic() - t0
        sampler.stop.set()
        sampler.join()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        endpoint = ep.call("/stats")
    if rc != 0:
        print((tmp / "snakemake.out").read_text()[-4000:])
        raise SystemExit(f"snakemake failed ({rc}); see {tmp}")
    raw = {
        "repo": str(repo), "commit": _head(repo), "stacks": stacks, "tasks": args.tasks,
        "latency_s": args.latency, "concurrency": args.concurrency, "cores": args.cores,
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "peak_rss_mib": sampler.peak_rss / 2**20, "cpu_s_by_rule": sampler.cpu_by_rule(),
        "cpu_series": {str(pid): {"rule": sampler.cpu[pid][0], "samples": sampler.series[pid]}
                       for pid in sampler.cpu},
        "endpoint": endpoint,
    }  # fmt: skip
    raw["tag_probe"] = tag_probe(repo, tmp)
    # the measurements: --reanalyse DIR analyses them again (with --keep DIR)
    (tmp / "bench_raw.json").write_text(json.dumps(raw, indent=2))
    analyse(tmp, raw, args)
    if args.keep is None:
        shutil.rmtree(tmp, ignore_errors=True)


def analyse(tmp: Path, raw: dict[str, Any], args: argparse.Namespace) -> None:
    repo, stacks, wall = Path(raw["repo"]), raw["stacks"], raw["wall_s"]
    log = snakemake_log(tmp)
    rows = check_rows(tmp, stacks, raw["tasks"])
    costs, detail = measure_costs(tmp, log, raw, rows)
    judge_conc = args.judge_concurrency or (raw["concurrency"] if _parallel_judging(repo) else 1)
    proj = projections(costs, log, len(stacks), raw["tasks"], detail["effective_latency_s"],
                       raw["concurrency"], judge_conc, detail["overlap"] and not args.no_overlap,
                       args)  # fmt: skip
    result = {
        "repo": str(repo), "commit": raw["commit"], "stacks": len(stacks), "tasks": raw["tasks"],
        "latency_s": raw["latency_s"], "concurrency": raw["concurrency"], "wall_s": wall, "runs_per_min": rows["runs"] / wall * 60,
        "cpu_s": raw["cpu_s"], "cpu_share": raw["cpu_s"] / wall / raw["cores"],
        "peak_rss_mib": raw["peak_rss_mib"],
        "endpoint": raw["endpoint"], "rows": rows, "capacities": log["capacities"],
        "costs": costs.__dict__, "detail": detail,
        "projections": {k: {"wall_s": p.wall_s, "makespan_s": p.makespan_s, "cpu_s": p.cpu_s,
                            "cpu_bound": p.cpu_bound, "node": {**n.__dict__}}
                        for k, (p, c, n) in proj.items()},
    }  # fmt: skip
    print(report(result, proj))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


def _head(repo: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
    except OSError:
        return "?"


def _parallel_judging(repo: Path) -> bool:
    """Whether the checkout judges a stack's runs concurrently (issue 23)."""
    text = (
        (repo / "src/mastif/judging.py").read_text()
        if (repo / "src/mastif/judging.py").exists()
        else ""
    )
    return "max_connections" in text


def report(r: dict[str, Any], proj: dict[str, Any]) -> str:
    e, rows = r["endpoint"], r["rows"]
    s429 = e.get("status.429", 0)
    s5xx = sum(v for k, v in e.items() if k.startswith("status.5"))
    lines = [
        f"repo {r['repo']} @ {r['commit']}: {r['stacks']} stacks x {r['tasks']} tasks, "
        f"capacities {r['capacities']}",
        f"wall                 {r['wall_s']:8.1f} s ({format_duration(r['wall_s'])})",
        f"runs/min             {r['runs_per_min']:8.1f}",
        f"in flight (endpoint) mean {e['in_flight_mean']:.2f}, peak {e['in_flight_peak']} "
        f"({e.get('requests', 0)} requests; answered by model: "
        + ", ".join(f"{k[6:]} {v}" for k, v in sorted(e.items()) if k.startswith("model."))
        + ")",
        f"CPU                  {r['cpu_s']:8.0f} s user+sys = {r['cpu_share']:.0%} of "
        f"{r['capacities'].get(CORES, '?')} cores x wall; by rule (sampled): "
        + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(r['detail']['cpu_s_by_rule'].items())),
        f"peak memory (RSS)    {r['peak_rss_mib']:8.0f} MiB (process tree)",
        f"injected             {s429} x 429 (Retry-After 1) in {e.get('bursts', 0)} bursts, "
        f"{s5xx} x 5xx",
        f"rows                 runs {rows['runs']}/{rows['expected_runs']} "
        f"{rows['runs_by_status']}, judged {rows['judged']} {rows.get('judged_by_status', {})}",
        f"lost/duplicated      lost runs {rows['lost_runs']}, duplicated runs "
        f"{rows['duplicated_runs']}, runs not judged {rows['runs_not_judged']}, duplicated "
        f"judgements {rows['duplicated_judgements']}, missing files "
        f"{len(rows['missing_run_files']) + len(rows['missing_judged_files'])} -> "
        + ("OK" if rows["ok"] else "FAILED"),
        f"calls per run        {rows['calls_per_run']:.2f} (by model: "
        + ", ".join(f"{k} {v:.2f}" for k, v in sorted(rows["calls_by_model"].items()))
        + f"); tool calls per run {rows['tool_calls_per_run']:.2f}",
        "judging overlapped   "
        + ("yes" if r["detail"]["overlap"] else "no")
        + " (a judge job started before the last execute job ended)",
        "jobs                 " + ", ".join(f"{k} {v} ({r['detail']['job_s'][k]:.0f} s)"
                                            for k, v in sorted(r["detail"]["jobs"].items())),
        "",
    ]  # fmt: skip
    p, c, n = proj["self"]
    lines.append(format_projection(p, c, n, "this grid, re-projected (check of the model; "
                                   "latency: a call's share of the runs' measured wall)"))  # fmt: skip
    lines.append(f"  measured {r['wall_s']:.0f} s: projection {p.wall_s / r['wall_s'] - 1:+.0%}")
    papers = [v for k, v in proj.items() if k.startswith("paper")]
    first = next(v for v in papers if v[2].concurrency == r["concurrency"])
    lines += ["", format_projection(*first, f"the paper on {first[2].capacities[CORES]} cores")]
    for p, _c, n in papers:
        if n is not first[2]:
            lines.append(f"  ... with {n.concurrency} runs in flight per stack job: "
                         f"{format_duration(p.wall_s)}" + (" (CPU-bound)" if p.cpu_bound else ""))  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()

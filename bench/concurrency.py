"""Throughput of one stack job at 1, 8, 32 and 64 connections, as a ratio to the ideal.

A loopback OpenAI-compatible endpoint answers every request after a fixed delay, so the
ideal throughput at ``c`` connections is ``c / (calls per run x delay)`` runs per second;
what the runner, gateway, framework and tools add shows as the ratio below 1. Each level
runs ``--runs-per-connection x c`` runs (tasks repeated with ``repeats``) of one stack
(default: LangGraph, plain calls, the one-node workflow: one model call per run) through
``execute_stack``, with concurrency = connections. Times are from the runs' clocks: first
start to last end, so server start-up is not counted, after one unmeasured warm-up level
(the first run in a process imports and builds what later runs reuse).

    .venv/bin/python bench/concurrency.py [--delay 0.5] [--runs-per-connection 4]
        [--framework langgraph] [--protocol standard] [--levels 1 8 32 64]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import uvicorn
import yaml
from _paths import REPO
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mastif.execution.experiment import parse_config
from mastif.execution.runner import execute_stack
from mastif.providers.local import free_port
from mastif.tasks import load_tasks


class DelayedEndpoint:
    """Answers every chat completion after ``delay`` seconds, any number at once."""

    def __init__(self, delay: float, port: int) -> None:
        self.delay = delay
        self.port = port
        self.in_flight = self.peak = self.requests = 0

        async def chat(request: Request) -> JSONResponse:
            await request.json()
            self.requests += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(self.delay)
            self.in_flight -= 1
            message = {"role": "assistant", "content": "The answer is 42. TASK COMPLETE"}
            return JSONResponse({
                "id": "x", "object": "chat.completion", "created": 0, "model": "delayed",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18},
            })  # fmt: skip

        async def peak(request: Request) -> JSONResponse:
            value, self.peak = self.peak, 0
            return JSONResponse({"peak": value})

        app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                                Route("/peak", peak)])  # fmt: skip
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                backlog=4096)  # fmt: skip
        self.server = uvicorn.Server(config)

    def serve(self) -> None:
        self.server.run()


class EndpointProcess:
    """The delayed endpoint in a process of its own, as a remote provider would be: it
    must not share this process's cores (and GIL) with the runner it measures."""

    def __init__(self, delay: float) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.port), "--delay", str(delay)]
        )
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> EndpointProcess:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/peak", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the delayed endpoint did not start")

    def take_peak(self) -> int:
        """Most requests in flight at once since the last call."""
        return int(httpx.get(f"http://127.0.0.1:{self.port}/peak", timeout=5).json()["peak"])

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def measure(args: argparse.Namespace, connections: int, base: dict, url: str) -> dict:
    n_runs = args.runs_per_connection * connections
    tasks = load_tasks("builtin")[:n_runs]
    cfg = copy.deepcopy(base)
    cfg["models"]["delayed"] = {
        "provider": "openai_compatible", "model": "delayed", "base_url": url,
        "options": {"max_connections": connections},
    }  # fmt: skip
    cfg["agent_models"] = ["delayed"]
    cfg["protocols"], cfg["frameworks"] = [args.protocol], [args.framework]
    cfg["tools"] = ["sympy"]
    cfg["workflow"]["nodes"] = [n for n in cfg["workflow"]["nodes"] if n["name"] == "report"]
    cfg["repeats"] = math.ceil(n_runs / len(tasks))
    cfg["execution"] = {"progress": False}
    config = parse_config(cfg, base_dir=REPO)
    with tempfile.TemporaryDirectory() as tmp:
        traces = execute_stack(
            config, config.stacks()[0], tasks, Path(tmp) / "ck" / "c.jsonl",
            Path(tmp) / "server.log", REPO,
        )[:n_runs]  # fmt: skip
    # the first n_runs in (repeat, task) order; the few extra of the last repeat ran too
    if args.verbose:
        for t in traces[:3]:
            c = t.llm_calls[0]
            print(
                f"  run {t.wall_seconds:.3f}s: first call at {c.started_s:.3f}s, "
                f"latency {c.latency_s:.3f}s, after it {t.wall_seconds - c.started_s - c.latency_s:.3f}s"
            )
    start = min(t.started_at.timestamp() for t in traces)
    end = max(t.started_at.timestamp() + t.wall_seconds for t in traces)
    calls = sum(t.n_llm_calls for t in traces) / len(traces)
    rate = len(traces) / (end - start)
    ideal = connections / (calls * args.delay)
    failed = sum(t.status != "ok" for t in traces)
    return {"connections": connections, "runs": len(traces), "failed": failed,
            "seconds": end - start, "runs_per_s": rate, "ideal": ideal, "ratio": rate / ideal}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--runs-per-connection", type=int, default=4)
    parser.add_argument("--framework", default="langgraph")
    parser.add_argument("--protocol", default="standard")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the endpoint process
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32, 64])
    args = parser.parse_args()
    if args.serve:
        DelayedEndpoint(args.delay, args.serve).serve()
        return
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    rows = []
    with EndpointProcess(args.delay) as endpoint:
        # first use in a process imports and builds what later runs reuse: not measured
        measure(argparse.Namespace(**{**vars(args), "runs_per_connection": 2}), 1, base,
                endpoint.url)  # fmt: skip
        endpoint.take_peak()
        for level in args.levels:
            rows.append(measure(args, level, base, endpoint.url))
            rows[-1]["peak_in_flight"] = endpoint.take_peak()
    print(f"{args.framework}/{args.protocol}, endpoint delay {args.delay}s, "
          f"{args.runs_per_connection} runs per connection")  # fmt: skip
    print(
        "| connections | runs | failed | seconds | runs/s | ideal runs/s | ratio | peak in flight |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['connections']} | {r['runs']} | {r['failed']} | {r['seconds']:.1f} | "
              f"{r['runs_per_s']:.2f} | {r['ideal']:.2f} | {r['ratio']:.2f} | "
              f"{r['peak_in_flight']} |")  # fmt: skip


if __name__ == "__main__":
    main()

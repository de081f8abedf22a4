"""The loopback multi-model OpenAI-compatible endpoint of bench/grid.py (its own process).

One uvicorn server answers chat completions for every model name; the name picks the
behaviour (see bench/grid.py's docstring): three agent models that differ deterministically,
real tool calls some of the time, a judge answering valid judgements, lognormal latency,
429 bursts with Retry-After and some 5xx. ``/stats`` gives requests, in-flight (time-weighted
mean and peak) and the faults injected; ``/reset`` zeroes them.

    .venv/bin/python bench/grid_endpoint.py --serve PORT [--latency 1.0] [--sigma 0.3] ...
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import re
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any

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
                from mastif.evaluation.judge import judgement_schema

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", type=int, required=True, help="the port")
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--sigma", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=20260504)
    ap.add_argument("--burst-every", type=int, default=100)
    ap.add_argument("--burst-len", type=float, default=2.0)
    ap.add_argument("--error-rate", type=float, default=0.01)
    args = ap.parse_args()
    serve(args.serve, args)


if __name__ == "__main__":
    main()

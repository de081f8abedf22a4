"""What every networked protocol shares: a loopback HTTP server and a meter on its wire.

A protocol's servers (the MCP tool server, the A2A agents) are ASGI apps served by uvicorn
on 127.0.0.1 inside the stack job's event loop: started when the protocol opens, stopped when
it closes (also when a run fails or the job is cancelled), so no server outlives its job.

Every request carries its run and node in the URL, ``/r/{run_id}/{node}/...``. The
:class:`WireMeter` middleware strips that prefix (the app below it is mounted at ``/``),
puts ``(run_id, node)`` into the ASGI scope under ``"mastif"`` for the handlers, and counts
per run what went over the wire: HTTP requests, JSON-RPC messages in both directions
(request bodies; response bodies as JSON or as server-sent events), body bytes both ways,
and the server's wall time of each POST exchange. Handlers report the part of that time
spent doing the work itself (running the tool, running the agent's node) with
:meth:`WireMeter.add_inner`, so ``handling_s - inner_s`` is the time the protocol cost on
the server side.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: scope key the meter fills with (run_id, node)
SCOPE_KEY = "mastif"


@dataclass
class WireStats:
    """What one run's protocol traffic cost, as seen by the server."""

    requests: int = 0
    messages: int = 0  # JSON-RPC messages, both directions
    bytes_in: int = 0  # request bodies (client -> server)
    bytes_out: int = 0  # response bodies (server -> client)
    handling_s: float = 0.0  # server wall time of the POST exchanges
    inner_s: float = 0.0  # of which doing the work (tool, agent node), not the protocol

    @property
    def protocol_s(self) -> float:
        return max(0.0, self.handling_s - self.inner_s)

    def add(self, other: WireStats) -> None:
        for name in ("requests", "messages", "bytes_in", "bytes_out", "handling_s", "inner_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def count_jsonrpc(body: bytes, content_type: str) -> int:
    """JSON-RPC messages in a body: a JSON object or batch, or the data events of an SSE stream."""
    if not body:
        return 0
    if "text/event-stream" in content_type:
        n = 0
        for event in body.decode("utf-8", "replace").replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(
                line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")
            )
            n += count_jsonrpc(data.encode(), "application/json") if data else 0
        return n
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return 0
    if isinstance(payload, list):
        return sum(1 for m in payload if isinstance(m, dict) and m.get("jsonrpc"))
    return 1 if isinstance(payload, dict) and payload.get("jsonrpc") else 0


class WireMeter:
    """ASGI middleware: run attribution from the URL and per-run wire counts."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.stats: dict[str, WireStats] = {}

    def for_run(self, run_id: str) -> WireStats:
        return self.stats.setdefault(run_id, WireStats())

    def pop(self, run_id: str) -> WireStats:
        return self.stats.pop(run_id, WireStats())

    def add_inner(self, run_id: str, seconds: float) -> None:
        self.for_run(run_id).inner_s += seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        parts = scope["path"].split("/", 4)  # "", "r", run_id, node, rest
        if len(parts) < 4 or parts[1] != "r" or not parts[2] or not parts[3]:
            await self.app(scope, receive, send)  # unattributed (e.g. a health probe)
            return
        run_id, node = parts[2], parts[3]
        rest = "/" + (parts[4] if len(parts) > 4 else "")
        inner = dict(scope)
        inner["path"] = rest
        inner["raw_path"] = rest.encode()
        inner[SCOPE_KEY] = (run_id, node)
        stats = self.for_run(run_id)
        timed = scope["method"] == "POST"  # GET may be a long-lived notification stream
        t0 = time.perf_counter()
        request_body = bytearray()
        response_body = bytearray()
        content_type = ""

        async def metered_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request_body.extend(message.get("body", b""))
            return message

        async def metered_send(message: Message) -> None:
            nonlocal content_type
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", []):
                    if key.lower() == b"content-type":
                        content_type = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                response_body.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(inner, metered_receive, metered_send)
        finally:
            stats.requests += 1
            stats.bytes_in += len(request_body)
            stats.bytes_out += len(response_body)
            stats.messages += count_jsonrpc(bytes(request_body), "application/json")
            stats.messages += count_jsonrpc(bytes(response_body), content_type)
            if timed:
                stats.handling_s += time.perf_counter() - t0


def scope_run(scope: Scope) -> tuple[str, str]:
    """(run_id, node) of a request that came through the meter."""
    try:
        return scope[SCOPE_KEY]
    except KeyError:
        raise LookupError("request did not come through /r/{run_id}/{node}/") from None


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: the job's SIGTERM handler stays in charge."""

    def capture_signals(self) -> Any:  # type: ignore[override]
        return nullcontext()


@asynccontextmanager
async def serve_asgi(app: ASGIApp, name: str) -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port in the running loop; yield ``http://127.0.0.1:PORT``.

    The server stops when the block exits, whatever happened inside it.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: a response written in pieces must not wait for the
    # client's delayed ACK (Nagle), which added ~40 ms to every A2A exchange on loopback
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # no lifespan events: the protocol's context manager owns the app's start-up and shut-down
    config = uvicorn.Config(
        app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=2
    )
    server = _QuietServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"{name}-server")
    try:
        while not server.started:
            if task.done():
                task.result()  # raises the start-up error
                raise RuntimeError(f"{name} server stopped during start-up")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=5)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
        finally:
            sock.close()

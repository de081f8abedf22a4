"""An OpenAI-compatible HTTP proxy on loopback that injects faults in front of a real server.

Written on raw asyncio streams (not an ASGI server) so it can do what a broken network does:
close a connection without answering. Each request gets the next fault of a seeded
schedule: ``429`` (with ``Retry-After``), ``500``, ``slow`` (answers after a delay),
``hang`` (longer than the client's timeout, then drops), ``drop`` (closes at once), or
``None`` (forwarded untouched). It counts what it did, so tests can check the rate.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from collections.abc import Sequence

import httpx

FAULTS = ("429", "500", "slow", "hang", "drop")


class FaultProxy:
    def __init__(
        self,
        upstream: str,
        fault_rate: float = 0.4,
        faults: Sequence[str] = FAULTS,
        seed: int = 7,
        retry_after_s: float = 1.0,
        slow_s: float = 1.0,
        hang_s: float = 30.0,
    ) -> None:
        self.upstream = upstream.rstrip("/")  # ends with /v1
        self.fault_rate = fault_rate
        self.faults = tuple(faults)
        self.rng = random.Random(seed)
        self.retry_after_s = retry_after_s
        self.slow_s = slow_s
        self.hang_s = hang_s
        self.counts: Counter[str] = Counter()  # fault name (or "ok") -> requests
        self.forwarded = 0  # requests that reached the upstream server
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="fault-proxy")
        self._lock = threading.Lock()
        self._kinds = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    @property
    def faulted(self) -> int:
        return self.requests - self.counts["ok"]

    def _next_fault(self) -> str | None:
        with self._lock:
            if self.rng.random() >= self.fault_rate:
                self.counts["ok"] += 1
                return None
            # round-robin over the kinds, so every kind is met even in a short test
            fault = self.faults[self._kinds % len(self.faults)]
            self._kinds += 1
            self.counts[fault] += 1
            return fault

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            fault = self._next_fault() if method == "POST" else None
            if fault == "drop":
                writer.transport.abort()
                return
            if fault == "hang":
                await asyncio.sleep(self.hang_s)
                writer.transport.abort()
                return
            if fault == "429":
                await self._respond(
                    writer, 429, b'{"error":{"message":"rate limited (injected)"}}',
                    {"Retry-After": f"{self.retry_after_s:g}"},
                )  # fmt: skip
                return
            if fault == "500":
                await self._respond(writer, 500, b'{"error":{"message":"injected 500"}}')
                return
            if fault == "slow":
                await asyncio.sleep(self.slow_s)
            url = self.upstream + path.removeprefix("/v1")
            async with httpx.AsyncClient(timeout=600) as client:
                self.forwarded += 1
                r = await client.request(
                    method, url, content=body, headers={"content-type": "application/json"}
                )
            await self._respond(writer, r.status_code, r.content)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.transport.abort()
            return
        finally:
            if not writer.transport.is_closing():
                writer.close()

    async def _respond(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, extra: dict | None = None
    ) -> None:
        head = [f"HTTP/1.1 {status} X", "Content-Type: application/json",
                f"Content-Length: {len(body)}", "Connection: close"]  # fmt: skip
        head += [f"{k}: {v}" for k, v in (extra or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()
        # handlers still waiting (a hang) end with the proxy
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None

        def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            self._loop.stop()  # type: ignore[union-attr]

        self._loop.call_soon_threadsafe(shutdown)
        self._thread.join(10)

"""The gateway's side towards the endpoint: one HTTP client, retries, the adaptive limit.

:class:`Upstream` sends a framework's call on to the endpoint and never raises for an
upstream fault: it retries upstream 429s, 5xx answers, timeouts and dropped connections with
tenacity (exponential backoff with jitter; a 429's ``Retry-After`` is honoured), then passes
the failure on as a status, a body and an error text. It limits concurrent upstream requests
per endpoint adaptively (:class:`AdaptiveLimit`, AIMD on 429s), bounds each call (queue,
attempts and back-off together) by ``call_timeout_s`` (a 504 with a recorded error when it is
over), and splits each call's latency into upstream time, queueing and back-off
(:class:`CallClock`). Everything that comes back is redacted (the gateway's ``redact``)
before anyone sees it.
"""

from __future__ import annotations

import asyncio
import email.utils
import inspect
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential_jitter

from mastif.core.timing import InFlight
from mastif.providers.endpoint import Endpoint
from mastif.providers.forced_choice import ForcedChoice
from mastif.providers.scripted import NODE_HEADER

#: the backoff's base wait (0.5 s), under the name the installed tenacity reads: 9.2 renamed
#: ``initial`` to ``multiplier`` (and warns about the old name); google-genai caps tenacity
#: below 9.2, so Google ADK's environment has 9.1
_BASE_WAIT = {
    "multiplier" if "multiplier" in inspect.signature(wait_exponential_jitter).parameters
    else "initial": 0.5
}  # fmt: skip

#: a 429's Retry-After longer than this is capped (a run has its own total timeout)
MAX_RETRY_AFTER_S = 120.0
#: 429s a request may meet beyond ``retries``: rate limits are expected in big grids and
#: are waited out, errors are not
THROTTLE_RETRIES = 8
RETRY_STATUSES = frozenset({408, 409, 425, 429})


@dataclass(eq=False)  # by identity: a run's calls in flight are a set of them
class CallClock:
    """Where one call's time went so far; ``phase`` is running since ``since``."""

    started: float  # perf_counter at the call's arrival
    attempts: int = 0
    upstream_s: float = 0.0
    queue_s: float = 0.0
    backoff_s: float = 0.0
    phase: str | None = None  # "upstream" | "queue" | "backoff" while one runs
    since: float = 0.0

    def enter(self, phase: str) -> None:
        self.phase, self.since = phase, time.perf_counter()

    def leave(self) -> None:
        if self.phase is not None:
            name = f"{self.phase}_s"
            setattr(self, name, getattr(self, name) + time.perf_counter() - self.since)
            self.phase = None

    def so_far(self, run_t0: float) -> InFlight:
        """Its parts up to now, the running phase included (for a run that ends now)."""
        parts = {"upstream_s": self.upstream_s, "queue_s": self.queue_s,
                 "backoff_s": self.backoff_s}  # fmt: skip
        if self.phase is not None:
            parts[f"{self.phase}_s"] += time.perf_counter() - self.since
        return InFlight(started_s=self.started - run_t0, **parts)


class UpstreamError(Exception):
    def __init__(self, status: int, body: bytes, retry_after_s: float | None = None) -> None:
        super().__init__(f"upstream answered {status}")
        self.status = status
        self.body = body
        self.retry_after_s = retry_after_s


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class AdaptiveLimit:
    """At most ``limit`` requests in flight, ``1 <= limit <= ceiling``; AIMD on 429s.

    A 429 halves the limit and pauses every new request until its ``Retry-After`` has
    passed; ``limit`` successes in a row raise it by one. Lives on the gateway's loop.
    """

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = ceiling
        self.active = 0
        self.throttles = 0
        self.lowest = ceiling
        self._streak = 0
        self._paused_until = 0.0
        self._cond = asyncio.Condition()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        async with self._cond:
            while True:
                pause = self._paused_until - loop.time()
                if pause > 0:
                    try:
                        await asyncio.wait_for(self._cond.wait(), pause)
                    except TimeoutError:
                        pass
                    continue
                if self.active < self.limit:
                    self.active += 1
                    return
                await self._cond.wait()

    async def release(self, outcome: str, retry_after_s: float | None = None) -> None:
        """``outcome``: ok | throttled (a 429) | error (5xx, timeout, dropped connection)."""
        loop = asyncio.get_running_loop()
        async with self._cond:
            self.active -= 1
            if outcome == "throttled":
                self.throttles += 1
                self.limit = max(1, self.limit // 2)
                self.lowest = min(self.lowest, self.limit)
                self._streak = 0
                if retry_after_s:
                    until = loop.time() + min(retry_after_s, MAX_RETRY_AFTER_S)
                    self._paused_until = max(self._paused_until, until)
            elif outcome == "ok":
                self._streak += 1
                if self._streak >= self.limit and self.limit < self.ceiling:
                    self.limit += 1
                    self._streak = 0
            self._cond.notify_all()


class Upstream:
    """The endpoint as the gateway calls it; its client and limit live on the gateway's loop
    while :meth:`open` (the gateway app's lifespan) is entered."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        retries: int,
        request_timeout_s: float,
        call_timeout_s: float | None,
        redact: Callable[[Any], Any],
    ) -> None:
        """``redact``: what every text from upstream goes through (bytes or str)."""
        self.endpoint = endpoint
        self.retries = retries
        self.request_timeout_s = request_timeout_s
        self.call_timeout_s = call_timeout_s
        self.redact = redact
        #: llama-server's tool calls by a forced first choice, when the model asks for it
        self.forced_choice = (
            ForcedChoice(endpoint.tool_call_template) if endpoint.tool_call_template else None
        )
        self.requests = 0  # HTTP requests sent to the endpoint, retries included
        self.limit: AdaptiveLimit | None = None
        self._client: httpx.AsyncClient | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """The endpoint's HTTP client and the adaptive limit, for the block."""
        headers = {}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        # at most max_connections requests are in flight (the adaptive limit); all kept
        # alive (httpcore 1.0 closes idle ones once the pool exceeds max_keepalive)
        size = self.endpoint.max_connections + 4
        self._client = httpx.AsyncClient(
            base_url=self.endpoint.base_url,
            headers=headers,
            timeout=self.request_timeout_s,
            limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
        )
        self.limit = AdaptiveLimit(self.endpoint.max_connections)
        try:
            yield
        finally:
            await self._client.aclose()

    async def call(
        self, payload: dict[str, Any], node: str, clock: CallClock
    ) -> tuple[int, bytes, str | None]:
        """:meth:`_attempts` within ``call_timeout_s``: over it, a 504 with the error."""
        try:
            return await asyncio.wait_for(self._attempts(payload, node, clock), self.call_timeout_s)
        except TimeoutError:
            clock.leave()  # the phase the limit cut short still counts
            error = f"request exceeded request_timeout_s={self.call_timeout_s}"
            body = json.dumps({"error": {"message": error, "type": "request_timeout"}})
            return 504, body.encode(), error

    async def _attempts(
        self, payload: dict[str, Any], node: str, clock: CallClock
    ) -> tuple[int, bytes, str | None]:
        """(status, body, error) after retries; never raises for upstream faults.
        ``clock`` gets the attempts and where the time went."""
        throttles = 0

        async def sleep(seconds: float) -> None:
            clock.enter("backoff")
            try:
                await asyncio.sleep(seconds)
            finally:
                clock.leave()

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, UpstreamError) and exc.retry_after_s is not None:
                return min(exc.retry_after_s, MAX_RETRY_AFTER_S)
            return float(wait_exponential_jitter(max=8, jitter=0.5, **_BASE_WAIT)(state))

        def stop(state: RetryCallState) -> bool:
            return state.attempt_number - throttles > self.retries or throttles > THROTTLE_RETRIES

        try:
            async for attempt in AsyncRetrying(
                stop=stop,
                wait=wait,
                retry=retry_if_exception_type((httpx.TransportError, UpstreamError)),
                reraise=True,
                sleep=sleep,
            ):
                with attempt:
                    clock.attempts += 1
                    try:
                        status, body = await self._forward(payload, node, clock)
                    except UpstreamError as exc:
                        if exc.status == 429:
                            throttles += 1
                        raise
            return status, body, None
        except UpstreamError as exc:
            return exc.status, exc.body, f"upstream {exc.status}: {body_snippet(exc.body)}"
        except httpx.TransportError as exc:
            error = self.redact(f"{type(exc).__name__}: {exc}")
            body = json.dumps({"error": {"message": error, "type": "upstream_unreachable"}})
            return 502, body.encode(), error

    async def _forward(
        self, payload: dict[str, Any], node: str, clock: CallClock
    ) -> tuple[int, bytes]:
        assert self._client is not None and self.limit is not None
        clock.enter("queue")
        try:
            await self.limit.acquire()
        finally:
            clock.leave()
        outcome, retry_after = "error", None
        try:
            self.requests += 1
            # a scripted model (providers/scripted.py) answers by node; no one else is told
            headers = {NODE_HEADER: node} if self.endpoint.provider == "scripted" else None
            clock.enter("upstream")
            try:
                if self.forced_choice is not None and self.forced_choice.applies(payload):
                    r = await self.forced_choice.complete(self._client, payload)
                else:
                    r = await self._client.post("/chat/completions", json=payload, headers=headers)
            finally:
                clock.leave()
            if r.status_code == 429:
                outcome = "throttled"
                retry_after = parse_retry_after(r.headers.get("retry-after"))
            elif r.status_code < 500:
                outcome = "ok"
        finally:
            await self.limit.release(outcome, retry_after)
        # where upstream text enters: an endpoint that echoes the key (or the token) in
        # its body puts it nowhere (not in the framework's error, the cache, the call)
        body = self.redact(r.content)
        if r.status_code >= 500 or r.status_code in RETRY_STATUSES:
            raise UpstreamError(r.status_code, body, retry_after)
        return r.status_code, body


def body_snippet(body: bytes, n: int = 300) -> str:
    """The start of an upstream body, as text (for an error message)."""
    return body[:n].decode("utf-8", errors="replace")

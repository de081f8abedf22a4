"""Our OpenAI-compatible gateway on loopback, in front of every model endpoint.

Every framework is pointed at ``{gateway}/r/{run_id}/{node}/v1``. The gateway

* attributes each call to its run and workflow node (from the URL path; a scripted
  endpoint is told the node in the ``X-Mastif-Node`` header),
* records usage (from the upstream API's ``usage``; a count it lacks is None, never 0),
  latency (clock) and outcome per call,
  identically for every framework,
* normalises server quirks (llama.cpp answers 500 to an assistant message that carries
  ``tool_calls`` with ``content`` null or absent; frameworks send exactly that),
* retries upstream 429s, 5xx answers, timeouts and dropped connections with tenacity
  (exponential backoff with jitter; a 429's ``Retry-After`` is honoured), then passes the
  failure on so the run records a classified error,
* limits concurrent upstream requests per endpoint, adaptively: the limit halves on a 429
  (and all requests pause for its ``Retry-After``), then grows back by one after as many
  successes in a row as the limit (AIMD),
* answers from the opt-in response cache when the same request was answered before,
* shows the model stand-ins for strings that differ between jobs (``volatile``: the
  sandbox's ``127.0.0.1:PORT``), so a run's prompts are the same bytes in every job and a
  seeded model takes the same path; answers get the real string back,
* splits each call's latency into upstream time, queueing for a slot of the limit and
  back-off between retries (:class:`CallClock`), for :func:`mastif.core.timing.decompose`,
* bounds each call (queue, attempts and back-off together) by ``call_timeout_s``
  (``generation.request_timeout_s``), answering 504 with a recorded error when it is over;
  ``request_timeout_s`` (``models.<id>.options.request_timeout_s``) bounds one attempt.

It runs uvicorn in a daemon thread with its own event loop, so a framework that blocks its
own thread cannot starve it.

It listens on loopback, where every local process (another user of a shared cluster node)
can reach it, and it adds the real API key, so it serves only the job's own clients:

* each gateway makes a random token at construction (:attr:`Gateway.token`); a request
  must carry it as ``Authorization: Bearer <token>`` (the ``api_key`` of every client the
  job points at the gateway) or is answered 401, with no upstream call and no recorded call;
* a request's run id must be one begun with :meth:`Gateway.begin_run` and not yet ended,
  else 404, with no upstream call either;
* everything that comes back from upstream (bodies, error texts) has the real key and the
  token replaced by ``[redacted]`` (:func:`redact`) before it is returned, cached or
  recorded, so an endpoint that echoes the key puts it in no LLM call, run or log.
"""

from __future__ import annotations

import asyncio
import email.utils
import hmac
import json
import re
import secrets
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential_jitter

from mastif.core.server import ServerThread
from mastif.core.timing import InFlight
from mastif.core.trace import LLMCall
from mastif.providers.cache import ResponseCache
from mastif.providers.endpoint import Endpoint
from mastif.providers.forced_choice import ForcedChoice
from mastif.providers.scripted import NODE_HEADER

#: a 429's Retry-After longer than this is capped (a run has its own total timeout)
MAX_RETRY_AFTER_S = 120.0
#: 429s a request may meet beyond ``retries``: rate limits are expected in big grids and
#: are waited out, errors are not
THROTTLE_RETRIES = 8
RETRY_STATUSES = frozenset({408, 409, 425, 429})
#: what a secret becomes in any text the gateway passes on or records
REDACTED = "[redacted]"
#: a run of at least this many characters of a secret, at its start or its end, is
#: redacted too (an endpoint that echoes a cut key: ``sk-proj-abcdef...``)
MIN_FRAGMENT = 12

_Text = TypeVar("_Text", str, bytes)


def redact(text: _Text, secrets_: list[str] | tuple[str, ...]) -> _Text:
    """``text`` with each of ``secrets_`` replaced by ``[redacted]``: whole, or a piece of at
    least :data:`MIN_FRAGMENT` characters of its start or its end (a key cut short)."""
    for secret in secrets_:
        if not secret:
            continue
        if isinstance(text, bytes):
            text = _redact_one(text, secret.encode(), REDACTED.encode())
        else:
            text = _redact_one(text, secret, REDACTED)
    return text


def _redact_one(text: _Text, secret: _Text, mark: _Text) -> _Text:
    text = text.replace(secret, mark)
    n = len(secret)
    if n <= MIN_FRAGMENT:
        return text
    spans = []
    start = text.find(secret[:MIN_FRAGMENT])
    while start >= 0:  # the key's start, as far as it goes on
        end = start + MIN_FRAGMENT
        while end < len(text) and end - start < n and text[end] == secret[end - start]:
            end += 1
        spans.append((start, end))
        start = text.find(secret[:MIN_FRAGMENT], end)
    end = text.find(secret[-MIN_FRAGMENT:])
    while end >= 0:  # the key's end, with as much of it as comes before
        end += MIN_FRAGMENT
        start = end - MIN_FRAGMENT
        while start > 0 and end - start < n and text[start - 1] == secret[n - (end - start) - 1]:
            start -= 1
        spans.append((start, end))
        end = text.find(secret[-MIN_FRAGMENT:], end)
    out, at = [], 0
    for start, end in sorted(spans):  # overlapping pieces become one mark
        if start >= at:
            out += [text[at:start], mark]
        at = max(at, end)
    return text[:0].join([*out, text[at:]])


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


def normalise_request(
    payload: dict[str, Any], provider: str, server: str | None = None
) -> dict[str, Any]:
    """Mend what frameworks send and a local llama.cpp server mishandles; leave the rest.
    (``server``: the local server; llama-server takes ``tool_choice: "required"`` and
    OpenAI's ``json_schema`` response format as they are, so those two stay.)

    * an assistant message with ``tool_calls`` and ``content`` null/absent gets ``""``
      (llama.cpp answers 500 otherwise);
    * ``max_completion_tokens`` (what newer OpenAI clients send) becomes ``max_tokens`` for
      llama.cpp, which ignores the new name and would generate without a limit;
    * ``tool_choice: "required"`` becomes ``"auto"`` for llama.cpp: its
      chatml-function-calling handler answers 500 to "required", and its "auto" is already
      a grammar-constrained choice between a tool call and a message;
    * OpenAI's ``response_format: {"type": "json_schema", "json_schema": {"schema": S}}``
      becomes llama.cpp's ``{"type": "json_object", "schema": S}`` (same grammar-constrained
      decoding, another spelling);
    * a tool or system message whose content is a list of text parts (OpenAI accepts that;
      langchain-mcp-adapters sends MCP tool results so) becomes their joined text for
      llama.cpp, whose request model takes only a string there (it answers 500).
    """
    for msg in payload.get("messages", []):
        if msg.get("role") == "assistant" and msg.get("tool_calls") and not msg.get("content"):
            msg["content"] = ""
    if provider == "local":
        for msg in payload.get("messages", []):
            content = msg.get("content")
            if msg.get("role") in ("tool", "system") and isinstance(content, list):
                msg["content"] = "".join(
                    part.get("text", "") for part in content if isinstance(part, dict)
                )
        if "max_completion_tokens" in payload:
            limit = payload.pop("max_completion_tokens")
            payload.setdefault("max_tokens", limit)
        if server == "llama-server":
            return payload
        if payload.get("tool_choice") == "required":
            payload["tool_choice"] = "auto"
        fmt = payload.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema", {})
            payload["response_format"] = {"type": "json_object", "schema": schema}
    return payload


class Gateway:
    """``with Gateway(endpoint) as gw: base = gw.base_url_for(run_id, node)``; every client
    pointed there must send ``gw.token`` as its API key (``Authorization: Bearer``)."""

    def __init__(
        self,
        endpoint: Endpoint,
        retries: int = 2,
        request_timeout_s: float = 300.0,
        cache: ResponseCache | None = None,
        call_timeout_s: float | None = None,
    ):
        """``request_timeout_s``: one HTTP attempt to the endpoint (retried when over);
        ``call_timeout_s``: one call from a framework, all its queueing, attempts and
        back-off together (None: no bound but the attempts')."""
        self.endpoint = endpoint
        #: the job's secret: only clients that hold it are served (never in argv, params,
        #: Parquet or logs; it lives in this process only)
        self.token = secrets.token_urlsafe(32)
        self._expected_auth = f"Bearer {self.token}".encode()
        #: what is redacted from everything that comes back from upstream
        self._secrets = tuple(s for s in (endpoint.api_key, self.token) if s)
        self.retries = retries
        self.request_timeout_s = request_timeout_s
        self.call_timeout_s = call_timeout_s
        self.cache = cache
        #: strings that differ between executions of the same run (the sandbox's loopback
        #: origin) -> stable stand-ins. The model never sees them: every request goes
        #: upstream (and into the cache key) with the stand-in, every answer comes back
        #: with the value. So a run's prompts are byte-identical in every job, and a seeded
        #: model takes the same path alone and inside a pipeline (CT comparable, issue 16)
        self.volatile: dict[str, str] = {}
        #: llama-server's tool calls by a forced first choice, when the model asks for it
        self.forced_choice = (
            ForcedChoice(endpoint.tool_call_template) if endpoint.tool_call_template else None
        )
        self.upstream_requests = 0  # HTTP requests sent to the endpoint, retries included
        self.limit: AdaptiveLimit | None = None
        self.port = 0
        self._calls: dict[str, list[LLMCall]] = defaultdict(list)
        self._run_started: dict[str, float] = {}
        #: calls of each run still in the gateway
        self._in_flight: dict[str, set[CallClock]] = defaultdict(set)
        self._lock = threading.Lock()
        self._server: ServerThread | None = None
        self._client: httpx.AsyncClient | None = None

    # -- run bookkeeping (called from the runner's thread) ------------------------------
    def base_url_for(self, run_id: str, node: str) -> str:
        return f"http://127.0.0.1:{self.port}/r/{run_id}/{node}/v1"

    @property
    def auth_headers(self) -> dict[str, str]:
        """The header a plain HTTP client sends to be served (model clients: ``api_key``)."""
        return {"Authorization": f"Bearer {self.token}"}

    def redact(self, text: _Text) -> _Text:
        """``text`` without the endpoint's key or the gateway's token (:func:`redact`)."""
        return redact(text, self._secrets)

    def begin_run(self, run_id: str, started: float | None = None) -> None:
        """``started``: the run's ``time.perf_counter()`` origin (default: now)."""
        with self._lock:
            self._calls.pop(run_id, None)
            self._in_flight.pop(run_id, None)
            self._run_started[run_id] = time.perf_counter() if started is None else started

    def in_flight(self, run_id: str) -> list[InFlight]:
        """The run's calls still in the gateway (a run that timed out), their parts so far;
        call it before :meth:`end_run`."""
        with self._lock:
            run_t0 = self._run_started.get(run_id)
            clocks = list(self._in_flight.get(run_id, ()))
        return [] if run_t0 is None else [c.so_far(run_t0) for c in clocks]

    def end_run(self, run_id: str) -> list[LLMCall]:
        with self._lock:
            self._run_started.pop(run_id, None)
            self._in_flight.pop(run_id, None)
            return self._calls.pop(run_id, [])

    # -- the ASGI app --------------------------------------------------------------------
    def _app(self) -> Starlette:
        async def chat(request: Request) -> Response:
            return await self._chat(request)

        async def models(request: Request) -> Response:
            refused = self._refuse_unauthorised(request)
            if refused is not None:
                return refused
            return JSONResponse({"object": "list", "data": [{"id": self.endpoint.model}]})

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
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

        return Starlette(
            routes=[
                Route("/r/{run_id}/{node}/v1/chat/completions", chat, methods=["POST"]),
                Route("/r/{run_id}/{node}/v1/models", models, methods=["GET"]),
            ],
            lifespan=lifespan,
        )

    def _refuse_unauthorised(self, request: Request) -> Response | None:
        """401 unless the request carries the job's token (compared in constant time)."""
        given = request.headers.get("authorization", "").encode("latin-1")
        if hmac.compare_digest(given, self._expected_auth):
            return None
        message = "mastif gateway: missing or wrong token (Authorization: Bearer <token>)"
        return JSONResponse(
            {"error": {"message": message, "type": "unauthorized"}},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    async def _chat(self, request: Request) -> Response:
        refused = self._refuse_unauthorised(request)
        if refused is not None:
            return refused
        run_id = request.path_params["run_id"]
        node = request.path_params["node"]
        t0 = time.perf_counter()
        with self._lock:
            run_t0 = self._run_started.get(run_id)
        if run_t0 is None:  # never begun, or ended: nobody may spend the key for it
            message = f"mastif gateway: no run {run_id[:100]!r} is open"
            return JSONResponse(
                {"error": {"message": message, "type": "unknown_run"}}, status_code=404
            )
        try:
            payload = normalise_request(
                await request.json(), self.endpoint.provider, self.endpoint.server
            )
        except json.JSONDecodeError as exc:
            return JSONResponse({"error": {"message": f"bad JSON: {exc}"}}, status_code=400)
        if payload.get("stream"):
            # usage must be read from the final body; streaming is not proxied (yet)
            return JSONResponse(
                {"error": {"message": "mastif gateway does not proxy streaming requests"}},
                status_code=400,
            )
        payload["model"] = self.endpoint.model
        if self.volatile:
            payload = json.loads(self._neutralise(json.dumps(payload).encode()))
        key = self._cache_key(payload) if self.cache is not None else None
        cached = self.cache.get(key) if key is not None and self.cache is not None else None
        clock = CallClock(started=t0)
        status, body, error = 502, b"", None
        if cached is not None:
            status, body = 200, cached
        else:
            with self._lock:
                self._in_flight[run_id].add(clock)
            try:
                status, body, error = await self._bounded_call(payload, node, clock)
            finally:
                with self._lock:
                    self._in_flight.get(run_id, set()).discard(clock)
        latency = time.perf_counter() - t0
        prompt_tokens = completion_tokens = None
        if status == 200:
            try:
                usage = json.loads(body).get("usage") or {}
                prompt_tokens = usage_count(usage, "prompt_tokens")
                completion_tokens = usage_count(usage, "completion_tokens")
            except (json.JSONDecodeError, AttributeError):
                error = "upstream body is not JSON"
            if error is None and cached is None and key is not None and self.cache is not None:
                self.cache.put(key, self._neutralise(body))
        elif error is None:
            error = f"upstream {status}: {_snippet(body)}"
        if error is not None:
            error = self.redact(error)
        call = LLMCall(
            node=node,
            started_s=t0 - run_t0,
            latency_s=latency,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            http_status=status,
            error=error,
            attempts=clock.attempts,
            cached=cached is not None,
            upstream_s=clock.upstream_s,
            queue_s=clock.queue_s,
            backoff_s=clock.backoff_s,
        )
        with self._lock:
            # a run that already ended (timed out) keeps nothing: its row is written
            if run_id in self._run_started:
                self._calls[run_id].append(call)
        # the framework gets the origin back (the model answered with the stand-in)
        body = self._restore(body)
        return Response(body, status_code=status, media_type="application/json")

    async def _bounded_call(
        self, payload: dict[str, Any], node: str, clock: CallClock
    ) -> tuple[int, bytes, str | None]:
        """:meth:`_call_upstream` within ``call_timeout_s``: over it, a 504 with the error."""
        try:
            return await asyncio.wait_for(
                self._call_upstream(payload, node, clock), self.call_timeout_s
            )
        except TimeoutError:
            clock.leave()  # the phase the limit cut short still counts
            error = f"request exceeded request_timeout_s={self.call_timeout_s}"
            body = json.dumps({"error": {"message": error, "type": "request_timeout"}})
            return 504, body.encode(), error

    async def _call_upstream(
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
            return float(wait_exponential_jitter(multiplier=0.5, max=8, jitter=0.5)(state))

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
            return exc.status, exc.body, f"upstream {exc.status}: {_snippet(exc.body)}"
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
            self.upstream_requests += 1
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

    # -- the response cache ---------------------------------------------------------------
    def _neutralise(self, data: bytes) -> bytes:
        text = data.decode("utf-8", errors="surrogateescape")
        for value, stand_in in self.volatile.items():
            # a whole origin only: 127.0.0.1:4123 is not the start of 127.0.0.1:41234
            text = re.sub(re.escape(value) + r"(?!\d)", stand_in, text)
        return text.encode("utf-8", errors="surrogateescape")

    def _restore(self, data: bytes) -> bytes:
        text = data.decode("utf-8", errors="surrogateescape")
        for value, stand_in in self.volatile.items():
            text = text.replace(stand_in, value)
        return text.encode("utf-8", errors="surrogateescape")

    def _cache_key(self, payload: dict[str, Any]) -> str:
        request = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return ResponseCache.key(self.endpoint.cache_provider, self._neutralise(request.encode()))

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        # lifespan on: the app's upstream clients open and close with the server
        self._server = ServerThread(self._app(), "gateway", lifespan="on").start()
        assert self._server.port is not None
        self.port = self._server.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()

    def __enter__(self) -> Gateway:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def usage_count(usage: Any, key: str) -> int | None:
    """A token count from a response's ``usage``; None when it is absent or not a count.

    A provider that omits usage (or one of its counts) leaves the count unknown, never 0, so
    the run's tokens, V and cost become null rather than understated (``trace.usage_totals``).
    """
    value = usage.get(key) if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _snippet(body: bytes, n: int = 300) -> str:
    return body[:n].decode("utf-8", errors="replace")

"""Our OpenAI-compatible gateway on loopback, in front of every model endpoint.

Every framework is pointed at ``{gateway}/r/{run_id}/{node}/v1``. The gateway

* attributes each call to its run and workflow node (from the URL path; a scripted
  endpoint is told the node in the ``X-Mastif-Node`` header),
* records usage (from the upstream API's ``usage``; a count it lacks is None, never 0),
  latency (clock) and outcome per call,
  identically for every framework,
* normalises server quirks (older llama.cpp releases answered 500 to an assistant message
  that carries ``tool_calls`` with ``content`` null or absent; frameworks send exactly that),
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
own thread cannot starve it. This module is the app (authorisation, attribution, the cache,
the record of each call); the way to the endpoint -- retries, the adaptive limit, the call
bound and the clock -- is :class:`mastif.providers.upstream.Upstream`.

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

import hmac
import json
import re
import secrets
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mastif.core.server import ServerThread, StartStop
from mastif.core.timing import InFlight
from mastif.core.trace import LLMCall
from mastif.providers.cache import ResponseCache
from mastif.providers.endpoint import Endpoint
from mastif.providers.upstream import AdaptiveLimit, CallClock, Upstream, body_snippet

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


def normalise_request(payload: dict[str, Any], provider: str) -> dict[str, Any]:
    """Mend what frameworks send and a local llama.cpp server mishandles; leave the rest.
    (The two 500s below were llama.cpp's before the release the xllamacpp pin holds, which
    takes both; the mends stay for a ``llama-server`` binary of an older release.)

    * an assistant message with ``tool_calls`` and ``content`` null/absent gets ``""``
      (llama.cpp answered 500);
    * ``max_completion_tokens`` (what newer OpenAI clients send) becomes ``max_tokens`` for
      llama.cpp, which ignores the new name and would generate without a limit;
    * a tool or system message whose content is a list of text parts (OpenAI accepts that;
      langchain-mcp-adapters sends MCP tool results so) becomes their joined text for
      llama.cpp, whose request model took only a string there (it answered 500).

    llama.cpp's server takes ``tool_choice: "required"`` and OpenAI's ``json_schema``
    response format as they are, so those stay.
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
    return payload


class Gateway(StartStop):
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
        self.cache = cache
        #: strings that differ between executions of the same run (the sandbox's loopback
        #: origin) -> stable stand-ins. The model never sees them: every request goes
        #: upstream (and into the cache key) with the stand-in, every answer comes back
        #: with the value. So a run's prompts are byte-identical in every job, and a seeded
        #: model takes the same path alone and inside a pipeline (CT comparable, issue 16)
        self.volatile: dict[str, str] = {}
        #: the way to the endpoint: retries, the adaptive limit, the call bound
        self.upstream = Upstream(
            endpoint,
            retries=retries,
            request_timeout_s=request_timeout_s,
            call_timeout_s=call_timeout_s,
            redact=self.redact,
        )
        self.port = 0
        self._calls: dict[str, list[LLMCall]] = defaultdict(list)
        self._run_started: dict[str, float] = {}
        #: calls of each run still in the gateway
        self._in_flight: dict[str, set[CallClock]] = defaultdict(set)
        self._lock = threading.Lock()
        self._server: ServerThread | None = None

    @property
    def upstream_requests(self) -> int:
        """HTTP requests sent to the endpoint, retries included."""
        return self.upstream.requests

    @property
    def limit(self) -> AdaptiveLimit | None:
        """The endpoint's adaptive concurrency limit (None until the gateway serves)."""
        return self.upstream.limit

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
            async with self.upstream.open():  # the endpoint's client, on the gateway's loop
                yield

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
            payload = normalise_request(await request.json(), self.endpoint.provider)
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
                status, body, error = await self.upstream.call(payload, node, clock)
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
            error = f"upstream {status}: {body_snippet(body)}"
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


def usage_count(usage: Any, key: str) -> int | None:
    """A token count from a response's ``usage``; None when it is absent or not a count.

    A provider that omits usage (or one of its counts) leaves the count unknown, never 0, so
    the run's tokens, V and cost become null rather than understated (``trace.usage_totals``).
    """
    value = usage.get(key) if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value

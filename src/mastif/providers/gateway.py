"""Our OpenAI-compatible gateway on loopback, in front of every model endpoint.

Every framework is pointed at ``{gateway}/r/{run_id}/{node}/v1``. The gateway

* attributes each call to its run and workflow node (from the URL path),
* records usage (from the upstream API's ``usage``), latency (clock) and outcome per call,
  identically for every framework,
* normalises server quirks (llama.cpp answers 500 to an assistant message that carries
  ``tool_calls`` with ``content`` null or absent; frameworks send exactly that),
* retries upstream connection errors and 5xx answers with tenacity, then passes the
  failure on so the run records a classified error,
* limits concurrent upstream requests per endpoint.

It runs uvicorn in a daemon thread with its own event loop, so a framework that blocks its
own thread cannot starve it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from mastif.providers.endpoint import Endpoint
from mastif.providers.local import free_port
from mastif.trace import LLMCall


class UpstreamError(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"upstream answered {status}")
        self.status = status
        self.body = body


def normalise_request(payload: dict[str, Any], provider: str) -> dict[str, Any]:
    """Mend what frameworks send and a local llama.cpp server mishandles; leave the rest.

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
        if payload.get("tool_choice") == "required":
            payload["tool_choice"] = "auto"
        fmt = payload.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema", {})
            payload["response_format"] = {"type": "json_object", "schema": schema}
    return payload


class Gateway:
    """``with Gateway(endpoint) as gw: base = gw.base_url_for(run_id, node)``."""

    def __init__(self, endpoint: Endpoint, retries: int = 2, request_timeout_s: float = 300.0):
        self.endpoint = endpoint
        self.retries = retries
        self.request_timeout_s = request_timeout_s
        self.port = 0
        self._calls: dict[str, list[LLMCall]] = defaultdict(list)
        self._run_started: dict[str, float] = {}
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._client: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None

    # -- run bookkeeping (called from the runner's thread) ------------------------------
    def base_url_for(self, run_id: str, node: str) -> str:
        return f"http://127.0.0.1:{self.port}/r/{run_id}/{node}/v1"

    def begin_run(self, run_id: str) -> None:
        with self._lock:
            self._calls.pop(run_id, None)
            self._run_started[run_id] = time.perf_counter()

    def end_run(self, run_id: str) -> list[LLMCall]:
        with self._lock:
            self._run_started.pop(run_id, None)
            return self._calls.pop(run_id, [])

    # -- the ASGI app --------------------------------------------------------------------
    def _app(self) -> Starlette:
        async def chat(request: Request) -> Response:
            return await self._chat(request)

        async def models(request: Request) -> Response:
            return JSONResponse({"object": "list", "data": [{"id": self.endpoint.model}]})

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            headers = {}
            if self.endpoint.api_key:
                headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
            self._client = httpx.AsyncClient(
                base_url=self.endpoint.base_url, headers=headers, timeout=self.request_timeout_s
            )
            self._semaphore = asyncio.Semaphore(self.endpoint.max_connections)
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

    async def _chat(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        node = request.path_params["node"]
        t0 = time.perf_counter()
        with self._lock:
            run_t0 = self._run_started.get(run_id, t0)
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
        attempts = 0
        status, body, error = 502, b"", None
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self.retries + 1),
                wait=wait_exponential(multiplier=0.5, max=8),
                retry=retry_if_exception_type((httpx.TransportError, UpstreamError)),
                reraise=True,
            ):
                with attempt:
                    attempts += 1
                    status, body = await self._forward(payload)
        except UpstreamError as exc:
            status, body, error = (
                exc.status,
                exc.body,
                f"upstream {exc.status}: {_snippet(exc.body)}",
            )
        except httpx.TransportError as exc:
            status, error = 502, f"{type(exc).__name__}: {exc}"
            body = json.dumps(
                {"error": {"message": error, "type": "upstream_unreachable"}}
            ).encode()
        latency = time.perf_counter() - t0
        prompt_tokens = completion_tokens = None
        if status == 200:
            try:
                usage = json.loads(body).get("usage") or {}
                prompt_tokens = usage.get("prompt_tokens")
                completion_tokens = usage.get("completion_tokens")
            except (json.JSONDecodeError, AttributeError):
                error = "upstream body is not JSON"
        elif error is None:
            error = f"upstream {status}: {_snippet(body)}"
        call = LLMCall(
            node=node,
            started_s=t0 - run_t0,
            latency_s=latency,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            http_status=status,
            error=error,
            attempts=attempts,
        )
        with self._lock:
            self._calls[run_id].append(call)
        return Response(body, status_code=status, media_type="application/json")

    async def _forward(self, payload: dict[str, Any]) -> tuple[int, bytes]:
        assert self._client is not None and self._semaphore is not None
        async with self._semaphore:
            r = await self._client.post("/chat/completions", json=payload)
        if r.status_code >= 500 or r.status_code == 429:
            raise UpstreamError(r.status_code, r.content)
        return r.status_code, r.content

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            self._app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="mastif-gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("gateway did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Gateway:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _snippet(body: bytes, n: int = 300) -> str:
    return body[:n].decode("utf-8", errors="replace")

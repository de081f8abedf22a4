"""What every networked protocol shares: a loopback HTTP server, and meters on both ends of its wire.

A protocol's servers (the MCP tool server, the A2A agents) are ASGI apps served by uvicorn
on 127.0.0.1 inside the stack job's event loop: started when the protocol opens, stopped when
it closes (also when a run fails or the job is cancelled), so no server outlives its job.
Both are :class:`ProtocolServer` s: a router below the meter, a key, an address.

Every request carries its run and node in the URL, ``/r/{run_id}/{node}/...``. The
:class:`WireMeter` middleware strips that prefix (the app below it is mounted at ``/``),
puts ``(run_id, node)`` into the ASGI scope under ``"mastif"`` for the handlers, and counts
per run what went over the wire: HTTP requests, JSON-RPC messages in both directions
(request bodies; response bodies as JSON or as server-sent events) and body bytes both ways.
Handlers report the time the peer spent doing the work itself (running the tool, running the
agent's node) with :meth:`WireMeter.add_inner`.

Protocol time has ONE definition for every protocol: the time the clients waited on the
run's protocol exchanges, minus the peer's own work inside them. The clients' side is
timed by :class:`MeteredTransport`, an httpx transport that every protocol client of a run
is built on (the frameworks' MCP clients through :func:`metered_client_factory`, our A2A
orchestrator's client through :func:`metered_client`; the MCP SDK 2 line's clients are built
on httpx2, httpx's successor with the same API, and get it on httpx2). It times each HTTP
exchange from sending the request to closing the read response, so connection set-up, the
client SDK's encoding and decoding, transport and server handling all count; a GET that
opens a server-sent event stream (MCP's notification channel, open for the whole session
with no one waiting on it) is not an exchange and is not timed. Both ends attribute by the same URL
prefix into the same :class:`WireStats`, so MCP and A2A go through the same measuring code.

Who may talk to a server. Loopback is not private on a shared machine: any local process
(another user's too) can connect to 127.0.0.1. Each server therefore has a
:class:`LoopbackKey`, a random token made with it; :func:`serve_asgi` puts
:class:`RequireKey` in front of the app, which answers 401 (a short JSON error) to every
request without ``Authorization: Bearer <token>`` before anything below it runs or counts
it. The clients mastif builds for a server (:func:`metered_client`, through
:class:`MeteredTransport`) add that header to their requests to that server's address and
to no other. The token is never put in a URL, argv, the environment or a log line, and it
is not in the key's repr. The meter counts bodies only, so the header adds nothing to the
measured bytes.
"""

from __future__ import annotations

import functools
import hmac
import json
import secrets
import ssl
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import httpx
from starlette.responses import PlainTextResponse

from mastif.core.server import serving_in_loop

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: scope key the meter fills with (run_id, node)
SCOPE_KEY = "mastif"


@dataclass
class WireStats:
    """What one run's protocol traffic cost, seen from both ends of the wire."""

    requests: int = 0  # HTTP requests the server received
    messages: int = 0  # JSON-RPC messages, both directions
    bytes_in: int = 0  # request bodies (client -> server)
    bytes_out: int = 0  # response bodies (server -> client)
    exchanges: int = 0  # exchanges the clients timed (requests but event streams)
    exchange_s: float = 0.0  # client-observed time of those exchanges, summed
    inner_s: float = 0.0  # of which the peer doing the work (tool, agent node), not the protocol

    @property
    def protocol_s(self) -> float | None:
        """``exchange_s - inner_s``; None when negative: the peer worked longer than the
        clients waited, so some of the run's exchanges were not timed (e.g. a client not on
        :class:`MeteredTransport`, or an exchange the client abandoned while the peer's work
        went on, as when a run times out). Not clamped: a clamped 0 would look like a free
        protocol."""
        seconds = self.exchange_s - self.inner_s
        return seconds if seconds >= 0 else None

    def add(self, other: WireStats) -> None:
        for name in ("requests", "messages", "bytes_in", "bytes_out", "exchanges",
                     "exchange_s", "inner_s"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))


def run_of_path(path: str) -> tuple[str, str] | None:
    """``(run_id, node)`` of a ``/r/{run_id}/{node}/...`` path, else None."""
    parts = path.split("/", 4)  # "", "r", run_id, node, rest
    if len(parts) < 4 or parts[1] != "r" or not parts[2] or not parts[3]:
        return None
    return parts[2], parts[3]


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
        # the clients' exchanges are timed in other threads too (CrewAI runs its MCP client
        # in the crew's own event loop)
        self._lock = threading.Lock()

    def for_run(self, run_id: str) -> WireStats:
        return self.stats.setdefault(run_id, WireStats())

    def pop(self, run_id: str) -> WireStats:
        with self._lock:
            return self.stats.pop(run_id, WireStats())

    def add_inner(self, run_id: str, seconds: float) -> None:
        with self._lock:
            self.for_run(run_id).inner_s += seconds

    def add_exchange(self, run_id: str, seconds: float) -> None:
        """One exchange of the run as a client timed it (:class:`MeteredTransport`)."""
        with self._lock:
            stats = self.for_run(run_id)
            stats.exchanges += 1
            stats.exchange_s += seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        attributed = run_of_path(scope["path"])
        if attributed is None:
            await self.app(scope, receive, send)  # unattributed (e.g. a health probe)
            return
        run_id, node = attributed
        parts = scope["path"].split("/", 4)
        rest = "/" + (parts[4] if len(parts) > 4 else "")
        inner = dict(scope)
        inner["path"] = rest
        inner["raw_path"] = rest.encode()
        inner[SCOPE_KEY] = (run_id, node)
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
            messages = count_jsonrpc(bytes(request_body), "application/json")
            messages += count_jsonrpc(bytes(response_body), content_type)
            with self._lock:
                stats = self.for_run(run_id)
                stats.requests += 1
                stats.bytes_in += len(request_body)
                stats.bytes_out += len(response_body)
                stats.messages += messages


class LoopbackKey:
    """The secret of one protocol server: its token, and the one address it is sent to.

    ``origin`` (``http://127.0.0.1:PORT``) is set by :func:`serve_asgi` once the server
    listens; until then no client sends the token anywhere.
    """

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(32)
        self.origin = ""
        self._expected = f"Bearer {self.token}".encode()

    def __repr__(self) -> str:  # never the token: keys end up in reprs of their owners
        return f"LoopbackKey(origin={self.origin!r})"

    def accepts(self, authorization: bytes | None) -> bool:
        """Whether an ``Authorization`` header value carries this key (constant time)."""
        return authorization is not None and hmac.compare_digest(authorization, self._expected)

    def authorization_for(self, url: httpx.URL) -> str | None:
        """``Bearer <token>`` for a request to this key's server, None for any other address."""
        if not self.origin:
            return None
        origin = httpx.URL(self.origin)
        same = (url.scheme, url.host, url.port) == (origin.scheme, origin.host, origin.port)
        return f"Bearer {self.token}" if same else None


class RequireKey:
    """ASGI middleware: a request without the server's key gets 401 and goes no further.

    Outermost, in front of the meter: a refused request runs nothing and is counted for no
    run. Exactly one ``Authorization`` header, equal to ``Bearer <token>``, is accepted.
    """

    MESSAGE = "mastif protocol server: missing or wrong token (Authorization: Bearer <token>)"

    def __init__(self, app: ASGIApp, key: LoopbackKey) -> None:
        self.app = app
        self.key = key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan: no request, nothing to check
            await self.app(scope, receive, send)
            return
        values = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        if len(values) == 1 and self.key.accepts(values[0]):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        # the gateway's shape (mastif.providers.gateway)
        body = json.dumps({"error": {"message": self.MESSAGE, "type": "unauthorized"}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class ProtocolServer:
    """What every protocol server is on the wire: its requests routed by :meth:`route`
    behind the :class:`WireMeter` (a request it does not take gets 404), its
    :class:`LoopbackKey`, and its address once :func:`serve_asgi` serves ``meter``."""

    #: what a request that :meth:`route` does not take is told (404)
    NOT_FOUND = "not found"

    def __init__(self) -> None:
        self.meter = WireMeter(self._route_request)
        #: the job's secret for this server: requests without it are refused (401)
        self.key = LoopbackKey()
        self.base_url = ""  # set once the server listens

    def route(self, scope: Scope) -> ASGIApp | None:
        """The app that serves this request (it came through the meter); None: 404."""
        raise NotImplementedError

    def pop_stats(self, run_id: str) -> WireStats:
        """The run's wire counts, forgotten here."""
        return self.meter.pop(run_id)

    async def _route_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self.route(scope)
        if app is None:  # e.g. unattributed traffic: it would have no run to count against
            await PlainTextResponse(self.NOT_FOUND, status_code=404)(scope, receive, send)
            return
        await app(scope, receive, send)


class _TimedStream:
    """A response body that reports its exchange's time once, when the client closes it.

    Used as a stream of the client's HTTP library (:func:`_timed_stream_type`)."""

    def __init__(self, stream: Any, done: Callable[[], None]) -> None:
        self._stream = stream
        self._done: Callable[[], None] | None = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            done, self._done = self._done, None
            if done is not None:
                done()


@functools.cache
def _timed_stream_type(http: ModuleType) -> type[_TimedStream]:
    """:class:`_TimedStream` as an ``AsyncByteStream`` of ``http`` (httpx or httpx2): a
    response reads only a stream of its own library's type."""
    return type("_TimedStream", (_TimedStream, http.AsyncByteStream), {})


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One default (verifying) TLS context for the process's protocol clients: httpx builds
    and loads the certificate store for every transport otherwise (~60 ms CPU each, per run
    and agent), although these clients only talk plain HTTP to loopback servers."""
    return ssl.create_default_context()


class MeteredTransport(httpx.AsyncBaseTransport):
    """The client side of :class:`WireMeter`: times each protocol exchange of a run.

    An exchange lasts from handing the request to the transport (connection set-up
    included) until the client closes the response, having read what it needed; one that
    fails or is cancelled counts until then. A GET answered with an event stream is the
    session's notification channel, which no one waits on: not timed. Requests outside
    ``/r/{run_id}/{node}/`` belong to no run and are not timed.

    Every request to ``key``'s server carries the key (``Authorization: Bearer``), set here,
    under whatever the client SDK built, so no SDK header handling can drop it; requests
    to any other address do not.

    ``http`` is the client's HTTP library: httpx, or httpx2 (the MCP SDK 2 line's), whose
    clients call a transport the same way, so this httpx transport serves them too.
    """

    def __init__(
        self,
        meter: WireMeter,
        key: LoopbackKey,
        inner: httpx.AsyncBaseTransport | None = None,
        http: ModuleType = httpx,
    ) -> None:
        self._meter = meter
        self._key = key
        self._inner = inner or http.AsyncHTTPTransport(verify=shared_ssl_context())
        self._stream_type = _timed_stream_type(http)
        self._byte_stream = http.AsyncByteStream

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        authorization = self._key.authorization_for(request.url)
        if authorization is not None:
            request.headers["Authorization"] = authorization
        attributed = run_of_path(request.url.path)
        if attributed is None:
            return await self._inner.handle_async_request(request)
        run_id = attributed[0]
        t0 = time.perf_counter()
        try:
            response = await self._inner.handle_async_request(request)
        except BaseException:
            self._meter.add_exchange(run_id, time.perf_counter() - t0)
            raise
        content_type = response.headers.get("content-type", "")
        if request.method == "GET" and "text/event-stream" in content_type:
            return response
        assert isinstance(response.stream, self._byte_stream)
        response.stream = self._stream_type(
            response.stream,
            lambda: self._meter.add_exchange(run_id, time.perf_counter() - t0),
        )
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def metered_client(
    meter: WireMeter,
    key: LoopbackKey,
    headers: dict[str, str] | None = None,
    timeout: Any = None,
    auth: Any = None,
    http: ModuleType = httpx,
) -> Any:
    """An ``http`` (httpx or httpx2) client whose exchanges ``meter`` times and that sends
    ``key`` to its server; ``timeout`` and ``auth`` are that library's.

    No proxy from the environment: the servers are on loopback.
    """
    return http.AsyncClient(
        transport=MeteredTransport(meter, key, http=http),
        headers=headers,
        timeout=timeout if timeout is not None else http.Timeout(None, connect=10.0),
        auth=auth,
        trust_env=False,
    )


def metered_client_factory(
    meter: WireMeter, key: LoopbackKey, http: ModuleType = httpx
) -> Callable[..., Any]:
    """:func:`metered_client` bound to ``meter``, ``key`` and ``http``: what a framework's MCP
    client is built with (the MCP SDK's ``httpx_client_factory`` signature; ``http`` is the
    library the installed SDK's clients are built on)."""

    def factory(
        headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
    ) -> Any:
        return metered_client(meter, key, headers, timeout, auth, http)

    return factory


def scope_run(scope: Scope) -> tuple[str, str]:
    """(run_id, node) of a request that came through the meter."""
    try:
        return scope[SCOPE_KEY]
    except KeyError:
        raise LookupError("request did not come through /r/{run_id}/{node}/") from None


@asynccontextmanager
async def serve_asgi(app: ASGIApp, name: str, key: LoopbackKey) -> AsyncIterator[str]:
    """Serve ``app`` on a free loopback port in the running loop; yield ``http://127.0.0.1:PORT``.

    Only requests carrying ``key`` reach ``app`` (:class:`RequireKey`); ``key.origin`` is
    the yielded address, where the key's clients send it. The server
    (:func:`mastif.core.server.serving_in_loop`: no lifespan events, the protocol's context
    manager owns the app's start-up and shut-down) stops when the block exits, whatever
    happened inside it.
    """
    async with serving_in_loop(RequireKey(app, key), name) as port:
        key.origin = f"http://127.0.0.1:{port}"
        try:
            yield key.origin
        finally:
            key.origin = ""  # the port may be someone else's next

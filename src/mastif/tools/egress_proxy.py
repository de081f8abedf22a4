"""A small loopback forward proxy that enforces the URL policy where the browser connects.

Chromium is pointed at this proxy for every request of a run's browser context (loopback
included: Playwright adds ``<-loopback>`` to the bypass list), so each connection the
browser makes — every hop of a redirect chain, every sub-resource, form post, WebSocket
and Worker connection — arrives here first. For each the proxy

1. runs :func:`~mastif.tools.netpolicy.check_url` on the target (for a ``CONNECT host:port``
   tunnel, which Chromium uses for https, wss and ws alike, on ``https://host:port/``), and
2. connects to an address that check returned, never to the host name again, so a name
   that resolves to a public address for the check and to a private one a moment later
   (DNS rebinding) cannot pull the browser to the private one.

A refused target gets ``403`` with a one-line body naming the refusal, and the refusal is
passed to ``on_refused`` (the browser service keeps it per run). A plain ``http://`` request
(absolute-form) is sent upstream in origin-form with ``Connection: close`` on both sides and
only its declared body forwarded, so one client connection never carries a second request
to another host. Every part is bounded: header size, time to send a head, idle time of a
connection, time to connect, concurrent connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from urllib.parse import urlsplit

from mastif.tools.base import ToolError
from mastif.tools.netpolicy import UrlPolicy, check_url

log = logging.getLogger(__name__)

#: a request or response head larger than this is refused
MAX_HEAD_BYTES = 32 * 1024
#: time a client gets to send its request head, an upstream to send its response head
HEAD_TIMEOUT_S = 30.0
#: a connection (or tunnel) with no byte either way for this long is closed
IDLE_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 10.0
#: connections open at once through one proxy; more are answered 503
MAX_CONNECTIONS = 128
_CHUNK = 64 * 1024

# hop-by-hop headers, never forwarded (RFC 9110 §7.6.1), plus the proxy's own
_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


class _Reject(Exception):
    """Answer the client with ``status`` and ``message`` and close."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class EgressProxy:
    """An HTTP forward proxy on 127.0.0.1 that lets through only what ``policy`` allows.

    Start it with :meth:`start` on the event loop it is to serve from; :attr:`url` is then
    the ``proxy.server`` to give Chromium.
    """

    def __init__(
        self,
        policy: UrlPolicy,
        on_refused: Callable[[str], None] | None = None,
        *,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.policy = policy
        self._on_refused = on_refused
        self._max = max_connections
        self._open = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port: int | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the egress proxy has not been started")
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> EgressProxy:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", 0, limit=MAX_HEAD_BYTES + 1024
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*self._tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    # ---------------------------------------------------------------- serving

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._open += 1
        try:
            if self._open > self._max:
                await _answer(writer, 503, "Service Unavailable", "too many connections")
                return
            await self._serve(reader, writer)
        except _Reject as rej:
            await _answer(writer, rej.status, rej.reason, rej.message)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - one broken connection must not stop the proxy
            log.exception("egress proxy: connection failed")
        finally:
            self._open -= 1
            await _close(writer)
            if task is not None:
                self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await _read_head(reader, "request")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _Reject(400, "Bad Request", "malformed request line")
        method, target, version = parts
        headers = _parse_headers(lines[1:])
        log.debug("egress proxy: %s %s", method, target[:200])
        if method.upper() == "CONNECT":
            await self._tunnel(target, reader, writer)
        else:
            await self._forward(method, target, version, headers, reader, writer)

    async def _admit(self, url: str) -> list[str]:
        """The addresses ``url`` may be reached at, or a 403 naming the refusal."""
        try:
            return await asyncio.to_thread(check_url, url, self.policy)
        except ToolError as exc:
            message = str(exc)
            log.debug("egress proxy: %s", message)
            if self._on_refused is not None:
                self._on_refused(message)
            raise _Reject(403, "Forbidden", message) from None

    async def _connect(
        self, addresses: list[str], port: int, name: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect to the first of the *checked* addresses that answers (never to ``name``)."""
        error: Exception | None = None
        for address in addresses:
            try:
                return await asyncio.wait_for(open_upstream(address, port), CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                error = exc
        raise _Reject(502, "Bad Gateway", f"could not connect to {name}:{port}: {error}")

    async def _tunnel(
        self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        parsed = urlsplit(f"//{target}")
        try:
            host, port = parsed.hostname, parsed.port
        except ValueError:
            host, port = None, None
        if not host or port is None:
            raise _Reject(400, "Bad Request", f"bad CONNECT target {target!r}")
        addresses = await self._admit(f"https://{parsed.netloc}/")
        up_reader, up_writer = await self._connect(addresses, port, host)
        try:
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            await _pipe_both(reader, writer, up_reader, up_writer)
        finally:
            await _close(up_writer)

    async def _forward(
        self,
        method: str,
        target: str,
        version: str,
        headers: list[tuple[str, str]],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        parts = urlsplit(target)
        if parts.scheme.lower() != "http" or not parts.hostname:
            raise _Reject(400, "Bad Request", f"not an absolute http:// URL: {target[:200]!r}")
        names = {k.lower() for k, _ in headers}
        if "transfer-encoding" in names:
            raise _Reject(411, "Length Required", "chunked request bodies are not proxied")
        if "upgrade" in names:
            # Chromium tunnels ws:// through CONNECT (checked above); nothing else upgrades
            raise _Reject(501, "Not Implemented", "protocol upgrades go through CONNECT")
        addresses = await self._admit(target)
        try:
            port = parts.port or 80
        except ValueError:
            raise _Reject(400, "Bad Request", "invalid port") from None
        length = _content_length(headers)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        out = [f"{method} {path} {version}"]
        out += [f"{k}: {v}" for k, v in headers if k.lower() not in _HOP]
        out.append("Connection: close")
        up_reader, up_writer = await self._connect(addresses, port, parts.hostname)
        try:
            up_writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            await _copy_exactly(reader, up_writer, length)
            response = await _read_head(up_reader, "response")
            status_line, *rest = response.decode("latin-1").split("\r\n")
            back = [status_line]
            back += [
                f"{k}: {v}"
                for k, v in _parse_headers(rest)
                if k.lower() not in _HOP or k.lower() == "transfer-encoding"
            ]
            back.append("Connection: close")
            writer.write(("\r\n".join(back) + "\r\n\r\n").encode("latin-1"))
            # the response runs to the upstream's close (we asked for it); nothing more is
            # read from the client, so its connection cannot carry a second request
            await _pipe(up_reader, writer)
        finally:
            await _close(up_writer)


async def open_upstream(
    address: str, port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open a TCP connection to an IP address literal (a seam for tests)."""
    return await asyncio.open_connection(address, port, limit=MAX_HEAD_BYTES + 1024)


# ------------------------------------------------------------------- helpers


async def _read_head(reader: asyncio.StreamReader, what: str) -> bytes:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
    except asyncio.LimitOverrunError:
        raise _Reject(
            431, "Headers Too Large", f"{what} head over {MAX_HEAD_BYTES} bytes"
        ) from None
    except asyncio.IncompleteReadError as exc:
        if what == "response":
            raise _Reject(502, "Bad Gateway", "the upstream closed before answering") from None
        raise exc
    except TimeoutError:
        if what == "response":
            raise _Reject(504, "Gateway Timeout", "the upstream did not answer in time") from None
        raise
    if len(head) > MAX_HEAD_BYTES:
        raise _Reject(431, "Headers Too Large", f"{what} head over {MAX_HEAD_BYTES} bytes")
    return head


def _parse_headers(lines: list[str]) -> list[tuple[str, str]]:
    headers = []
    for line in lines:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise _Reject(400, "Bad Request", "malformed header line")
        headers.append((name, value.strip()))
    return headers


def _content_length(headers: list[tuple[str, str]]) -> int:
    values = {v for k, v in headers if k.lower() == "content-length"}
    if not values:
        return 0
    if len(values) > 1 or not next(iter(values)).isdigit():
        raise _Reject(400, "Bad Request", "bad Content-Length")
    return int(next(iter(values)))


async def _copy_exactly(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    while n > 0:
        data = await asyncio.wait_for(reader.read(min(n, _CHUNK)), IDLE_TIMEOUT_S)
        if not data:
            raise ConnectionError("client closed mid-body")
        writer.write(data)
        await writer.drain()
        n -= len(data)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        data = await asyncio.wait_for(reader.read(_CHUNK), IDLE_TIMEOUT_S)
        if not data:
            return
        writer.write(data)
        await writer.drain()


async def _pipe_both(
    c_reader: asyncio.StreamReader,
    c_writer: asyncio.StreamWriter,
    u_reader: asyncio.StreamReader,
    u_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until either side closes or idles out, then stop both."""
    tasks = [
        asyncio.ensure_future(_pipe(c_reader, u_writer)),
        asyncio.ensure_future(_pipe(u_reader, c_writer)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str, message: str) -> None:
    body = (message + "\n").encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1")
    with contextlib.suppress(Exception):
        writer.write(head + body)
        await asyncio.wait_for(writer.drain(), 5)


async def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 5)

"""HTTP for web tools: every URL and every redirect hop passes the URL policy, and the
connection goes to the address that passed it.

All tools that fetch over HTTP (``requests_get``, ``beautifulsoup_scraper``, ``pdf_reader``,
``wikipedia``, ``arxiv``, ``pubmed``, ``web_search`` in sandbox mode) go through
:class:`HttpFetcher`, so the SSRF rule of :mod:`mastif.tools.netpolicy` has one
enforcement point:

* **Redirects** are followed here, at most :data:`MAX_REDIRECTS`, each hop checked.
* **DNS rebinding**: :func:`~mastif.tools.netpolicy.check_url` resolves the host and checks
  every address; the socket is then opened to those addresses only (a network backend that
  ignores the name), never to a second resolution of the name. The URL keeps its host
  name, so the ``Host`` header, TLS SNI and certificate verification use the name as usual.
* **Size**: the body is streamed and decoded here (only ``gzip`` and ``deflate`` are asked
  for and accepted), with a bound on each decoded piece; the fetch stops as soon as the
  raw or the decoded body passes :data:`MAX_BYTES`, and a declared ``Content-Length``
  above it is refused before reading. A small compressed body cannot expand in memory.
* **Time**: ``timeout_s`` is an overall deadline for the whole call (every hop, connect,
  TLS, headers and body): every socket operation waits at most until the deadline, so a
  server dripping a byte at a time cannot hold the call past it.

No proxy from the environment is used: a proxy would resolve the name itself.

Failures (refused URL, DNS, connection, TLS, timeout, oversize body, HTTP status >= 400)
raise :class:`ToolError`, which ``Tool.invoke`` turns into a failed call in the trace. The
returned :class:`httpx.Response` has its (decoded, capped) content already read.

``cookies`` are per fetcher and per ``host:port``: the web environment gives each run a
fetcher carrying that run's sandbox session cookie for the sandbox's address only, so runs
never share server-side state and the cookie never leaves for another host. Cookies a
server sets are kept for the later hops of the same call only, keyed by host name.
"""

from __future__ import annotations

import ssl
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from mastif.tools.base import ToolError
from mastif.tools.netpolicy import UrlPolicy, check_url

USER_AGENT = "mastif/0.1 (agent benchmark; +https://github.com/mastif)"
MAX_REDIRECTS = 5
MAX_BYTES = 5 * 1024 * 1024
#: the content codings asked for and decoded (each with a bound on its output)
ACCEPT_ENCODING = "gzip, deflate"
#: at most this many decoded bytes come out of the decoder at once
_PIECE = 64 * 1024
# headers that describe the encoded body, not the decoded content the caller gets
_ENCODED_BODY_HEADERS = (b"content-encoding", b"content-length", b"transfer-encoding")


def _human(n: int) -> str:
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


class _TooLarge(Exception):
    pass


class _DeadlinePassed(Exception):
    pass


def _remaining(deadline: float, timeout: float | None, exc: type[Exception]) -> float:
    """``timeout`` cut to the time left before ``deadline``; ``exc`` once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise exc("the overall deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every read, write and TLS handshake ends by ``deadline``."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        timeout = _remaining(self._deadline, timeout, httpcore.ReadTimeout)
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        timeout = _remaining(self._deadline, timeout, httpcore.WriteTimeout)
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _remaining(self._deadline, timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(
            self._inner.start_tls(ssl_context, server_hostname, timeout), self._deadline
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Opens TCP connections to the checked ``addresses`` on the checked ``port`` only.

    httpcore passes the URL's host name; it is ignored, so the name is never resolved a
    second time (DNS rebinding). Addresses are tried in order, as a resolver's list would.
    """

    def __init__(self, addresses: list[str], port: int, deadline: float) -> None:
        self._addresses = addresses
        self._port = port
        self._deadline = deadline
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        if port != self._port:
            # the URL parser of httpx read another port than the policy check did
            raise httpcore.ConnectError(
                f"port {port} of {host} is not the checked port {self._port}"
            )
        error: Exception = httpcore.ConnectError(f"no checked address for {host}")
        for address in self._addresses:
            try:
                stream = self._inner.connect_tcp(
                    address,
                    port,
                    _remaining(self._deadline, timeout, httpcore.ConnectTimeout),
                    local_address,
                    socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
                continue
            return _DeadlineStream(stream, self._deadline)
        raise error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("web tools do not connect to Unix sockets")

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, min(seconds, self._deadline - time.monotonic())))


class _Inflater:
    """Incremental gzip/deflate decoding that never returns more than :data:`_PIECE` bytes
    per piece, however much a compressed chunk expands (zlib's ``max_length``)."""

    def __init__(self, coding: str) -> None:
        self._gzip = coding in ("gzip", "x-gzip")
        self._first = True
        wbits = zlib.MAX_WBITS | 16 if self._gzip else zlib.MAX_WBITS
        self._zlib = zlib.decompressobj(wbits)

    def feed(self, data: bytes) -> Iterator[bytes]:
        first, self._first = self._first, False
        try:
            piece = self._zlib.decompress(data, _PIECE)
        except zlib.error:
            if self._gzip or not first:
                raise
            # "deflate" sent as raw deflate without the zlib wrapper, as some servers do
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            piece = self._zlib.decompress(data, _PIECE)
        while piece:
            yield piece
            if not self._zlib.unconsumed_tail and len(piece) < _PIECE:
                return  # all input used and all its output given
            piece = self._zlib.decompress(self._zlib.unconsumed_tail, _PIECE)

    def flush(self) -> Iterator[bytes]:
        yield from self.feed(b"")


class _Identity:
    def feed(self, data: bytes) -> Iterator[bytes]:
        yield data

    def flush(self) -> Iterator[bytes]:
        return iter(())


def _decoder(content_encoding: str, url: str) -> _Inflater | _Identity:
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _Identity()
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return _Inflater(codings[0])
    raise ToolError(
        f"{url} came with Content-Encoding {content_encoding!r}; only gzip and deflate "
        "(the codings asked for) are decoded"
    )


def _ssl_context() -> ssl.SSLContext:
    """Certificate verification as httpx does it by default: certifi's CA bundle, or
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set."""
    return httpx.create_ssl_context()


def _checked_port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme.lower() == "https" else 80)


@dataclass(frozen=True)
class HttpFetcher:
    policy: UrlPolicy = field(default_factory=UrlPolicy)
    #: overall deadline of one call, redirects included
    timeout_s: float = 20.0
    #: ``host:port`` -> cookies sent to that address only
    cookies: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    user_agent: str = USER_AGENT

    def _cookie_header(self, url: str) -> dict[str, str]:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        jar = self.cookies.get(f"{parts.hostname}:{port}")
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())} if jar else {}

    def get(
        self,
        url: str,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """GET ``url`` following at most :data:`MAX_REDIRECTS` redirects, each hop checked.

        Returns the final response (status < 400); raises :class:`ToolError` otherwise.
        """
        return self.request("GET", url, params=params, headers=headers)

    def post(
        self, url: str, data: Mapping[str, str] | None = None, json: object | None = None
    ) -> httpx.Response:
        return self.request("POST", url, data=data, json=json)

    def request(
        self,
        method: str,
        url: str,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        data: Mapping[str, str] | None = None,
        json: object | None = None,
        content: bytes | None = None,
        raise_for_status: bool = True,
    ) -> httpx.Response:
        """One call, redirects followed (each hop checked and pinned to its checked address).

        ``content``: a raw body (for a client that encodes its own, e.g. ``requests``).
        ``raise_for_status=False`` returns a final status >= 400 with its (capped) body
        instead of raising, for a client library that reads error answers itself.
        """
        deadline = time.monotonic() + self.timeout_s
        send_headers = {
            "Accept": "*/*",
            "User-Agent": self.user_agent,
            **(headers or {}),
            "Accept-Encoding": ACCEPT_ENCODING,
        }
        jar = httpx.Cookies()
        for _ in range(MAX_REDIRECTS + 1):
            addresses = check_url(url, self.policy)
            hop_headers = {**send_headers, **self._cookie_header(url)}
            if "Cookie" in hop_headers and (given := (headers or {}).get("Cookie")):
                hop_headers["Cookie"] = f"{given}; {hop_headers['Cookie']}"
            try:
                request = httpx.Request(
                    method,
                    url,
                    params=params,
                    headers=hop_headers,
                    data=data,
                    json=json,
                    content=content,
                )
            except httpx.InvalidURL as exc:
                raise ToolError(f"refused {url!r}: {exc}") from None
            jar.set_cookie_header(request)
            try:
                response = self._send(
                    request,
                    addresses,
                    _checked_port(url),
                    deadline,
                    read_errors=not raise_for_status,
                )
            except (httpcore.TimeoutException, _DeadlinePassed):
                raise ToolError(f"timed out after {self.timeout_s:g}s fetching {url}") from None
            except _TooLarge:
                raise ToolError(
                    f"{url} is larger than {_human(MAX_BYTES)} (the cap on a fetched body)"
                ) from None
            except zlib.error as exc:
                raise ToolError(f"could not decode the compressed body of {url}: {exc}") from None
            except (
                httpcore.NetworkError,
                httpcore.ProtocolError,
                httpcore.ProxyError,
                httpcore.UnsupportedProtocol,
            ) as exc:
                raise ToolError(f"could not fetch {url}: {type(exc).__name__}: {exc}") from None
            jar.extract_cookies(response)
            if response.is_redirect:
                url = urljoin(str(response.url), response.headers["location"])
                method, params, data, json, content = "GET", None, None, None, None
                continue
            if response.status_code >= 400 and raise_for_status:
                raise ToolError(f"HTTP {response.status_code} {response.reason_phrase} from {url}")
            return response
        raise ToolError(f"more than {MAX_REDIRECTS} redirects from {url}")

    def _send(
        self,
        request: httpx.Request,
        addresses: list[str],
        port: int,
        deadline: float,
        read_errors: bool = False,
    ) -> httpx.Response:
        """One hop, to ``addresses``; the body is read (capped) only for a final answer
        (an error status's too when ``read_errors``)."""
        backend = _PinnedBackend(addresses, port, deadline)
        url = httpcore.URL(
            scheme=request.url.raw_scheme,
            host=request.url.raw_host,
            port=request.url.port,
            target=request.url.raw_path,
        )
        timeout = {key: self.timeout_s for key in ("connect", "read", "write", "pool")}
        tls = _ssl_context() if request.url.scheme == "https" else None
        with (
            httpcore.ConnectionPool(ssl_context=tls, network_backend=backend) as pool,
            pool.stream(
                request.method,
                url,
                headers=request.headers.raw,
                content=request.read(),
                extensions={"timeout": timeout},
            ) as answer,
        ):
            head = httpx.Response(answer.status, headers=answer.headers, request=request)
            body = b""
            if not (head.is_redirect or (head.status_code >= 400 and not read_errors)):
                body = self._read_capped(answer, head, str(request.url), deadline)
            return httpx.Response(
                answer.status,
                headers=[
                    (k, v) for k, v in answer.headers if k.lower() not in _ENCODED_BODY_HEADERS
                ],
                content=body,
                request=request,
                extensions={
                    k: answer.extensions[k]
                    for k in ("http_version", "reason_phrase")
                    if k in answer.extensions
                },
            )

    @staticmethod
    def _read_capped(
        answer: httpcore.Response, head: httpx.Response, url: str, deadline: float
    ) -> bytes:
        declared = head.headers.get("content-length", "")
        if declared.strip().isdigit() and int(declared) > MAX_BYTES:
            raise _TooLarge
        decoder = _decoder(head.headers.get("content-encoding", ""), url)
        body = bytearray()
        received = 0
        for raw in answer.iter_stream():
            received += len(raw)
            if received > MAX_BYTES:
                raise _TooLarge
            for piece in decoder.feed(raw):
                body += piece
                if len(body) > MAX_BYTES:
                    raise _TooLarge
            if time.monotonic() > deadline:
                raise _DeadlinePassed
        for piece in decoder.flush():
            body += piece
            if len(body) > MAX_BYTES:
                raise _TooLarge
        return bytes(body)

"""The browser reaches no address the URL policy refuses, however the page asks (issue 18).

A real headless Chromium (``/usr/bin/chromium``) through the web tools. Two servers on
127.0.0.1: an *allowed* one (listed in the policy's ``allowed``) whose pages redirect, link,
post, open WebSockets and start Workers towards a *forbidden* one (another loopback port,
not allowed), which records every connection it gets and answers with a secret (an HTML
page, or a WebSocket handshake and a message). Each test asserts that the forbidden server
saw no connection and that no text the model gets contains the secret.

Before the egress proxy (the route guard alone) every test here failed: the forbidden
server was hit and the secret was in the tool's output or the page (items 1, 2, 3); a
page's WebRTC sent STUN datagrams to a loopback UDP port.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mastif.execution.webenv import WebEnvironment
from mastif.tools import Tool, netpolicy
from mastif.tools import browser as browser_mod
from tests.support.memory import measured
from tests.support.servers import QuietHandler, Served, serve
from tests.support.webfixture import live_web_environment

# the Chromium cases are slow; the proxy's own bounds need no browser and stay fast
CHROMIUM = pytest.mark.slow

SECRET = "FORBIDDEN-SECRET-7d41"
REBIND_HOST = "rebind.test"
#: what the rebinding name resolves to while the policy checks it (a public address)
REBIND_PUBLIC = "93.184.215.14"


#: ~250 bytes that make 300,000 visible links (issue 37, item 2)
MANY_LINKS = (
    "<html><body><script>const f = document.createDocumentFragment();"
    "for (let i = 0; i < 300000; i++) { const a = document.createElement('a');"
    "a.href = '/p' + i; a.textContent = 'link ' + i; f.append(a, ' '); }"
    "document.body.append(f);</script></body></html>"
)
#: the same, fewer links, with a main world that lies: String.prototype.slice cuts nothing,
#: every element's innerText is 50 KB, the title is 50 MB, querySelectorAll is wrapped
MANY_LINKS_TAMPERED = (
    "<html><body><script>String.prototype.slice = function () { return String(this); };"
    "const big = 'x '.repeat(25000);"
    "Object.defineProperty(HTMLElement.prototype, 'innerText', {get() { return big; }});"
    "const qsa = document.querySelectorAll.bind(document);"
    "document.querySelectorAll = s => qsa(s);"
    "document.title = 't'.repeat(50000000);"
    "const f = document.createDocumentFragment();"
    "for (let i = 0; i < 2000; i++) { const a = document.createElement('a');"
    "a.href = '/p' + i; a.textContent = 'link ' + i; f.append(a, ' '); }"
    "document.body.append(f);</script></body></html>"
)


class _Forbidden(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ForbiddenHandler)
        self.hits: list[str] = []
        self.port = self.server_address[1]


class _ForbiddenHandler(socketserver.StreamRequestHandler):
    """Record the connection; answer an HTTP page or a WebSocket message holding SECRET."""

    def handle(self) -> None:
        self.request.settimeout(5)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 16384:
            data = self.request.recv(4096)
            if not data:
                break
            head += data
        text = head.decode("latin-1")
        self.server.hits.append(text.split("\r\n", 1)[0] or "(connection)")  # type: ignore[attr-defined]
        key = next(
            (
                line.split(":", 1)[1].strip()
                for line in text.split("\r\n")
                if line.lower().startswith("sec-websocket-key:")
            ),
            None,
        )
        if key is not None:
            accept = base64.b64encode(
                hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
            ).decode()
            self.request.sendall(
                (
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
                ).encode()
            )
            payload = SECRET.encode()
            self.request.sendall(bytes([0x81, len(payload)]) + payload)
            time.sleep(0.5)
            return
        body = f"<html><body><h1>{SECRET}</h1></body></html>".encode()
        self.request.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )


def _allowed_server(forbidden: int, udp: int) -> Served:
    target = f"http://127.0.0.1:{forbidden}/secret"
    ws = f"ws://127.0.0.1:{forbidden}/socket"
    show = "e => { const p = document.createElement('p'); p.textContent = 'got ' + e.data; document.body.appendChild(p); }"
    pages = {
        "/link": '<html><body><a href="/r302">Next page</a></body></html>',
        "/form": (
            '<html><body><form id="f" method="POST" action="/r307">'
            '<input name="q" value="posted"></form>'
            "<script>document.getElementById('f').submit()</script></body></html>"
        ),
        "/ws": f"<html><body><p>socket page</p><script>new WebSocket('{ws}').onmessage = {show};</script></body></html>",
        "/worker": (
            "<html><body><p>worker page</p><script>"
            f"new Worker('/worker.js').onmessage = {show};</script></body></html>"
        ),
    }
    pages["/rtc"] = (
        "<html><body><p>rtc page</p><script>"
        "const pc = new RTCPeerConnection({iceServers: ["
        f"{{urls: 'stun:127.0.0.1:{udp}'}}, "
        f"{{urls: 'turn:127.0.0.1:{forbidden}?transport=tcp', username: 'u', credential: 'p'}}]}});"
        "pc.createDataChannel('x');"
        "pc.createOffer().then(o => pc.setLocalDescription(o));"
        "</script></body></html>"
    )
    pages["/many-links"] = MANY_LINKS
    pages["/many-links-tampered"] = MANY_LINKS_TAMPERED
    worker_js = f"new WebSocket('{ws}').onmessage = e => postMessage(e.data);"

    class Handler(QuietHandler):
        def _send(self, status: int, body: str, ctype: str, **headers: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/r302":
                self._send(302, "", "text/plain", Location=target)
            elif self.path == "/worker.js":
                self._send(200, worker_js, "text/javascript")
            elif self.path in pages:
                self._send(200, pages[self.path], "text/html")
            else:
                self._send(404, "no such page", "text/plain")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == "/r307":
                self._send(307, "", "text/plain", Location=target)
            else:
                self._send(404, "no such page", "text/plain")

    return serve(Handler, poll_interval=0.1)


class _Datagrams:
    """A UDP socket on 127.0.0.1 that counts the datagrams it gets (in a thread)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.sock.recvfrom(2048)
                self.count += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture(scope="module")
def udp() -> Iterator[_Datagrams]:
    server = _Datagrams()
    yield server
    server.close()


@pytest.fixture(scope="module")
def servers(udp: _Datagrams) -> Iterator[tuple[_Forbidden, str]]:
    forbidden = _Forbidden()
    with Served(forbidden, poll_interval=0.1), _allowed_server(forbidden.port, udp.port) as allowed:
        yield forbidden, f"127.0.0.1:{allowed.port}"


@pytest.fixture(scope="module")
def web(servers: tuple[_Forbidden, str]) -> Iterator[WebEnvironment]:
    forbidden, allowed = servers
    with pytest.MonkeyPatch.context() as mp:
        # the rebinding attacker's DNS, second answer: Chromium (when it resolves names
        # itself, as it did before the proxy) finds the rebinding name on loopback
        mp.setattr(
            browser_mod,
            "CHROMIUM_ARGS",
            (*browser_mod.CHROMIUM_ARGS, f"--host-resolver-rules=MAP {REBIND_HOST} 127.0.0.1"),
        )
        env = live_web_environment(allowed, action_timeout_s=5.0)
        yield env
        env.close()


@pytest.fixture(scope="module")
def tools(web: WebEnvironment) -> dict[str, Tool]:
    return {t.name: t for t in web.tools(["web_browser", "web_interaction"])}


@pytest.fixture(scope="module")
def patient_tools(servers: tuple[_Forbidden, str]) -> Iterator[dict[str, Tool]]:
    """The browser tools with time for a page that builds 300,000 links (~4 s here)."""
    env = live_web_environment(servers[1], action_timeout_s=30.0)
    yield {t.name: t for t in env.tools(["web_browser", "web_interaction"])}
    env.close()


@pytest.fixture
def forbidden(servers: tuple[_Forbidden, str]) -> _Forbidden:
    servers[0].hits.clear()
    return servers[0]


@pytest.fixture
def base(servers: tuple[_Forbidden, str]) -> str:
    return f"http://{servers[1]}"


def _visible(result: Any) -> str:
    return f"{result.output}\n{result.error}"


def _page_text(web: WebEnvironment, run_id: str) -> str:
    async def body(page: Any) -> str:
        return await page.inner_text("body")

    return web.browser.call(run_id, body)


def _settle(forbidden: _Forbidden, web: WebEnvironment, run_id: str, s: float = 3.0) -> str:
    """Give the page's scripts time to connect; the page text after that."""
    deadline = time.monotonic() + s
    mark = f"127.0.0.1:{forbidden.port}"
    while time.monotonic() < deadline and not forbidden.hits:
        if any(mark in r for r in web.browser.refused(run_id)):
            break  # the page's attempt was refused: nothing more to wait for
        time.sleep(0.1)
    refused = web.browser.refused(run_id)  # before the next action clears the list
    return _page_text(web, run_id) + "\n" + "\n".join(refused)


@CHROMIUM
def test_redirect_of_a_navigation_is_checked(tools, web, forbidden, base) -> None:
    # before: the tool returned "Page: ... FORBIDDEN-SECRET-7d41" (the 302 was followed)
    result = tools["web_browser"].invoke({"url": f"{base}/r302"}, "sec-redirect")
    assert not result.ok and "refused" in result.error, _visible(result)
    assert SECRET not in _visible(result)
    assert forbidden.hits == []
    assert any("127.0.0.1" in r for r in web.browser.refused("sec-redirect"))


@CHROMIUM
def test_redirect_after_a_click_is_checked(tools, web, forbidden, base) -> None:
    # before: the click landed on the forbidden page and its snapshot held the secret
    run = "sec-click"
    assert tools["web_browser"].invoke({"url": f"{base}/link"}, run).ok
    result = tools["web_interaction"].invoke({"action": "click", "target": "Next page"}, run)
    assert SECRET not in _visible(result)
    assert SECRET not in _page_text(web, run)
    assert forbidden.hits == []


@CHROMIUM
def test_post_form_redirected_by_307_is_checked(tools, web, forbidden, base) -> None:
    # before: the auto-submitted POST was re-sent, body and all, to the forbidden server
    run = "sec-307"
    result = tools["web_browser"].invoke({"url": f"{base}/form"}, run)
    text = _settle(forbidden, web, run)
    assert SECRET not in _visible(result) and SECRET not in text
    assert forbidden.hits == []


@CHROMIUM
def test_websocket_from_a_page_is_checked(tools, web, forbidden, base) -> None:
    # before: the page's WebSocket reached the forbidden port ("got FORBIDDEN-SECRET...")
    run = "sec-ws"
    result = tools["web_browser"].invoke({"url": f"{base}/ws"}, run)
    assert result.ok, result.error
    text = _settle(forbidden, web, run)
    assert SECRET not in text and forbidden.hits == []
    # Chromium tunnels ws:// through CONNECT: refused there, and recorded for the run
    assert f"refused 'https://127.0.0.1:{forbidden.port}/'" in text


@CHROMIUM
def test_websocket_from_a_worker_is_checked(tools, web, forbidden, base) -> None:
    # before: a dedicated Worker's WebSocket reached the forbidden port
    run = "sec-worker"
    result = tools["web_browser"].invoke({"url": f"{base}/worker"}, run)
    assert result.ok, result.error
    text = _settle(forbidden, web, run)
    assert SECRET not in text and forbidden.hits == []


@CHROMIUM
def test_webrtc_from_a_page_reaches_no_private_address(tools, web, forbidden, udp, base) -> None:
    # before: the page's ICE gathering sent STUN datagrams to the loopback UDP port
    run = "sec-rtc"
    result = tools["web_browser"].invoke({"url": f"{base}/rtc"}, run)
    assert result.ok, result.error
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and not (udp.count or forbidden.hits):
        time.sleep(0.1)
    assert udp.count == 0 and forbidden.hits == []


@CHROMIUM
def test_dns_rebinding_connects_to_the_checked_address(tools, web, forbidden, monkeypatch) -> None:
    """A name that is public while the policy checks it and loopback on any other lookup.

    The browser must connect to the address the check returned (here a public one, which
    the test's connection seam refuses at once), never look the name up again: a second
    lookup — Chromium's own (before: the forbidden page's secret came back), or the
    proxy's — lands on the forbidden server.
    """
    real = socket.getaddrinfo
    connected: list[str] = []

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == REBIND_HOST:
            caller = sys._getframe(1).f_code
            address = REBIND_PUBLIC if caller is netpolicy.check_url.__code__ else "127.0.0.1"
            return real(address, port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    try:
        from mastif.tools import egress_proxy
    except ImportError:  # the code before the proxy: nothing to stub
        egress_proxy = None
    if egress_proxy is not None:
        real_open = egress_proxy.open_upstream

        async def seam(address: str, port: int) -> Any:
            connected.append(address)
            if address == REBIND_PUBLIC:  # no internet in tests: the public host is down
                raise ConnectionRefusedError("test: public address unreachable")
            return await real_open(address, port)

        monkeypatch.setattr(egress_proxy, "open_upstream", seam)
    url = f"http://{REBIND_HOST}:{forbidden.port}/secret"
    result = tools["web_browser"].invoke({"url": url}, "sec-rebind")
    assert SECRET not in _visible(result)
    assert forbidden.hits == []
    # the checked (public) address, never the loopback one a second lookup gives
    assert REBIND_PUBLIC in connected and "127.0.0.1" not in connected


# ------------------------------------------- the page listing's bounds (issue 37, item 2)


def _listed_refs(listing: str) -> list[str]:
    return [line for line in listing.splitlines() if line.startswith("[")]


def _measured(tools: dict[str, Tool], url: str, run: str) -> tuple[Any, float, float, float]:
    """The web_browser call's result, time (s), and peak resident growth (MB) of this
    process and of the Playwright driver (nan if it cannot be measured)."""
    result, cost = measured(lambda: tools["web_browser"].invoke({"url": url}, run))
    print(
        f"{url}: {cost.seconds:.2f} s, peak +{cost.harness_mb:.0f} MB, driver +{cost.driver_mb:.0f} MB"
    )
    return result, cost.seconds, cost.harness_mb, cost.driver_mb


@CHROMIUM
@pytest.mark.parametrize(
    ("path", "links"), [("/many-links", 300_000), ("/many-links-tampered", 2000)]
)
def test_a_page_of_many_links_is_listed_within_bounds(patient_tools, base, path, links) -> None:
    """A ~250-byte page that makes 300,000 links (or one whose main world lies to any
    script: ``String.prototype.slice``, ``innerText``, a 50 MB title). Before, every
    element came back to Python: +1,144 MB peak RSS here and +521 MB in the driver, 29 s,
    for the 300,000 links; +536 MB and a 52 MB listing (the whole title) for the lying page.
    Now both grow by under 1 MB."""
    from mastif.tools.snapshot import MAX_LISTED

    tools = patient_tools
    run = f"sec-many{path.replace('/', '-')}"
    assert tools["web_browser"].invoke({"url": f"{base}/link"}, run).ok  # browser warm
    result, elapsed, growth, driver_growth = _measured(tools, f"{base}{path}", run)
    assert result.ok, result.error
    out = result.output
    assert f"listing truncated: first {MAX_LISTED} of {links} links" in out, out[-300:]
    assert len(_listed_refs(out)) <= MAX_LISTED
    assert len(out) < 12_000
    assert growth < 50, f"the harness's peak resident set grew {growth:.0f} MB"
    assert not driver_growth >= 50, f"the driver's peak resident set grew {driver_growth:.0f} MB"
    if "tampered" in path:
        from mastif.tools.snapshot import MAX_TITLE_CHARS

        title = out.splitlines()[0]
        assert len(title) < MAX_TITLE_CHARS + 100 and "title cut at" in title, title[:400]
        assert "x x x" not in out  # no element's text is the page's 50 KB innerText lie
    # the numbers written from the listing's own world are the page's: [2] is /p1
    click = tools["web_interaction"].invoke({"action": "click", "target": "[2]"}, run)
    assert not click.ok and "HTTP 404" in click.error and "/p1" in click.error, click


@CHROMIUM
def test_chromium_starts_with_none_of_the_harness_environment(servers, monkeypatch) -> None:
    """Issue 37: every process of the browser gets an environment of its own. Before, each
    Chromium process held the harness's whole environment, the canary key included."""
    psutil = pytest.importorskip("psutil")
    canary = "sk-canary-browser-" + hashlib.sha256(str(time.time()).encode()).hexdigest()[:12]
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    env = live_web_environment(servers[1], action_timeout_s=10.0, page_chars=500)
    try:
        browser = env.tools(["web_browser"])[0]
        assert browser.invoke({"url": f"http://{servers[1]}/link"}, "sec-env").ok
        chromium = []
        for process in psutil.Process().children(recursive=True):
            # A short-lived child (Chromium's zygote helpers, a test server's worker) may exit
            # between the listing and the look at its name; it then holds no environment.
            with contextlib.suppress(psutil.NoSuchProcess):
                if "chrom" in process.name().lower():
                    chromium.append(process)
        assert chromium, "no Chromium process found"
        for process in chromium:
            with contextlib.suppress(psutil.NoSuchProcess):
                environment = process.environ()
                assert canary not in json.dumps(environment), process.cmdline()[:1]
                assert "HTTPS_PROXY" not in environment and "OPENAI_API_KEY" not in environment
    finally:
        env.close()


def test_a_listing_is_bounded_and_checked_again_in_python() -> None:
    """Whatever the page script sends back, no more than the caps goes further, and an
    answer not shaped like a listing is a failed call."""
    from mastif.tools.base import ToolError
    from mastif.tools.snapshot import (
        MAX_HREF_CHARS,
        MAX_LABEL_CHARS,
        MAX_LISTED,
        MAX_TITLE_CHARS,
        format_snapshot,
        sanitise_snapshot,
    )

    huge = "y" * 1_000_000
    raw = {
        "title": huge,
        "url": "http://a.example/",
        "text": huge,
        "links": [{"ref": i, "text": huge, "href": huge} for i in range(1, 1001)],
        "fields": [
            {"ref": 1001, "kind": "select", "label": huge, "value": "", "options": [huge] * 99}
        ],
        "buttons": [],
    }
    snap = sanitise_snapshot(raw, 2000)
    assert len(snap["links"]) == MAX_LISTED and len(snap["title"]) == MAX_TITLE_CHARS
    assert all(len(x["text"]) <= MAX_LABEL_CHARS for x in snap["links"])
    assert all(len(x["href"]) <= MAX_HREF_CHARS for x in snap["links"])
    out = format_snapshot(snap, 2000)
    assert "listing truncated: first 41 of 1001 links" in out and "(+74 more)" in out
    assert len(out) < 2000 + MAX_LISTED * (MAX_LABEL_CHARS + 2 * MAX_HREF_CHARS) + 5000
    # the page's own cut of the text: the note counts what the whole text loses
    cut = sanitise_snapshot(raw | {"links": [], "truncated": {"text": 5_000_000}}, 2000)
    assert "y\n... [truncated 4998000 characters]\n" in format_snapshot(cut, 2000)
    for bad in (
        None,
        "a" * 100,
        [raw],
        raw | {"links": ["[1] x"]},
        raw | {"links": [{"ref": "1", "text": "a", "href": "/"}]},
        raw | {"title": 7},
        raw | {"truncated": []},
    ):
        with pytest.raises(ToolError, match="malformed"):
            sanitise_snapshot(bad, 2000)


# ------------------------------------------------- the proxy's own bounds (no Chromium)


async def _upstream(seen: list[bytes]) -> asyncio.Server:
    """A loopback server that records what it reads and answers one small page."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        await asyncio.sleep(0.2)  # anything more the client sent would have arrived
        with contextlib.suppress(Exception):
            seen[-1] += await asyncio.wait_for(reader.read(4096), 0.1)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nKeep-Alive: timeout=5\r\n\r\nok")
        await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


async def _exchange(port: int, data: bytes, read_s: float = 3.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    out = b""
    with contextlib.suppress(TimeoutError, ConnectionError):
        while chunk := await asyncio.wait_for(reader.read(65536), read_s):
            out += chunk
    writer.close()
    return out


def test_proxy_sends_one_request_per_connection_and_bounds_heads() -> None:
    from mastif.tools.egress_proxy import MAX_HEAD_BYTES, EgressProxy
    from mastif.tools.netpolicy import UrlPolicy

    async def scenario() -> None:
        seen: list[bytes] = []
        up = await _upstream(seen)
        host = f"127.0.0.1:{up.sockets[0].getsockname()[1]}"
        refused: list[str] = []
        proxy = await EgressProxy(UrlPolicy(allowed=frozenset({host})), refused.append).start()
        assert proxy.port is not None
        # a second request pipelined behind the first, to another (forbidden) host, is
        # never forwarded: the upstream sees one origin-form request with Connection: close
        two = (
            f"GET http://{host}/a HTTP/1.1\r\nHost: {host}\r\nProxy-Connection: keep-alive\r\n\r\n"
            "GET http://127.0.0.1:9/b HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n"
        ).encode()
        answer = await _exchange(proxy.port, two)
        assert answer.startswith(b"HTTP/1.1 200") and b"Connection: close" in answer
        assert b"Keep-Alive" not in answer and answer.endswith(b"ok")
        assert len(seen) == 1 and seen[0].startswith(b"GET /a HTTP/1.1\r\n")
        assert b"Connection: close" in seen[0] and b"Proxy-Connection" not in seen[0]
        assert b"/b" not in seen[0]
        # a forbidden CONNECT: 403 naming the refusal, recorded
        answer = await _exchange(proxy.port, b"CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403") and b"10.0.0.1" in answer
        assert refused and "10.0.0.1" in refused[-1]
        # a head over the cap: 431, not read further
        big = b"GET http://" + host.encode() + b"/ HTTP/1.1\r\nX: " + b"a" * MAX_HEAD_BYTES
        answer = await _exchange(proxy.port, big + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 431")
        # a chunked upload (length unknown, so the end of the request is unknown): 411
        chunked = f"POST http://{host}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        assert (await _exchange(proxy.port, chunked)).startswith(b"HTTP/1.1 411")
        assert len(seen) == 1
        await proxy.close()
        up.close()

    asyncio.run(asyncio.wait_for(scenario(), 20))


def test_proxy_caps_concurrent_connections_and_slow_heads(monkeypatch) -> None:
    from mastif.tools import egress_proxy
    from mastif.tools.egress_proxy import EgressProxy
    from mastif.tools.netpolicy import UrlPolicy

    monkeypatch.setattr(egress_proxy, "HEAD_TIMEOUT_S", 0.5)

    async def scenario() -> None:
        proxy = await EgressProxy(UrlPolicy(), max_connections=2).start()
        idle = [await asyncio.open_connection("127.0.0.1", proxy.port) for _ in range(2)]
        await asyncio.sleep(0.1)
        answer = await _exchange(proxy.port or 0, b"", read_s=2.0)
        assert answer.startswith(b"HTTP/1.1 503"), answer
        for _, writer in idle:
            writer.close()
        await asyncio.sleep(0.2)
        # a client that never finishes its head is dropped after HEAD_TIMEOUT_S
        started = time.monotonic()
        assert await _exchange(proxy.port or 0, b"GET http://x/ HTTP/1.1\r\n", 5.0) == b""
        assert time.monotonic() - started < 2.0
        await proxy.close()

    asyncio.run(asyncio.wait_for(scenario(), 20))

"""The sandbox server's lifecycle, and pages mounted next to the sites."""

from __future__ import annotations

import socket
import threading
from typing import Any

import httpx
import pytest

from mastif.web.app import SESSION_COOKIE, build_app
from mastif.web.server import SandboxServer


def test_server_thread_stops_on_exit() -> None:
    before = set(threading.enumerate())
    with SandboxServer() as srv:
        started = [t for t in threading.enumerate() if t not in before]
        assert started and srv.running
        port = srv.port
        assert srv.host_port == f"127.0.0.1:{port}" and srv.base_url.endswith(f":{port}")
        assert httpx.get(srv.url("/shop/"), trust_env=False).status_code == 200
    assert not srv.running
    assert all(not t.is_alive() for t in started)
    with socket.socket() as sock, pytest.raises(OSError):
        sock.settimeout(1)
        sock.connect(("127.0.0.1", port))
    with pytest.raises(RuntimeError):
        _ = srv.base_url


def test_extra_routes_are_mounted_and_searchable() -> None:
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from mastif.web.search import SearchDocument

    async def hello(request: Any) -> PlainTextResponse:
        return PlainTextResponse("hi")

    app = build_app(
        extra_routes=[Route("/kb/hello", hello)],
        extra_documents=[SearchDocument("/kb/hello", "Zebra facts", "Stripes.")],
    )
    with TestClient(app) as client:
        r = client.get("/kb/hello")
        assert r.text == "hi" and SESSION_COOKIE in r.cookies
        top = client.get("/search/api", params={"q": "zebra"}).json()["results"][0]
        assert top["url"].endswith("/kb/hello")
    assert app.state.store is not None

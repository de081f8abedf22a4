"""Loopback HTTP servers for the tests: one way to serve a handler (or an already bound
``socketserver``) on ``127.0.0.1`` from a daemon thread, from start to stop.

A test that needs a web server of its own (a scripted model, a proxy, a fake hub or search
engine, a page for the browser) writes only its request handler; :func:`serve` binds it on a
free port (chosen by the kernel, so nothing else can take it) and :class:`Served` runs it
until the block ends, then shuts it down and closes its socket, so no thread outlives it.
"""

from __future__ import annotations

import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mastif.core.server import HOST


class Served:
    """``server`` served from a daemon thread between ``start()`` and ``stop()`` (or
    entering and leaving); its port is known from construction (it is already bound)."""

    def __init__(self, server: socketserver.BaseServer, *, poll_interval: float = 0.5) -> None:
        self.server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True
        )

    @property
    def port(self) -> int:
        return self.server.server_address[1]  # type: ignore[index]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> Served:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Served:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(handler: Any, *, poll_interval: float = 0.5) -> Served:
    """``handler`` (a :class:`BaseHTTPRequestHandler` class, or a factory of one) bound on a
    free loopback port, ready to start."""
    return Served(ThreadingHTTPServer((HOST, 0), handler), poll_interval=poll_interval)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that keeps the test output clean (no line per request)."""

    def log_message(self, *args: Any) -> None:
        pass

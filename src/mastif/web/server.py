"""Serve the sandbox on loopback from a background thread.

The benchmark process drives agents (and their HTTP tools) from its main thread, so the
sandbox must run beside it: uvicorn gets its own thread and its own event loop (:class:`mastif.core.server.ServerThread`), binds
``127.0.0.1`` on an ephemeral port (no clashes between parallel benchmark processes) and
is stopped and joined on exit so no thread outlives the ``with`` block.

Usage::

    with SandboxServer() as server:
        sid = server.new_session()            # give a run its own cookie value
        ... agent browses server.base_url with cookie mastif_session=sid ...
        snapshot = server.state(sid)          # what the run's success check sees
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from mastif.core.server import HOST, ServerThread, StartStop
from mastif.web.app import build_app
from mastif.web.search import SearchDocument
from mastif.web.store import SessionStore


class SandboxServer(StartStop):
    """Context manager running :func:`~mastif.web.app.build_app` on ``127.0.0.1:0``.

    ``app`` may be passed to serve an app built elsewhere (it must carry
    ``app.state.store``); otherwise one is built from ``data_dir``, ``extra_routes`` and
    ``extra_documents``.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        extra_routes: Sequence[BaseRoute] = (),
        *,
        extra_documents: Sequence[SearchDocument] = (),
        app: Starlette | None = None,
        startup_timeout_s: float = 15.0,
        shutdown_timeout_s: float = 10.0,
    ) -> None:
        self.app = (
            app
            if app is not None
            else build_app(data_dir, extra_routes, extra_documents=extra_documents)
        )
        self.store: SessionStore = self.app.state.store
        self.startup_timeout_s = startup_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self._server: ServerThread | None = None
        self._port: int | None = None

    # -- addresses

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the sandbox server is not running")
        return self._port

    @property
    def host_port(self) -> str:
        """``"127.0.0.1:PORT"``: what the URL policy allow-list needs."""
        return f"{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """``"http://127.0.0.1:PORT"`` (no trailing slash); task ``start_url`` paths go after it."""
        return f"http://{self.host_port}"

    def url(self, path: str) -> str:
        """Absolute URL of a sandbox path such as a task's ``start_url`` (``/shop/``)."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # -- sessions

    def new_session(self) -> str:
        """A fresh registered session id; send it as the ``mastif_session`` cookie."""
        return self.store.new_session()

    def state(self, session: str) -> dict[str, Any]:
        """Snapshot of a session's state (the empty state for an unknown session)."""
        return self.store.snapshot(session)

    # -- lifecycle (mastif.core.server)

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.running

    def start(self) -> SandboxServer:  # type: ignore[override]
        if self._server is not None:
            raise RuntimeError("the sandbox server was already started")
        # h11: the sandbox's pages are small; its parser is the one every client meets
        self._server = ServerThread(
            self.app,
            "sandbox",
            http="h11",
            startup_timeout_s=self.startup_timeout_s,
            shutdown_timeout_s=self.shutdown_timeout_s,
        ).start()
        self._port = self._server.port
        return self

    def stop(self) -> None:
        """Ask uvicorn to exit and join its thread (forcing exit if it lingers)."""
        if self._server is not None:
            self._server.stop()
        self._port = None

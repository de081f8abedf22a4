"""Serve the sandbox on loopback from a background thread.

The benchmark process drives agents (and their HTTP tools) from its main thread, so the
sandbox must run beside it: uvicorn gets its own thread and its own event loop, binds
``127.0.0.1`` on an ephemeral port (no clashes between parallel benchmark processes) and
is stopped and joined on exit so no thread outlives the ``with`` block.

Usage::

    with SandboxServer() as server:
        sid = server.new_session()            # give a run its own cookie value
        ... agent browses server.base_url with cookie mastif_session=sid ...
        snapshot = server.state(sid)          # what the run's success check sees
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Generator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from mastif.sandbox.app import build_app
from mastif.sandbox.search import SearchDocument
from mastif.sandbox.store import SessionStore

HOST = "127.0.0.1"


class _ThreadServer(uvicorn.Server):
    """uvicorn without signal handling: signals belong to the main thread's owner."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    def install_signal_handlers(self) -> None:  # older uvicorn releases call this
        return None


class SandboxServer:
    """Context manager running :func:`~mastif.sandbox.app.build_app` on ``127.0.0.1:0``.

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
        self._server: _ThreadServer | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
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

    # -- lifecycle

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> SandboxServer:
        if self._thread is not None:
            raise RuntimeError("the sandbox server was already started")
        config = uvicorn.Config(
            self.app,
            host=HOST,
            port=0,
            log_level="warning",
            access_log=False,
            log_config=None,
            lifespan="off",
            loop="asyncio",
            http="h11",
            timeout_graceful_shutdown=2,
        )
        server = _ThreadServer(config)
        self._server = server
        self._thread = threading.Thread(target=self._run, name="mastif-sandbox", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the sandbox server failed to start: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the sandbox server did not start in time")
            time.sleep(0.01)
        self._port = int(server.servers[0].sockets[0].getsockname()[1])
        return self

    def _run(self) -> None:
        assert self._server is not None
        try:
            asyncio.run(self._server.serve())
        except BaseException as exc:  # noqa: BLE001 - SystemExit on bind failure, too
            self._error = exc

    def stop(self) -> None:
        """Ask uvicorn to exit and join its thread (forcing exit if it lingers)."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(self.shutdown_timeout_s)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(self.shutdown_timeout_s)
        if self._thread.is_alive():  # pragma: no cover - uvicorn ignored both requests
            raise RuntimeError("the sandbox server thread did not stop")
        self._port = None

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

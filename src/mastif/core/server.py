"""One way to serve an ASGI app on loopback with uvicorn, start to stop.

mastif serves three kinds of app beside the code that uses them: the model gateway and the
web sandbox on a thread of their own (a framework may block its event loop; the sandbox
must answer while the harness waits), and a protocol's servers (the MCP tool server, the
A2A agents) as tasks in the running event loop. Both ways share what matters:

* the socket is bound here, on ``127.0.0.1`` port 0 (the kernel picks a free port, so no
  other process can take it between choosing and binding), with ``TCP_NODELAY`` (a response
  written in pieces must not wait for the client's delayed ACK: ~40 ms per exchange);
* uvicorn touches neither logging (``log_config=None``: its records go to the job's log
  like any other) nor signals (the job's SIGTERM handler stays in charge);
* start-up waits until uvicorn says it is serving, and fails with the server's own error;
* :class:`StartStop` gives every server the harness starts (these, the local model
  server, the scripted model) the same ``with`` block;
* shut-down asks uvicorn to exit, waits ``shutdown_timeout_s``, then forces it, so no
  thread or task outlives the block.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from types import TracebackType
from typing import Any, Literal, Self

import uvicorn

HOST = "127.0.0.1"
#: seconds a server may take to start, and to stop before it is forced
STARTUP_TIMEOUT_S = 15.0
SHUTDOWN_TIMEOUT_S = 10.0


class QuietServer(uvicorn.Server):
    """uvicorn without signal handling (signals belong to the job's main thread), stopped
    without waiting for its next tick (:meth:`exit_soon`)."""

    _wake: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    def capture_signals(self) -> Any:  # type: ignore[override]
        return nullcontext()

    async def main_loop(self) -> None:
        """uvicorn's ticks (its housekeeping every 0.1 s, then whether to exit), with the
        wait between ticks cut short by :meth:`exit_soon`: uvicorn sleeps a whole tick
        before it sees ``should_exit``, and a stack job stops several servers per run
        (~0.1 s each, a quarter of a scripted run's time in the tests)."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    def exit_soon(self) -> None:
        """Ask the server to exit now (from any thread)."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between
                loop.call_soon_threadsafe(wake.set)

    def install_signal_handlers(self) -> None:  # older uvicorn releases call this
        return None


def bind_loopback() -> socket.socket:
    """A listening-ready TCP socket on a free loopback port, with ``TCP_NODELAY``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((HOST, 0))
    return sock


def make_server(
    app: Any, *, lifespan: Literal["on", "off"] = "off", http: str = "auto"
) -> QuietServer:
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        log_config=None,
        lifespan=lifespan,
        loop="asyncio",
        http=http,
        timeout_graceful_shutdown=2,
    )
    return QuietServer(config)


class StartStop(ABC):
    """``with server: ...`` is ``server.start()``, the block, then ``server.stop()``."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ServerThread(StartStop):
    """An app served on loopback from a thread with its own event loop.

    ``start()`` returns once uvicorn serves (raising its start-up error otherwise);
    ``stop()`` joins the thread. Also a context manager. ``port`` and ``base_url`` are
    known from ``start()`` to ``stop()``.
    """

    def __init__(
        self,
        app: Any,
        name: str,
        *,
        lifespan: Literal["on", "off"] = "off",
        http: str = "auto",
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
    ) -> None:
        self.app = app
        self.name = name
        self.lifespan: Literal["on", "off"] = lifespan
        self.http = http
        self.startup_timeout_s = startup_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.port: int | None = None
        self._server: QuietServer | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError(f"the {self.name} server is not running")
        return f"http://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> ServerThread:  # type: ignore[override]
        if self._thread is not None:
            raise RuntimeError(f"the {self.name} server was already started")
        self._socket = bind_loopback()
        self._server = server = make_server(self.app, lifespan=self.lifespan, http=self.http)
        self._thread = threading.Thread(target=self._run, name=f"mastif-{self.name}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not server.started:
            if not self._thread.is_alive():
                self._close_socket()
                raise RuntimeError(f"the {self.name} server failed to start: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the {self.name} server did not start in time")
            time.sleep(0.01)
        self.port = int(self._socket.getsockname()[1])
        return self

    def _run(self) -> None:
        assert self._server is not None and self._socket is not None
        try:
            asyncio.run(self._server.serve(sockets=[self._socket]))
        except BaseException as exc:  # noqa: BLE001 - SystemExit on a start-up failure, too
            self._error = exc

    def stop(self) -> None:
        """Ask uvicorn to exit and join its thread, forcing the exit if it lingers."""
        if self._server is None or self._thread is None:
            return
        self._server.exit_soon()
        self._thread.join(self.shutdown_timeout_s)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(self.shutdown_timeout_s)
        self._close_socket()
        self.port = None
        if self._thread.is_alive():  # pragma: no cover - uvicorn ignored both requests
            raise RuntimeError(f"the {self.name} server thread did not stop")

    def _close_socket(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


@asynccontextmanager
async def serving_in_loop(
    app: Any, name: str, *, shutdown_timeout_s: float = 5.0
) -> AsyncIterator[int]:
    """Serve ``app`` as a task of the running event loop; yield its loopback port.

    No lifespan events: the caller's context manager owns the app's start-up and shut-down.
    The server stops when the block exits, whatever happened inside it.
    """
    sock = bind_loopback()
    server = make_server(app)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"{name}-server")
    try:
        while not server.started:
            if task.done():
                task.result()  # raises the start-up error
                raise RuntimeError(f"the {name} server stopped during start-up")
            await asyncio.sleep(0.01)
        yield int(sock.getsockname()[1])
    finally:
        server.exit_soon()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=shutdown_timeout_s)
        except (TimeoutError, asyncio.CancelledError):
            server.force_exit = True
            task.cancel()
        finally:
            sock.close()

"""The MCP protocol's tool server: our tools behind a real MCP server on loopback.

Under the ``mcp`` protocol the tools are not called in-process: one :class:`McpToolServer`
per stack job serves them with the official ``mcp`` SDK over streamable HTTP on
127.0.0.1, and each framework reaches them through its own MCP client integration. The
low-level SDK server is used (not FastMCP) so that every tool reaches clients exactly as
defined: its ``description`` and its JSON schema, byte for byte, as ``inputSchema``.

Both SDK lines are served, whichever the framework's environment installed
(:data:`SDK_LINE`, read from the ``mcp`` distribution's version): the 1.x line
(specification 2025-11-25: a client opens a session with ``initialize``; handlers registered
with decorators, their request context from the server) and the 2.x line (2026-07-28: every
request stands alone and declares its client in its ``_meta``, no session; handlers passed to
``Server(...)`` and given their context; the handshake is still served to older clients). The
client factory below builds its clients on the HTTP library of the installed line
(:data:`HTTPX`: httpx for 1.x, httpx2 for 2.x).

Run attribution. A client of run ``r`` at node ``n`` connects to
``{base_url}/r/{r}/{n}/mcp`` (:meth:`McpToolServer.url_for`). The
:class:`~mastif.protocols.wire.WireMeter` in front of the SDK strips that prefix and tags
the request; the ``tools/call`` handler reads ``(run_id, node)`` from the HTTP request
that carried the call (the request context's ``request`` is the Starlette request for HTTP
transports, on both lines). Requests outside ``/r/{run_id}/{node}/mcp`` get 404.

Only mastif's clients are served: the server has a :class:`~mastif.protocols.wire.LoopbackKey`
(:attr:`McpToolServer.key`), every request without it gets 401 before the SDK sees it (no
tool runs, nothing is counted or recorded), and the client factory below sends it.

What is counted, per run: everything the meter counts (HTTP requests, JSON-RPC messages,
body bytes), the time spent inside the tools (``inner_s``), the ``tools/call`` requests
served (:meth:`McpToolServer.calls_served`), and, on the client side, the time the
frameworks' MCP clients waited on each exchange: they are built with
:attr:`McpToolServer.http_client_factory` (the MCP SDK's ``httpx_client_factory``, which
every framework's MCP client passes through), so ``exchange_s - inner_s`` is what MCP cost
the run, defined and measured as for A2A (:mod:`mastif.protocols.wire`). Every call, also of
an unknown tool or with bad arguments, is reported to the ``on_call`` hook: the SDK does not
check the arguments against the schema first (SDK 1: ``validate_input=False``; SDK 2 has no
such check).

Whose client called. The server keeps, per run, what the MCP clients that called for it
declared (``clientInfo`` name and version, protocol version, capabilities) and how they
behaved (sessions, ``tools/list`` and ``tools/call`` requests), and logs it in one line when
the run's counts are taken (:meth:`McpToolServer.pop_stats`): "MCP run ...: client 'mcp'
0.1.0 (protocol 2025-11-25, capabilities: none): 1 session, 1 tools/list, 2 tools/call".
A client declares itself in its ``initialize``, once per session; on the 2026-07-28 protocol
(SDK 2) there is no session and each request declares the client in its ``_meta`` (client
info optional, then "(undeclared)"), so such requests are counted as stateless requests
("3 stateless requests") and the protocol is the request's. Every framework's MCP client
declares the SDK's default name, so what tells them apart in a job's log is the rest
(docs/frameworks.md); the counts are also kept for tests (:meth:`McpToolServer.clients_of`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from types import ModuleType
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from mastif.protocols.wire import (
    SCOPE_KEY,
    ProtocolServer,
    Scope,
    WireStats,
    metered_client_factory,
    scope_run,
    serve_asgi,
)
from mastif.tools import Tool, ToolResult

log = logging.getLogger(__name__)

#: on_call(run_id, node, tool name, arguments as received, result)
ToolCallHook = Callable[[str, str, str, Any, ToolResult], None]

MCP_PATH = "/mcp"
SERVER_NAME = "mastif-tools"

#: the installed MCP SDK's line: 1 (specification 2025-11-25) or 2 (2026-07-28)
SDK_LINE = int(version("mcp").split(".", 1)[0])
#: the HTTP library the installed SDK's clients are built on (and need their httpx client
#: from): httpx2, httpx's successor with the same API, from SDK 2 on
HTTPX: ModuleType = importlib.import_module("httpx2" if SDK_LINE >= 2 else "httpx")


class _DropClosedStandaloneStream(logging.Filter):
    """Silence one SDK false alarm, nothing else.

    When a session ends normally (the client's DELETE) while its GET notification stream
    is open, the SDK closes that stream under its writer and logs the resulting
    ``ClosedResourceError`` with a traceback, once per session (langchain-mcp-adapters
    opens a session per tool call).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (
            record.msg == "Error in standalone SSE writer"
            and isinstance(exc, anyio.ClosedResourceError)
        )


class _QuietInvalidRequests(logging.Filter):
    """One line, not a page, for what a client got wrong (issue 22).

    SDK 1 logs a request that fails validation (e.g. an unknown method) on the root
    logger with pydantic's full report, ~60 lines per request; it is cut to its first
    line. A call of an unknown tool is a failed tool call that ``on_call`` records (the
    model asked for it), not a server problem: its "not listed" warning is dropped.
    (SDK 2 logs neither.)
    """

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        if not isinstance(msg, str):
            return True
        if record.name == "mcp.server.lowlevel.server" and msg.startswith("Tool '%s' not listed"):
            return False
        if record.name == "root" and msg.startswith("Failed to validate request:"):
            record.msg = msg.split("\n", 1)[0] + " (an invalid MCP request, refused)"
            record.args = None
        return True


logging.getLogger("mcp.server.streamable_http").addFilter(_DropClosedStandaloneStream())
logging.getLogger("mcp.server.lowlevel.server").addFilter(_QuietInvalidRequests())
# the SDK logs request validation failures with logging.warning(), i.e. on the root logger;
# the filter only touches that one message
logging.getLogger().addFilter(_QuietInvalidRequests())


#: what a client declared: (client name, client version, protocol version, capabilities)
Declaration = tuple[str, str, str, str]


def _declaration(info: Any, protocol: str, capabilities: Any) -> Declaration:
    """A client's declaration from its ``clientInfo`` and capabilities (either SDK's models,
    None when not declared)."""
    caps = capabilities.model_dump(exclude_none=True) if capabilities is not None else {}
    return (
        info.name if info else "(undeclared)",
        info.version if info else "",
        protocol,
        ", ".join(sorted(caps)) or "none",
    )


@dataclass(frozen=True)
class _Message:
    """A ``tools/list`` or ``tools/call`` request as the SDK handed it over."""

    scope: Scope | None  # of the HTTP request that carried it (None: not over HTTP)
    session: Hashable | None  # its MCP session; None: a 2026-07-28 request, which has none
    declared: Declaration  # by its session's ``initialize``, or (2026-07-28) by the request


@dataclass
class RunClients:
    """What the MCP clients of one run declared and did."""

    #: declaration -> sessions (or stateless requests) declaring it
    declared: Counter[Declaration] = field(default_factory=Counter)
    sessions: set[Hashable] = field(default_factory=set)
    stateless: int = 0  # requests outside any session (2026-07-28)
    lists: int = 0  # tools/list requests
    calls: int = 0  # tools/call requests

    def names(self) -> list[str]:
        """The client names declared, one per distinct declaration."""
        return [name for name, *_ in self.declared]

    def describe(self) -> str:
        who = "; ".join(
            f"client {name!r} {version} (protocol {protocol}, capabilities: {caps})"
            for name, version, protocol, caps in self.declared
        )
        n, k = len(self.sessions), self.stateless
        how = [f"{n} session{'s' if n != 1 else ''}"] if n or not k else []
        how += [f"{k} stateless request{'s' if k != 1 else ''}"] if k else []
        return f"{who}: {', '.join(how)}, {self.lists} tools/list, {self.calls} tools/call"

    def saw(self, message: _Message) -> None:
        """Record who sent ``message``: once per session, every time without one."""
        if message.session is None:
            self.stateless += 1
        elif message.session not in self.sessions:
            self.sessions.add(message.session)
        else:
            return
        self.declared[message.declared] += 1


class McpToolServer(ProtocolServer):
    """Our tools served over MCP streamable HTTP; one per stack job.

    Build it with :func:`open_mcp_server`, which serves it and stops it again.
    """

    # unattributed traffic would have no run to count against
    NOT_FOUND = "MCP is served at /r/{run_id}/{node}/mcp"

    def __init__(self, tools: list[Tool], on_call: ToolCallHook | None = None) -> None:
        super().__init__()
        self._tools = {t.name: t for t in tools}
        self._on_call = on_call
        self._calls: Counter[str] = Counter()
        #: run id -> what the MCP clients that served it declared and did
        self._clients: dict[str, RunClients] = {}
        self._specs = [
            types.Tool(name=t.name, description=t.description, inputSchema=t.parameters)
            for t in tools
        ]
        self._server: Any  # the installed line's Server (generic differently on each)
        if SDK_LINE >= 2:
            self._server = Server(
                SERVER_NAME,
                on_list_tools=self._on_list_tools,
                on_call_tool=self._on_call_tool,
                # a 2026-07-28 tools/call has its Mcp-Param-* headers checked against the
                # tool's schema, found by listing the tools through our handler otherwise:
                # a tools/list no client sent, counted against the run
                get_tool_input_schema=self._input_schema,
            )
        else:
            self._server = Server(SERVER_NAME)
            self._server.list_tools()(self._list_tools_v1)
            # Tool.invoke validates and fails softly; the SDK's check would reject the call
            # before the tool ran and before we could record it
            self._server.call_tool(validate_input=False)(self._call_tool_v1)
        self._manager = StreamableHTTPSessionManager(
            app=self._server,
            # sessions for handshake clients; SDK 2 serves 2026-07-28 requests (chosen by
            # their MCP-Protocol-Version header) without one either way
            stateless=False,
            json_response=False,
            # loopback only: refuse requests whose Host/Origin is not this machine
            security_settings=TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
            ),
        )
        #: what every MCP client of a run must build its httpx (SDK 2: httpx2) client with
        #: (timed exchanges, the key sent)
        self.http_client_factory = metered_client_factory(self.meter, self.key, HTTPX)

    # ------------------------------------------------------------------ public

    def url_for(self, run_id: str, node: str) -> str:
        """The MCP endpoint a client of ``run_id`` at ``node`` connects to."""
        if not self.base_url:
            raise RuntimeError("the MCP tool server has not been served yet")
        for part in (run_id, node):
            # the meter splits the decoded path on "/": a slash would misattribute the run
            if not part or "/" in part:
                raise ValueError(f"run id and node must be non-empty, without '/': {part!r}")
        return f"{self.base_url}/r/{run_id}/{node}{MCP_PATH}"

    def calls_served(self, run_id: str) -> int:
        """``tools/call`` requests handled for ``run_id`` (unknown tools and failures too;
        kept after :meth:`pop_stats`)."""
        return self._calls.get(run_id, 0)

    def clients_of(self, run_id: str) -> RunClients | None:
        """What the MCP clients of ``run_id`` declared and did (until :meth:`pop_stats`)."""
        return self._clients.get(run_id)

    def pop_stats(self, run_id: str) -> WireStats:
        """The run's wire counts, forgotten here; what its MCP clients declared and did is
        logged (one line) and forgotten too."""
        clients = self._clients.pop(run_id, None)
        if clients is not None:
            log.info("MCP run %s: %s", run_id, clients.describe())
        return super().pop_stats(run_id)

    # ------------------------------------------------------------- MCP handlers

    async def _list_tools_v1(self) -> list[types.Tool]:
        return self._list(self._message_v1())

    async def _call_tool_v1(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await self._call(self._message_v1(), name, arguments)

    async def _on_list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._list(self._message_v2(ctx)))

    async def _on_call_tool(self, ctx: Any, params: Any) -> types.CallToolResult:
        return await self._call(self._message_v2(ctx), params.name, params.arguments or {})

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self._tools.get(name)
        return tool.parameters if tool is not None else None

    def _message_v1(self) -> _Message:
        """The message being handled (SDK 1: the context is the server's, per session)."""
        ctx = self._server.request_context
        params = ctx.session.client_params  # its initialize's
        return _Message(
            scope=getattr(ctx.request, "scope", None),
            session=id(ctx.session),
            declared=_declaration(
                params.clientInfo if params is not None else None,
                params.protocolVersion if params is not None else "?",
                params.capabilities if params is not None else None,
            ),
        )

    @staticmethod
    def _message_v2(ctx: Any) -> _Message:
        """The message ``ctx`` describes (SDK 2: a context per request).

        ``client_params`` are the session's ``initialize`` params, or on 2026-07-28 built
        from the request's ``_meta`` (None when it names no client; capabilities and the
        request's protocol version are there all the same). The SDK's session object is
        made per request; a handshake session is told by its ``Mcp-Session-Id``, which a
        2026-07-28 request does not have.
        """
        request = ctx.request
        params = ctx.session.client_params
        return _Message(
            scope=getattr(request, "scope", None),
            session=request.headers.get("mcp-session-id") if request is not None else None,
            declared=_declaration(
                params.client_info if params is not None else None,
                params.protocol_version if params is not None else ctx.protocol_version,
                ctx.session.client_capabilities,
            ),
        )

    def _list(self, message: _Message) -> list[types.Tool]:
        with contextlib.suppress(LookupError):  # a listing outside a run's path: not ours
            self._seen(self._run_of(message)[0], message).lists += 1
        return self._specs

    async def _call(
        self, message: _Message, name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        run_id, node = self._run_of(message)
        self._calls[run_id] += 1
        self._seen(run_id, message).calls += 1
        tool = self._tools.get(name)
        if tool is None:
            result = ToolResult(False, "", f"unknown tool {name!r}; offered: {sorted(self._tools)}")
        else:
            start = time.perf_counter()
            try:
                # tools may block (python_repl waits on a child process): keep the loop free
                result = await asyncio.to_thread(tool.invoke, arguments, run_id)
            finally:
                self.meter.add_inner(run_id, time.perf_counter() - start)
        if self._on_call is not None:
            try:
                self._on_call(run_id, node, name, arguments, result)
            except Exception:  # noqa: BLE001 - a recorder bug must not turn into a tool failure
                log.exception("on_call hook failed for %s in run %s", name, run_id)
        text = result.output if result.ok else (result.error or f"{name} failed")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], isError=not result.ok
        )

    def _seen(self, run_id: str, message: _Message) -> RunClients:
        """The run's record, with the client of ``message`` recorded."""
        record = self._clients.setdefault(run_id, RunClients())
        record.saw(message)
        return record

    @staticmethod
    def _run_of(message: _Message) -> tuple[str, str]:
        """(run_id, node) of the HTTP request that carried ``message``."""
        if message.scope is None:
            raise LookupError("MCP request did not arrive over HTTP")
        return scope_run(message.scope)

    # --------------------------------------------------------------------- ASGI

    def route(self, scope: Scope) -> Any:
        """The SDK's session manager for the requests to a run's ``/mcp``; None (404) else."""
        path = scope.get("path", "")
        if scope["type"] == "http" and SCOPE_KEY in scope and path.rstrip("/") == MCP_PATH:
            return self._manager.handle_request
        return None

    @asynccontextmanager
    async def _sessions(self) -> AsyncIterator[None]:
        """Keep the session manager's ``run()`` active for the block.

        ``run()`` holds an anyio task group; entered around our caller's block it would
        wrap any exception of that block in an ``ExceptionGroup``, so it runs in a task
        of its own instead.
        """
        ready, stop = asyncio.Event(), asyncio.Event()

        async def run() -> None:
            async with self._manager.run():
                ready.set()
                await stop.wait()

        task = asyncio.create_task(run(), name="mcp-session-manager")
        ready_wait = asyncio.create_task(ready.wait())
        try:
            await asyncio.wait({task, ready_wait}, return_when=asyncio.FIRST_COMPLETED)
            if not ready.is_set():
                task.result()  # raises the start-up error
                raise RuntimeError("MCP session manager stopped during start-up")
            yield
        finally:
            ready_wait.cancel()
            stop.set()  # cancels the sessions; their open streams end
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
            except Exception:  # noqa: BLE001 - do not mask what ended the block
                log.exception("MCP session manager failed while stopping")


@asynccontextmanager
async def open_mcp_server(
    tools: list[Tool], on_call: ToolCallHook | None = None
) -> AsyncIterator[McpToolServer]:
    """Serve ``tools`` over MCP on a free loopback port for the block; stop it afterwards.

    The server stops however the block ends (also on an exception or cancellation):
    sessions are closed first, then the port.
    """
    server = McpToolServer(tools, on_call)
    async with serve_asgi(server.meter, "mcp", server.key) as base_url:
        # sessions stop before the HTTP server, so open session streams do not hold it up
        async with server._sessions():
            server.base_url = base_url
            yield server


__all__ = ["McpToolServer", "ToolCallHook", "open_mcp_server"]

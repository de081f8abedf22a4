"""Protocols decide how things travel: tool calls, and messages between agents.

* ``standard`` -- tools are in-process calls and nodes pass outputs in memory (the baseline);
* ``mcp`` -- the tools are served by a real MCP server (streamable HTTP on loopback) and
  each framework reaches them through its own MCP client integration;
* ``a2a`` -- every agent of the workflow is a real A2A agent (agent card, skill, JSON-RPC
  over HTTP on loopback) and an orchestrator delegates to them with A2A messages.

:func:`open_protocol` opens a protocol for one stack job and yields a
:class:`StackProtocol`: the servers it needs run while the block is open and are stopped
when it exits, whatever happened. Runs attach to it; when a run detaches it gets the
:class:`ProtocolStats` the servers measured for it.

Owns what a framework needs from a protocol (``base.py``), the in-process transport of
``standard`` (``standard.py``), the MCP tool server (``mcp.py``), the A2A agents
(``a2a.py``), the loopback server and the meters both share (``wire.py``), and the optional
protocol message format in the prompt text (``envelope.py``).

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks, mastif.providers.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mastif.protocols.base import ToolTransport
from mastif.protocols.standard import InProcessTransport
from mastif.protocols.wire import WireStats
from mastif.tools import Tool, ToolResult

if TYPE_CHECKING:  # the SDKs load only when their protocol is opened
    from mastif.protocols.a2a import A2AAgents
    from mastif.protocols.mcp import McpToolServer

PROTOCOLS = ("standard", "mcp", "a2a")

log = logging.getLogger(__name__)


@dataclass
class ProtocolStats:
    """What the protocol cost one run (zero for ``standard``), by :mod:`mastif.protocols.wire`."""

    requests: int = 0  # HTTP requests
    messages: int = 0  # protocol (JSON-RPC) messages, both directions
    calls: int = 0  # MCP tools/call served, or A2A messages the agents handled
    bytes_sent: int = 0  # request bodies, client -> server
    bytes_received: int = 0  # response bodies, server -> client
    #: client-observed time of the run's protocol exchanges, summed
    exchange_seconds: float = 0.0
    #: of which the peer's own work (the tool's run, the agent's node), timed by the server
    peer_seconds: float = 0.0
    #: exchange_seconds - peer_seconds, the same for every protocol; None when that is
    #: negative (the measurement missed exchanges; see WireStats.protocol_s)
    seconds: float | None = 0.0

    @classmethod
    def from_wire(cls, calls: int, stats: list[WireStats], run_id: str = "") -> ProtocolStats:
        total = WireStats()
        for s in stats:
            total.add(s)
        seconds = total.protocol_s
        if seconds is None:
            log.warning(
                "run %s: the peers' work (%.6f s) exceeds the clients' timed exchanges "
                "(%.6f s over %d): protocol seconds unknown (null)",
                run_id, total.inner_s, total.exchange_s, total.exchanges,
            )  # fmt: skip
        return cls(total.requests, total.messages, calls, total.bytes_in, total.bytes_out,
                   total.exchange_s, total.inner_s, seconds)  # fmt: skip


class AttachedRun(Protocol):
    """A run in progress (its ``RunContext``), as the protocol's servers need it: where the
    MCP server's record of a call goes."""

    def record_served_tool_call(self, name: str, arguments: Any, result: ToolResult) -> None: ...


#: an A2A agent's work: (agent name, run id, message text, message data) -> answer text
AgentHandler = Callable[[str, str, str, dict[str, Any]], Awaitable[str]]


class StackProtocol:
    """One protocol, open for one stack job."""

    def __init__(self, name: str, tools: list[Tool]) -> None:
        self.name = name
        self.transport: ToolTransport = InProcessTransport(tools)
        self.mcp: McpToolServer | None = None  # under "mcp"
        self.agents: A2AAgents | None = None  # under "a2a"
        self._runs: dict[str, AttachedRun] = {}

    def attach(self, run_id: str, run: AttachedRun) -> None:
        self._runs[run_id] = run

    def attached(self, run_id: str) -> AttachedRun:
        """The run in progress with this id (for an A2A agent's work); LookupError if none."""
        try:
            return self._runs[run_id]
        except KeyError:
            raise LookupError(f"no run {run_id!r} in progress") from None

    def detach(self, run_id: str) -> ProtocolStats:
        """The run's protocol cost (after its agents' work has stopped, so their time is in)."""
        self._runs.pop(run_id, None)
        calls = 0
        if self.mcp is not None:
            calls += self.mcp.calls_served(run_id)
        if self.agents is not None:
            calls += self.agents.messages_received(run_id)
        servers = [s for s in (self.mcp, self.agents) if s is not None]
        return ProtocolStats.from_wire(calls, [s.pop_stats(run_id) for s in servers], run_id)

    def mcp_http_client_factory(self) -> Callable[..., Any] | None:
        """Under ``mcp``: what the frameworks' MCP clients build their HTTP clients with (the
        MCP SDK's library: httpx, httpx2 under SDK 2), so
        the clients' exchanges are timed and they send the server's key, without which it
        answers 401 (the MCP SDK's ``httpx_client_factory``)."""
        return self.mcp.http_client_factory if self.mcp is not None else None

    def mcp_url(self, run_id: str) -> str | None:
        # one URL per run; the node a call belongs to is the run's node visit in progress
        return self.mcp.url_for(run_id, "tools") if self.mcp is not None else None

    def _served(self, run_id: str, node: str, name: str, args: Any, result: ToolResult) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            run.record_served_tool_call(name, args, result)


@asynccontextmanager
async def open_protocol(
    name: str,
    tools: list[Tool],
    agents: list[Any] | None = None,
    handle: AgentHandler | None = None,
) -> AsyncIterator[StackProtocol]:
    """Open protocol ``name`` for a stack job; ``agents``/``handle`` are the A2A agents' specs
    and their work (required for ``a2a``)."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; available: {PROTOCOLS}")
    protocol = StackProtocol(name, tools)
    async with AsyncExitStack() as stack:
        if name == "mcp":
            from mastif.protocols.mcp import open_mcp_server

            protocol.mcp = await stack.enter_async_context(
                open_mcp_server(tools, on_call=protocol._served)
            )
        elif name == "a2a":
            from mastif.protocols.a2a import open_a2a_agents

            if not agents or handle is None:
                raise ValueError("protocol 'a2a' needs the agents and their handler")
            protocol.agents = await stack.enter_async_context(open_a2a_agents(agents, handle))
        yield protocol


__all__ = ["PROTOCOLS", "AgentHandler", "ProtocolStats", "StackProtocol", "ToolTransport",
           "open_protocol"]  # fmt: skip

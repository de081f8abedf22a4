"""Protocol seconds have one definition, computed the same way under MCP and A2A.

The same scripted exchange runs under both protocols, on the real MCP server and the real
A2A agents: a peer whose work takes a known time (the tool, the agent's node: ``WORK_S``)
behind a wire that holds every request a known time (``DELAY_S``, injected in front of the
server, where only a client-side measurement sees it). Protocol seconds must then be the
injected delay of the exchanges the client waited on plus loopback overhead, and never the
peer's work, under both protocols. A server-side measurement (blind to the delay), or a
definition that kept the peer's work, fails here.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mastif.protocols import ProtocolStats, open_protocol
from mastif.protocols import wire as wire_module
from mastif.protocols.a2a import A2AOrchestratorClient, AgentSpec
from mastif.tools import Tool

WORK_S = 0.3  # the peer's own work per exchange that carries work
DELAY_S = 0.05  # what the wire adds to every request
#: loopback and SDK overhead allowed per timed exchange (a loaded 2-core machine)
SLACK_S = 0.05


def slow_tool() -> Tool:
    def work(text: str) -> str:
        time.sleep(WORK_S)
        return text.upper()

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return Tool("shout", "Upper-case a text (slowly).", schema, work)


async def slow_agent(agent: str, run_id: str, text: str, data: dict[str, Any]) -> str:
    await asyncio.sleep(WORK_S)
    return text.upper()


SPEC = AgentSpec("shouter", "Upper-cases a text.", "shout", "shout", "Upper-cases a text.")


@pytest.fixture
def delayed_wire(monkeypatch):
    """Every protocol server holds each request DELAY_S before its meter sees it."""
    real = wire_module.serve_asgi

    def serve(app, name, key):
        async def delayed(scope, receive, send):
            if scope["type"] == "http":
                await asyncio.sleep(DELAY_S)
            await app(scope, receive, send)

        return real(delayed, name, key)

    for module in ("mastif.protocols.mcp", "mastif.protocols.a2a"):
        monkeypatch.setattr(f"{module}.serve_asgi", serve)


@asynccontextmanager
async def opened(protocol: str):
    if protocol == "mcp":
        async with open_protocol("mcp", [slow_tool()]) as p:
            yield p
    else:
        async with open_protocol("a2a", [], agents=[SPEC], handle=slow_agent) as p:
            yield p


async def one_exchange(protocol: str, run_id: str) -> tuple[str, ProtocolStats, int]:
    """The scripted exchange: one text to the peer, its answer back, as each protocol's
    clients do it (an MCP session built with the run's client factory, as every framework's
    MCP client is; our A2A orchestrator client)."""
    async with opened(protocol) as p:
        if protocol == "mcp":
            factory = p.mcp_http_client_factory()
            assert factory is not None
            async with (
                factory() as http,
                streamable_http_client(p.mcp_url(run_id), http_client=http) as (read, write, *_),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool("shout", {"text": "hi"})
            answer = result.content[0].text  # type: ignore[union-attr]
            meter = p.mcp.meter  # type: ignore[union-attr]
        else:
            assert p.agents is not None
            async with A2AOrchestratorClient(p.agents, run_id) as client:
                answer = await client.send("shouter", "hi", {"step": 1})
            meter = p.agents.meter
        await asyncio.sleep(0.2)  # the MCP session's DELETE and stream close settle
        exchanges = meter.for_run(run_id).exchanges
        return answer, p.detach(run_id), exchanges


@pytest.mark.parametrize(
    ("protocol", "n_exchanges"),
    [
        # initialize, notifications/initialized, tools/list (the SDK's client lists the
        # tools before its first call, to check results against their schemas), tools/call,
        # the session's DELETE; its GET notification stream is no exchange
        ("mcp", 5),
        # the agent card, one SendMessage
        ("a2a", 2),
    ],
)
def test_protocol_seconds_are_the_wire_not_the_work(protocol, n_exchanges, delayed_wire):
    answer, cost, exchanges = asyncio.run(one_exchange(protocol, "run-1"))
    assert answer == "HI"
    assert exchanges == n_exchanges
    # the peer's work, timed by the server: the one exchange that carried it
    assert WORK_S <= cost.peer_seconds < WORK_S + SLACK_S
    # what the client waited: the work plus every exchange's delay
    assert cost.exchange_seconds >= WORK_S + n_exchanges * DELAY_S
    # the figure: exactly the difference, and it is the wire's delay plus overhead
    assert cost.seconds == pytest.approx(cost.exchange_seconds - cost.peer_seconds)
    assert n_exchanges * DELAY_S <= cost.seconds < n_exchanges * (DELAY_S + SLACK_S)

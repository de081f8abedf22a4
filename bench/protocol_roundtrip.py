"""What one exchange costs under each protocol, without a model: ratios from one run.

Times N calls of the ``datetime`` tool (microseconds of work) in-process, over MCP with one
session for all calls, over MCP with a fresh session per call (what langchain-mcp-adapters'
``get_tools()`` tools and CrewAI's ``MCPNativeTool`` do), and N A2A messages to an agent
whose work is returning its input (card fetched once, as our orchestrator does per run).
Prints the mean milliseconds per exchange, bytes and messages on the wire per exchange,
and each as a ratio to the in-process call.

    .venv/bin/python bench/protocol_roundtrip.py [N]
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mastif.protocols.a2a import A2AOrchestratorClient, AgentSpec, open_a2a_agents
from mastif.protocols.mcp import open_mcp_server
from mastif.protocols.standard import InProcessTransport
from mastif.tools import get_tools

ARGS: dict[str, Any] = {}


async def in_process(n: int) -> tuple[float, float, float]:
    transport = InProcessTransport(get_tools(["datetime"]))
    t0 = time.perf_counter()
    for _ in range(n):
        assert (await transport.call("datetime", ARGS)).ok
    return (time.perf_counter() - t0) / n, 0.0, 0.0


async def mcp_calls(n: int, session_per_call: bool) -> tuple[float, float, float]:
    async with open_mcp_server(get_tools(["datetime"])) as server:
        url = server.url_for("bench", "tools")

        async def session_calls(k: int) -> None:
            # the server's client factory, as the frameworks use: it sends the server's key
            async with (
                server.http_client_factory() as http,
                streamable_http_client(url, http_client=http) as (read, write, *_),
            ):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    for _ in range(k):
                        assert not (await session.call_tool("datetime", ARGS)).isError

        t0 = time.perf_counter()
        if session_per_call:
            for _ in range(n):
                await session_calls(1)
        else:
            await session_calls(n)
        elapsed = time.perf_counter() - t0
        stats = server.pop_stats("bench")
    return elapsed / n, (stats.bytes_in + stats.bytes_out) / n, stats.messages / n


async def a2a_messages(n: int) -> tuple[float, float, float]:
    spec = AgentSpec("echo", "Echoes its input.", "echo", "echo", "Returns the message text.")

    async def handle(agent: str, run_id: str, text: str, data: dict[str, Any]) -> str:
        return text

    async with open_a2a_agents([spec], handle) as agents:
        async with A2AOrchestratorClient(agents, "bench") as client:
            await client.card("echo")  # once per run, as the orchestrator does
            t0 = time.perf_counter()
            for i in range(n):
                assert await client.send("echo", f"message {i}", {"node": "echo", "step": i})
            elapsed = time.perf_counter() - t0
        stats = agents.pop_stats("bench")
    return elapsed / n, (stats.bytes_in + stats.bytes_out) / n, stats.messages / n


async def main(n: int) -> None:
    rows = [
        ("in-process call", await in_process(n)),
        ("MCP tools/call, one session", await mcp_calls(n, session_per_call=False)),
        ("MCP tools/call, session per call", await mcp_calls(n, session_per_call=True)),
        ("A2A message (card cached)", await a2a_messages(n)),
    ]
    base = rows[0][1][0]
    print(f"{n} exchanges each")
    print(
        f"{'exchange':36} {'ms each':>9} {'x in-process':>13} {'bytes each':>11} {'msgs each':>10}"
    )
    for name, (seconds, nbytes, msgs) in rows:
        print(f"{name:36} {seconds * 1e3:9.2f} {seconds / base:13.1f} {nbytes:11.0f} {msgs:10.1f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))

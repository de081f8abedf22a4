"""The MCP tool server against real MCP clients (the SDK's own and langchain-mcp-adapters)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from mastif.protocols.mcp import SDK_LINE, open_mcp_server
from mastif.tools import ToolResult, get_tools

TOOLS = get_tools(["sympy", "json_parser", "datetime"])

Call = tuple[str, str, str, Any, ToolResult]

#: the protocol the installed SDK's client speaks by default: SDK 1 opens a session with the
#: initialize handshake (2025-11-25); SDK 2's Client finds the stateless 2026-07-28 with
#: server/discover ("auto"), and speaks the handshake only when told ("legacy")
PROTOCOL = "2026-07-28" if SDK_LINE >= 2 else "2025-11-25"
HANDSHAKE = "2025-11-25"


@asynccontextmanager
async def connect(url: str, http: Any, mode: str = "auto") -> AsyncIterator[tuple[Any, str]]:
    """A connected MCP client and the protocol version it agreed with the server: SDK 1's
    ``ClientSession``, SDK 2's ``Client`` (``mode``: "auto" or "legacy"). ``http``: the
    server's httpx client factory (times exchanges, sends the server's key, as every
    framework's MCP client does)."""
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(http())
        transport = streamable_http_client(url, http_client=client)
        if SDK_LINE >= 2:
            from mcp import Client

            async with Client(transport, mode=mode) as session:
                yield session, session.protocol_version
        else:
            async with transport as (read, write, _), ClientSession(read, write) as session:
                result = await session.initialize()
                yield session, result.protocolVersion


@asynccontextmanager
async def mcp_session(url: str, http: Any) -> AsyncIterator[Any]:
    """A connected MCP client of the installed SDK, speaking its default protocol."""
    async with connect(url, http) as (session, _):
        yield session


def wire(model: Any) -> dict[str, Any]:
    """An SDK model as on the wire (SDK 2 names its fields in snake_case, SDK 1 as the wire)."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def port_of(base_url: str) -> int:
    return int(base_url.rsplit(":", 1)[1])


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_list_tools_offers_our_tools_exactly() -> None:
    async def main() -> list[types.Tool]:
        async with open_mcp_server(TOOLS) as server:
            async with mcp_session(
                server.url_for("run-a", "agent"), server.http_client_factory
            ) as session:
                return (await session.list_tools()).tools

    listed = asyncio.run(main())
    assert [t.name for t in listed] == [t.name for t in TOOLS]
    for offered, ours in zip(listed, TOOLS, strict=True):
        assert offered.description == ours.description
        assert wire(offered)["inputSchema"] == ours.parameters
        # same keys in the same order, not just an equal dict
        assert json.dumps(wire(offered)["inputSchema"]) == json.dumps(ours.parameters)


def test_call_returns_tool_output_and_reports_the_run() -> None:
    calls: list[Call] = []

    async def main() -> tuple[types.CallToolResult, int]:
        async with open_mcp_server(TOOLS, on_call=lambda *c: calls.append(c)) as server:
            async with mcp_session(
                server.url_for("run-a", "planner"), server.http_client_factory
            ) as session:
                result = await session.call_tool(
                    "sympy", {"expression": "x**2 - 4 = 0", "operation": "solve"}
                )
            return result, server.calls_served("run-a")

    result, served = asyncio.run(main())
    assert wire(result)["isError"] is False
    assert text_of(result) == "[-2, 2]"
    assert served == 1
    [(run_id, node, name, arguments, tool_result)] = calls
    assert (run_id, node, name) == ("run-a", "planner", "sympy")
    assert arguments == {"expression": "x**2 - 4 = 0", "operation": "solve"}
    assert tool_result.ok and tool_result.output == "[-2, 2]"


def test_failures_are_results_not_rejections() -> None:
    calls: list[Call] = []

    async def main() -> tuple[types.CallToolResult, types.CallToolResult, int]:
        async with open_mcp_server(TOOLS, on_call=lambda *c: calls.append(c)) as server:
            async with mcp_session(
                server.url_for("run-a", "agent"), server.http_client_factory
            ) as session:
                # schema violation: the tool itself must see it (the SDK must not reject it)
                bad = await session.call_tool("sympy", {"expr": "1 + 1"})
                unknown = await session.call_tool("web_search", {"q": "x"})
            return bad, unknown, server.calls_served("run-a")

    bad, unknown, served = asyncio.run(main())
    assert wire(bad)["isError"] is True
    assert text_of(bad).startswith("invalid arguments for sympy:")
    assert wire(unknown)["isError"] is True
    assert text_of(unknown) == (
        "unknown tool 'web_search'; offered: ['datetime', 'json_parser', 'sympy']"
    )
    assert served == 2
    assert [(c[2], c[3], c[4].ok) for c in calls] == [
        ("sympy", {"expr": "1 + 1"}, False),
        ("web_search", {"q": "x"}, False),
    ]
    assert calls[0][4].error == text_of(bad)


def test_runs_are_counted_apart() -> None:
    calls: list[Call] = []
    doc = json.dumps({"items": [{"name": "a"}, {"name": "b"}]})

    async def main() -> dict[str, Any]:
        async with open_mcp_server(TOOLS, on_call=lambda *c: calls.append(c)) as server:
            timed = server.http_client_factory
            async with (
                mcp_session(server.url_for("run-a", "n1"), timed) as a,
                mcp_session(server.url_for("run-b", "n2"), timed) as b,
            ):
                await a.call_tool("json_parser", {"json_string": doc, "query": "items[1].name"})
                await b.call_tool("sympy", {"expression": "2**10", "operation": "evaluate"})
                await a.call_tool("datetime", {"timezone": "UTC"})
            out = {
                "served": (server.calls_served("run-a"), server.calls_served("run-b")),
                "a": server.pop_stats("run-a"),
                "b": server.pop_stats("run-b"),
                "a_again": server.pop_stats("run-a"),
                "never": server.calls_served("run-z"),
            }
            # traffic outside /r/{run_id}/{node}/ is refused and counted nowhere
            async with timed() as http:
                stray = await http.post(f"{server.base_url}/mcp", json={})
            out["stray"] = stray.status_code
            out["runs"] = set(server.meter.stats)
            return out

    out = asyncio.run(main())
    assert out["served"] == (2, 1)
    assert out["never"] == 0
    assert {(c[0], c[1], c[2]) for c in calls} == {
        ("run-a", "n1", "json_parser"),
        ("run-a", "n1", "datetime"),
        ("run-b", "n2", "sympy"),
    }
    for stats in (out["a"], out["b"]):
        assert stats.requests > 0 and stats.messages > 0
        assert stats.bytes_in > 0 and stats.bytes_out > 0
        assert stats.inner_s > 0
        # the client timed each exchange but the session's notification stream (a GET; on
        # 2026-07-28 there is no session and no such stream)
        assert stats.exchanges == stats.requests - (PROTOCOL == HANDSHAKE)
        assert stats.exchange_s >= stats.inner_s
    # run a made one more call than b over an otherwise identical session
    assert out["a"].messages > out["b"].messages
    assert out["a"].requests > out["b"].requests
    assert out["a_again"].requests == 0  # popped
    assert out["stray"] == 404
    assert out["runs"] == set()


@pytest.mark.parametrize("mode", ["auto", "legacy"] if SDK_LINE >= 2 else ["auto"])
def test_the_protocol_served_and_recorded(mode: str, caplog) -> None:
    """SDK 1 serves the handshake's 2025-11-25; SDK 2 serves 2026-07-28 to a client that
    discovers it (no session: each request declares its client) and the handshake's
    2025-11-25 to one that asks for that. The run's record and log line say which."""
    caplog.set_level(logging.INFO, logger="mastif.protocols.mcp")
    expected = HANDSHAKE if mode == "legacy" else PROTOCOL

    async def main() -> tuple[str, Any]:
        async with open_mcp_server(TOOLS) as server:
            url = server.url_for("run-v", "agent")
            async with connect(url, server.http_client_factory, mode) as (session, agreed):
                await session.list_tools()
                await session.call_tool("datetime", {"timezone": "UTC"})
            record = server.clients_of("run-v")
            server.pop_stats("run-v")
            return agreed, record

    agreed, record = asyncio.run(main())
    assert agreed == expected
    [(name, version, protocol, caps)] = record.declared
    assert (name, version, protocol, caps) == ("mcp", "0.1.0", expected, "none")
    assert (record.lists, record.calls) == (1, 1)
    [line] = [r.getMessage() for r in caplog.records if r.name == "mastif.protocols.mcp"]
    # a handshake client's one session, or a 2026-07-28 client's requests without one
    sessions, stateless = (1, 0) if expected == HANDSHAKE else (0, 2)
    assert (len(record.sessions), record.stateless) == (sessions, stateless)
    how = "1 session" if sessions else "2 stateless requests"
    assert line.endswith(
        f"(protocol {expected}, capabilities: none): {how}, 1 tools/list, 1 tools/call"
    )


def test_url_for_refuses_ids_that_would_misattribute() -> None:
    async def main() -> None:
        async with open_mcp_server(TOOLS) as server:
            assert server.url_for("r1", "a").endswith("/r/r1/a/mcp")
            with pytest.raises(ValueError):
                server.url_for("r/1", "a")
            with pytest.raises(ValueError):
                server.url_for("r1", "")

    asyncio.run(main())


def test_server_stops_when_the_block_exits() -> None:
    async def main() -> int:
        async with open_mcp_server(TOOLS) as server:
            async with mcp_session(
                server.url_for("run-a", "agent"), server.http_client_factory
            ) as session:
                await session.list_tools()
            return port_of(server.base_url)

    assert refuses(asyncio.run(main()))


def test_server_stops_when_the_block_raises_with_a_client_still_connected() -> None:
    ports: list[int] = []

    async def main() -> BaseException | None:
        async with AsyncExitStack() as clients:  # closed only after the server is gone
            try:
                async with open_mcp_server(TOOLS) as server:
                    ports.append(port_of(server.base_url))
                    session = await clients.enter_async_context(
                        mcp_session(server.url_for("run-a", "agent"), server.http_client_factory)
                    )
                    await session.list_tools()
                    raise KeyError("boom")
            except BaseException as exc:  # noqa: BLE001 - the test inspects it
                return exc
        return None

    raised = asyncio.run(asyncio.wait_for(main(), timeout=20))
    # the body's own exception comes out, not wrapped in an ExceptionGroup
    assert type(raised) is KeyError and raised.args == ("boom",)
    assert refuses(ports[0])


def test_invalid_requests_and_unknown_tools_log_one_line(caplog) -> None:
    """An unknown method costs one WARNING line on SDK 1 (its pydantic report was ~60) and
    none on SDK 2, an unknown tool none (the call is recorded as failed); no traceback,
    nothing at ERROR."""
    caplog.set_level(logging.INFO)

    async def main() -> dict[str, Any]:
        async with open_mcp_server(TOOLS) as server:
            url = server.url_for("run-q", "agent")
            async with mcp_session(url, server.http_client_factory) as session:
                unknown_tool = await session.call_tool("no_such_tool", {})
            async with server.http_client_factory() as http:
                headers = {"Accept": "application/json, text/event-stream"}
                init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
                response = await http.post(url, json=init, headers=headers)
                headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
                done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await http.post(url, json=done, headers=headers)
                bogus = {"jsonrpc": "2.0", "id": 2, "method": "no/such/method", "params": {}}
                response = await http.post(url, json=bogus, headers=headers)
                await http.delete(url, headers=headers)
        data = [line for line in response.text.splitlines() if line.startswith("data:")]
        return {"tool_error": wire(unknown_tool)["isError"], "reply": json.loads(data[0][5:])}

    seen = asyncio.run(main())
    assert seen["tool_error"] is True
    assert seen["reply"]["id"] == 2 and seen["reply"]["error"]["code"] in {-32601, -32602}
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not [r for r in caplog.records if "not listed" in r.getMessage()]
    invalid = [r.getMessage() for r in caplog.records if "Failed to validate" in r.getMessage()]
    assert len(invalid) == (SDK_LINE == 1) and all("\n" not in line for line in invalid)

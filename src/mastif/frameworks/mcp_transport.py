"""The MCP SDK's streamable-HTTP client as the frameworks' MCP integrations open it.

CrewAI's transport, Semantic Kernel's ``MCPStreamableHttpPlugin`` and smolagents' MCP client
(mcpadapt) call the SDK's deprecated ``streamablehttp_client(url, headers=...,
httpx_client_factory=...)`` (gone from the SDK 2 line). :func:`streamable_http` is the same
client through the SDK's current ``streamable_http_client(url, http_client=...)``: the httpx
client is built from the same factory with the same arguments (the run's
``RunContext.mcp_http``, which times the exchanges and sends the MCP server's key) and closed
with the session, so every request goes out as before. The integrations' own MCP client
(session, client identity) is theirs.

Either SDK line: the timeouts are given in the HTTP library the installed SDK's client is
built on (:data:`mastif.protocols.mcp.HTTPX`, httpx2 on SDK 2), and the streams are what
that SDK's client yields: ``(read, write, get_session_id)`` on SDK 1, ``(read, write)`` on
SDK 2 (no session to name on 2026-07-28).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from mastif.protocols.mcp import HTTPX

#: the SDK's timeouts for its streamable-HTTP client: 30 s, and 300 s to read (the
#: session's event stream stays open)
TIMEOUT_S = 30.0
SSE_READ_TIMEOUT_S = 300.0


@asynccontextmanager
async def streamable_http(
    url: str,
    *,
    headers: dict[str, str] | None = None,
    terminate_on_close: bool = True,
    httpx_client_factory: Any = create_mcp_http_client,
) -> AsyncIterator[tuple[Any, ...]]:
    """The streams of a streamable-HTTP MCP connection to ``url`` (see the module), on an
    httpx client from ``httpx_client_factory`` (the MCP SDK's factory signature)."""
    client = httpx_client_factory(
        headers=headers,
        timeout=HTTPX.Timeout(TIMEOUT_S, read=SSE_READ_TIMEOUT_S),
        auth=None,
    )
    async with (
        client,
        streamable_http_client(
            url, http_client=client, terminate_on_close=terminate_on_close
        ) as streams,
    ):
        yield streams

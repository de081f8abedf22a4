"""Issue 18 item 4, the protocol servers: a job's MCP tool server and A2A agents serve only
the job's own clients (a per-server key), not any process that can reach 127.0.0.1.

Each test names what it failed with before the fix. That mastif's own clients, which send
the key, still work end to end under every framework is covered by the existing contract
tests, e.g. ``tests/protocols/test_protocols_contract.py::test_tool_calls_travel_over_the_protocol``.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import new_data_part
from a2a.types import Message, Part, Role, SendMessageRequest
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from mastif.protocols.a2a import AgentSpec, agent_card, open_a2a_agents
from mastif.protocols.mcp import open_mcp_server
from mastif.tools import Tool
from tests.support.servers import QuietHandler, serve

SPEC = AgentSpec("worker", "Does the work", "work", "Work", "does one step")
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "intruder", "version": "1"},
    },
}


def wrong_credentials() -> list[dict[str, str]]:
    """What another local user could send: nothing, a made-up token, a bare token."""
    guess = secrets.token_urlsafe(32)
    return [{}, {"Authorization": f"Bearer {guess}"}, {"Authorization": guess}]


def spy_tool(ran: list[dict[str, Any]]) -> Tool:
    def work(text: str) -> str:
        ran.append({"text": text})
        return text.upper()

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return Tool("shout", "Upper-case a text.", schema, work)


async def intrude_mcp(url: str, headers: dict[str, str]) -> list[int]:
    """The whole MCP exchange an intruder needs to run a tool, with plain httpx: initialize,
    initialized, tools/call (going on whatever it is answered). The status of each step."""
    statuses: list[int] = []
    async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
        first = await http.post(url, json=INITIALIZE, headers=MCP_HEADERS | headers)
        statuses.append(first.status_code)
        session = {"mcp-session-id": first.headers.get("mcp-session-id", "none")}
        session["mcp-protocol-version"] = "2025-06-18"
        for body in (
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "shout", "arguments": {"text": "spend"}},
            },
        ):
            reply = await http.post(url, json=body, headers=MCP_HEADERS | headers | session)
            statuses.append(reply.status_code)
    return statuses


def test_mcp_server_refuses_requests_without_the_job_key() -> None:
    # before the fix: statuses [200, 202, 200] and the tool ran once per attempt
    ran: list[dict[str, Any]] = []
    hooked: list[Any] = []

    async def main() -> tuple[list[list[int]], list[httpx.Response], Any, int, set[str]]:
        async with open_mcp_server([spy_tool(ran)], on_call=lambda *c: hooked.append(c)) as srv:
            url = srv.url_for("run-1", "agent")
            statuses = [await intrude_mcp(url, creds) for creds in wrong_credentials()]
            async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
                raw = [
                    await http.post(url, json=INITIALIZE, headers=MCP_HEADERS),
                    await http.get(srv.base_url + "/anything"),
                ]
            return (
                statuses,
                raw,
                srv.pop_stats("run-1"),
                srv.calls_served("run-1"),
                set(srv.meter.stats),
            )

    statuses, raw, stats, served, runs = asyncio.run(asyncio.wait_for(main(), 20))
    assert statuses == [[401, 401, 401]] * 3
    for response in raw:
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json() == {
            "error": {
                "message": "mastif protocol server: missing or wrong token "
                "(Authorization: Bearer <token>)",
                "type": "unauthorized",
            }
        }
    assert ran == [] and hooked == []  # no tool ran, nothing was recorded for the run
    assert served == 0 and stats.requests == 0 and stats.bytes_in == 0 and runs == set()


def test_mcp_server_serves_mastifs_own_client() -> None:
    # the client factory the frameworks' MCP clients are built with sends the key
    # (before the fix: an AttributeError, the server had no key)
    ran: list[dict[str, Any]] = []

    async def main() -> tuple[str, str]:
        async with open_mcp_server([spy_tool(ran)]) as srv:
            assert srv.key.token not in repr(srv.key)
            async with (
                srv.http_client_factory() as http,
                streamable_http_client(srv.url_for("run-1", "agent"), http_client=http) as (
                    read,
                    write,
                    *_,
                ),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool("shout", {"text": "ok"})
            return result.content[0].text, srv.key.token  # type: ignore[union-attr]

    text, _ = asyncio.run(asyncio.wait_for(main(), 20))
    assert text == "OK" and ran == [{"text": "ok"}]


def test_the_key_goes_to_its_own_server_only() -> None:
    # a client built for the MCP server, sent elsewhere on loopback (another port: some
    # other user's server), does not hand it the key; its own server gets it
    # (before the fix: a key-less client got 404 past no check, not 401)
    seen: list[str | None] = []

    class Recorder(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.headers.get("Authorization"))
            self.send_response(204)
            self.end_headers()

    async def main() -> None:
        async with open_mcp_server([spy_tool([])]) as srv, srv.http_client_factory() as http:
            assert (await http.get(f"{other.url}/x")).status_code == 204
            # its own server: the key is sent (a 404 past the key check, not a 401) ...
            assert (await http.get(srv.base_url + "/x")).status_code == 404
            # ... where a client without it is stopped
            async with httpx.AsyncClient(trust_env=False, timeout=10) as plain:
                assert (await plain.get(srv.base_url + "/x")).status_code == 401

    with serve(Recorder) as other:
        asyncio.run(asyncio.wait_for(main(), 20))
    assert seen == [None]


def test_a2a_agents_refuse_requests_without_the_job_key() -> None:
    # before the fix: the card came back 200 and the agent's work (which calls the model
    # through the gateway, with its token) ran once per attempt
    handled: list[tuple[str, str, str]] = []

    async def handle(agent: str, run_id: str, text: str, data: dict[str, Any]) -> str:
        handled.append((agent, run_id, text))  # stands for the node's LLM call
        return "done"

    async def main() -> tuple[list[int], list[BaseException | None], int, set[str]]:
        async with open_a2a_agents([SPEC], handle) as agents:
            url = agents.agent_url("run-1", "worker")
            cards: list[int] = []
            errors: list[BaseException | None] = []
            for creds in wrong_credentials():
                async with httpx.AsyncClient(trust_env=False, timeout=10, headers=creds) as http:
                    cards.append((await http.get(url + AGENT_CARD_WELL_KNOWN_PATH)).status_code)
                    # the SDK's own client, with a card the intruder wrote itself
                    factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
                    client = factory.create(agent_card(SPEC, url))
                    request = SendMessageRequest(
                        message=Message(
                            role=Role.ROLE_USER,
                            message_id=secrets.token_hex(8),
                            context_id="run-1",
                            parts=[Part(text="spend"), new_data_part({"step": 1})],
                        )
                    )
                    try:
                        _ = [event async for event in client.send_message(request)]
                        errors.append(None)
                    except Exception as exc:  # noqa: BLE001 - the test inspects it
                        errors.append(exc)
                    await client.close()
            return cards, errors, agents.messages_received("run-1"), set(agents.meter.stats)

    cards, errors, received, runs = asyncio.run(asyncio.wait_for(main(), 20))
    assert cards == [401, 401, 401]
    for error in errors:
        assert error is not None and "401" in str(error), error
    assert handled == [] and received == 0 and runs == set()


def test_a2a_orchestrator_client_is_served() -> None:
    # mastif's orchestrator client sends the key (before the fix: an AttributeError)
    from mastif.protocols.a2a import A2AOrchestratorClient

    async def handle(agent: str, run_id: str, text: str, data: dict[str, Any]) -> str:
        return f"{agent}:{text}"

    async def main() -> str:
        async with open_a2a_agents([SPEC], handle) as agents:
            assert agents.key.token not in repr(agents.key)
            async with A2AOrchestratorClient(agents, "run-1") as client:
                return await client.send("worker", "hi", {"step": 1})

    assert asyncio.run(asyncio.wait_for(main(), 20)) == "worker:hi"


@pytest.mark.parametrize("which", ["mcp", "a2a"])
def test_each_server_has_its_own_key(which: str) -> None:
    # a key made for one server is useless on another (before the fix: no key at all)
    async def main() -> int:
        async def noop(*_: Any) -> str:
            return ""

        async with open_mcp_server([spy_tool([])]) as mcp, open_a2a_agents([SPEC], noop) as a2a:
            target, other = (mcp, a2a) if which == "mcp" else (a2a, mcp)
            assert target.key.token != other.key.token
            headers = {"Authorization": f"Bearer {other.key.token}"}
            async with httpx.AsyncClient(trust_env=False, timeout=10, headers=headers) as http:
                return (await http.get(target.base_url + "/r/run-1/worker/x")).status_code

    assert asyncio.run(asyncio.wait_for(main(), 20)) == 401

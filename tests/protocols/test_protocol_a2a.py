"""The a2a protocol: real A2A agents on loopback, per-run attribution and counting."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, AgentCardResolutionError, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, new_data_part
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

from mastif.protocols.a2a import (
    A2AAgents,
    A2AOrchestratorClient,
    A2ATaskFailed,
    AgentSpec,
    open_a2a_agents,
    speaks_v1,
)

SPECS = [
    AgentSpec("navigate", "Finds the way", "nav-skill", "Navigate", "plans a route"),
    AgentSpec("worker", "Does the work", "work-skill", "Work", "does one step"),
]


class Recorder:
    """A trivial agent: echoes its inputs, sleeps a little, fails on "boom"."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls: list[tuple[str, str, str, dict[str, Any]]] = []

    async def __call__(self, agent: str, run_id: str, text: str, data: dict[str, Any]) -> str:
        self.calls.append((agent, run_id, text, data))
        if self.delay:
            await asyncio.sleep(self.delay)
        if text == "boom":
            raise ValueError("the agent broke")
        return f"{agent}:{text}:{data['step']}"


def local_http(agents: A2AAgents | None = None) -> httpx.AsyncClient:
    """A plain httpx client; with ``agents``, it sends their key (else it gets 401)."""
    headers = {"Authorization": f"Bearer {agents.key.token}"} if agents is not None else None
    return httpx.AsyncClient(trust_env=False, timeout=10, headers=headers)


def test_plain_sdk_client_reads_cards_and_completes_a_task():
    async def main() -> None:
        async with open_a2a_agents(SPECS, Recorder()) as agents, local_http(agents) as http:
            factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
            for spec in SPECS:
                url = agents.agent_url("plain", spec.name)
                card = await A2ACardResolver(http, url).get_agent_card()
                assert card.name == spec.name
                assert [s.id for s in card.skills] == [spec.skill_id]
                assert [i.url for i in card.supported_interfaces] == [url]
                assert url.endswith(f"/r/plain/{spec.name}/")

                client = factory.create(card)
                request = SendMessageRequest(
                    message=Message(
                        role=Role.ROLE_USER,
                        message_id=uuid.uuid4().hex,
                        parts=[Part(text="hello"), new_data_part({"step": 3})],
                    )
                )
                events = [event async for event in client.send_message(request)]
                assert len(events) == 1 and events[0].HasField("task")
                task = events[0].task
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                assert [get_artifact_text(a) for a in task.artifacts] == [f"{spec.name}:hello:3"]
                await client.close()
            assert agents.messages_received("plain") == 2
            stats = agents.pop_stats("plain")
            assert stats.requests == 4  # two cards, two SendMessage calls

    asyncio.run(main())


def test_orchestrator_client_delegates_and_runs_are_counted_apart():
    handle = Recorder(delay=0.05)

    async def main() -> None:
        async with open_a2a_agents(SPECS, handle) as agents:
            async with A2AOrchestratorClient(agents, "run-a") as a:
                assert await a.send("navigate", "go", {"step": 1}) == "navigate:go:1"
                assert await a.send("worker", "do", {"step": 2, "x": [1, 2.5]}) == "worker:do:2"
                assert await a.send("worker", "again", {"step": 3}) == "worker:again:3"
            async with A2AOrchestratorClient(agents, "run-b") as b:
                assert await b.send("worker", "other", {"step": 9}) == "worker:other:9"

            assert agents.messages_received("run-a") == 3
            assert agents.messages_received("run-b") == 1
            assert agents.messages_received("never") == 0
            a_stats, b_stats = agents.pop_stats("run-a"), agents.pop_stats("run-b")
            # run-a: two cards (fetched once each) + three SendMessage calls
            assert a_stats.requests == 5 and b_stats.requests == 2
            for stats, sends in ((a_stats, 3), (b_stats, 1)):
                assert stats.messages == 2 * sends  # request + response per call
                assert stats.bytes_in > 0 and stats.bytes_out > 0
                assert stats.inner_s >= 0.05 * sends * 0.9
                # the orchestrator's client timed every request (cards and sends), each
                # holding its agent's work
                assert stats.exchanges == stats.requests
                assert stats.exchange_s >= stats.inner_s > 0

    asyncio.run(main())
    assert handle.calls[0] == ("navigate", "run-a", "go", {"step": 1})
    # whole numbers come back as ints although protobuf carries them as doubles
    assert handle.calls[1] == ("worker", "run-a", "do", {"step": 2, "x": [1, 2.5]})
    assert handle.calls[-1][:2] == ("worker", "run-b")


def test_failed_task_raises_with_the_agents_error():
    async def main() -> None:
        async with (
            open_a2a_agents(SPECS, Recorder()) as agents,
            A2AOrchestratorClient(agents, "run-f") as client,
        ):
            with pytest.raises(A2ATaskFailed, match=r"^ValueError: the agent broke$") as info:
                await client.send("worker", "boom", {"step": 1})
            assert info.value.agent == "worker" and info.value.state == "TASK_STATE_FAILED"
            # the agent keeps serving after a failure
            assert await client.send("worker", "fine", {"step": 2}) == "worker:fine:2"
            assert agents.messages_received("run-f") == 2

    asyncio.run(main())


def test_unknown_agent_is_404_at_card_fetch():
    async def main() -> None:
        async with open_a2a_agents(SPECS, Recorder()) as agents, local_http(agents) as http:
            resolver = A2ACardResolver(http, agents.agent_url("run-u", "nobody"))
            with pytest.raises(AgentCardResolutionError) as info:
                await resolver.get_agent_card()
            assert info.value.status_code == 404

            async with A2AOrchestratorClient(agents, "run-u", http) as client:
                with pytest.raises(AgentCardResolutionError, match="404"):
                    await client.send("nobody", "hi", {"step": 1})
            assert not http.is_closed  # a caller's httpx client stays the caller's

            # without the /r/{run}/{agent} prefix nothing is served either
            response = await http.get(agents.base_url + AGENT_CARD_WELL_KNOWN_PATH)
            assert response.status_code == 404
            assert agents.messages_received("run-u") == 0

    asyncio.run(main())


def test_port_is_closed_after_the_block_also_when_it_raises():
    urls: list[str] = []

    async def refused(url: str) -> bool:
        async with local_http() as http:
            try:
                await http.get(url + AGENT_CARD_WELL_KNOWN_PATH)
            except httpx.ConnectError:
                return True
        return False

    async def clean() -> None:
        async with open_a2a_agents(SPECS, Recorder()) as agents:
            urls.append(agents.agent_url("run-c", "worker"))
            assert not await refused(urls[-1])
        assert await refused(urls[-1])

    async def failing() -> None:
        async with open_a2a_agents(SPECS, Recorder()) as agents:
            urls.append(agents.agent_url("run-c", "worker"))
            async with A2AOrchestratorClient(agents, "run-c") as client:
                await client.send("worker", "x", {"step": 1})
            raise RuntimeError("the run failed")

    asyncio.run(clean())
    with pytest.raises(RuntimeError, match="the run failed"):
        asyncio.run(failing())
    assert asyncio.run(refused(urls[-1]))


def test_agent_names_must_be_unique_url_segments():
    async def main(specs: list[AgentSpec]) -> None:
        async with open_a2a_agents(specs, Recorder()):
            pass

    with pytest.raises(ValueError, match="duplicate"):
        asyncio.run(main([SPECS[0], SPECS[0]]))
    with pytest.raises(ValueError, match="path segment"):
        asyncio.run(main([AgentSpec("a/b", "", "s", "S", "")]))


def test_a2a_card_for_v1_clients_is_unchanged_by_v03_support():
    """Only a request without ``A2A-Version: 1.x`` gets the v0.3 card fields: a v1.0
    client (ours included) reads and pays for the same card as before."""

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with open_a2a_agents(SPECS, Recorder()) as agents:
            url = agents.agent_url("card", "worker")
            auth = {"Authorization": f"Bearer {agents.key.token}"}
            async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
                card_url = url + ".well-known/agent-card.json"
                v1 = (await http.get(card_url, headers={**auth, "A2A-Version": "1.0"})).json()
                v03 = (await http.get(card_url, headers=auth)).json()
            # mastif's own orchestrator client asks for the v1.0 card
            async with A2AOrchestratorClient(agents, "card") as client:
                ours = await client.card("worker")
            assert [i.protocol_version for i in ours.supported_interfaces] == ["1.0"]
            return v1, v03

    v1, v03 = asyncio.run(main())
    assert [i["protocolVersion"] for i in v1["supportedInterfaces"]] == ["1.0"]
    assert "url" not in v1 and "protocolVersion" not in v1
    assert [i["protocolVersion"] for i in v03["supportedInterfaces"]] == ["1.0", "0.3"]
    assert v03["protocolVersion"] == "0.3" and v03["url"] == v1["supportedInterfaces"][0]["url"]


def test_speaks_v1_reads_the_a2a_version_header():
    assert not speaks_v1(None) and not speaks_v1("") and not speaks_v1("0.3")
    assert speaks_v1("1.0") and speaks_v1("1") and speaks_v1(" 2.1 ") and speaks_v1("v1")


def test_invalid_requests_log_one_line_and_no_traceback(caplog):
    """A client's malformed request is a WARNING line, never an ERROR with a traceback."""
    caplog.set_level(logging.INFO)

    async def main() -> list[int]:
        async with open_a2a_agents(SPECS, Recorder()) as agents, local_http(agents) as http:
            url = agents.agent_url("bad", "worker")
            v1 = {"A2A-Version": "1.0"}
            bodies = [
                ({"id": 1, "method": "GetTask", "params": {"id": "x"}}, v1),  # no jsonrpc
                ({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": 5}}, v1),
                ({"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {}}, {}),
            ]
            codes = []
            for body, headers in bodies:
                response = await http.post(url, json=body, headers=headers)
                codes.append(response.json()["error"]["code"])
            return codes

    assert asyncio.run(main()) == [-32600, -32602, -32600]
    records = [r for r in caplog.records if r.name.startswith("a2a.")]
    assert not [r for r in records if r.exc_info or r.levelno >= logging.ERROR]
    assert len([r for r in records if r.levelno == logging.WARNING]) == 3
    assert all("\n" not in r.getMessage() for r in records)

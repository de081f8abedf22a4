"""Protocol conformance against clients nobody here wrote: the official TypeScript SDKs.

mastif's real MCP tool server and real A2A agents are served on loopback exactly as in a
run; the official clients (``@modelcontextprotocol/sdk`` 1.x, ``@a2a-js/sdk`` 1.x for A2A
v1.0 and 0.3.x for A2A v0.3) drive them from the Node scripts in ``tests/interop/``, each printing one JSON object
of what its SDK saw, which is asserted here. The agents' "model" is a scripted handler; the
tools are mastif's own. ``make setup`` installs the clients (``npm ci`` in tests/interop).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import sys
from typing import Any

import pytest

from mastif.protocols.a2a import AgentSpec, open_a2a_agents
from mastif.protocols.mcp import open_mcp_server
from mastif.tools import get_tools
from tests.support.paths import TESTS

INTEROP = TESTS / "interop"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NODE is None, reason="node is not installed: the interop clients need it"),
    pytest.mark.skipif(
        not (INTEROP / "node_modules").is_dir(),
        reason="tests/interop/node_modules is missing: run make setup (npm ci in tests/interop)",
    ),
]

TOOLS = get_tools(["json_parser", "datetime"])
SPECS = [
    AgentSpec("worker", "does the work", "work", "Work", "does one subtask"),
    AgentSpec("navigate", "finds the way", "nav", "Navigate", "plans"),
]


async def node(script: str, *args: str, timeout: float = 30) -> dict[str, Any]:
    """Run ``tests/interop/<script>`` with ``args``; the JSON object it printed."""
    proc = await asyncio.create_subprocess_exec(
        NODE or "node",
        str(INTEROP / script),
        *args,
        cwd=INTEROP,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    sys.stderr.write(err.decode(errors="replace"))
    assert proc.returncode == 0, err.decode(errors="replace")
    return json.loads(out.decode().strip().splitlines()[-1])


class ScriptedAgents:
    """The agents' work: "wait" blocks until the task is cancelled, anything else answers."""

    def __init__(self) -> None:
        self.cancelled = 0

    async def __call__(self, agent: str, run_id: str, text: str, data: dict[str, Any]) -> str:
        if text == "wait":
            try:
                await asyncio.sleep(20)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return f"{agent} answers {text!r} (step {data.get('step')})"


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    """Invalid requests were logged without a traceback and below ERROR (issue 22, break 3)."""
    loud = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not loud, [f"{r.name}: {r.getMessage()}" for r in loud]
    long = [r.getMessage() for r in caplog.records if r.getMessage().count("\n") > 2]
    assert not long, long


def test_a2a_v1_official_js_client(caplog):
    caplog.set_level(logging.INFO)
    handle = ScriptedAgents()

    async def main() -> tuple[dict[str, Any], str, int]:
        async with open_a2a_agents(SPECS, handle) as agents:
            url = agents.agent_url("interop-run", "worker")
            seen = await node("a2a.mjs", url, agents.key.token)
            return seen, url, agents.messages_received("interop-run")

    seen, url, received = asyncio.run(main())
    print(json.dumps(seen, indent=1))
    # discovery from the URL exactly as mastif hands it out (issue 22, break 1): the card is
    # resolved relative to it, under the agent, not at the parent path
    discovery = seen["discovery"]
    assert "error" not in discovery, discovery
    assert discovery["card_url"] == url + ".well-known/agent-card.json"
    assert discovery["name"] == "worker" and discovery["skills"] == ["work"]
    assert discovery["interfaces"] == [{"url": url, "binding": "JSONRPC", "version": "1.0"}]
    assert discovery["protocol"] == "1.0"

    done, parked = seen["ids"]["done"], seen["ids"]["parked"]
    answer = "worker answers 'hello' (step 1)"
    assert seen["send_message"] == {
        "kind": "task", "id": done, "contextId": "interop",
        "state": "TASK_STATE_COMPLETED", "answer": answer,
    }  # fmt: skip
    assert seen["get_task"] == seen["send_message"]
    returned = seen["send_message_return_immediately"]
    assert returned["id"] == parked and returned["kind"] == "task"
    assert returned["state"] in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
    assert seen["working"]["state"] == "TASK_STATE_WORKING"
    assert seen["list_tasks"]["ids"] == sorted([done, parked])
    assert seen["list_tasks"]["states"] == ["TASK_STATE_COMPLETED", "TASK_STATE_WORKING"]
    assert seen["cancel_task"]["state"] == "TASK_STATE_CANCELED"
    assert seen["get_task_after_cancel"]["state"] == "TASK_STATE_CANCELED"
    assert handle.cancelled == 1  # the agent's work was interrupted, not left running
    assert received == 2

    # A2A errors as the SDK maps them (a2a.proto / spec section 5.4 codes)
    assert seen["cancel_completed_task"]["error"] == "JsonRpcTaskNotCancelableError"
    assert seen["cancel_completed_task"]["code"] == -32002
    assert seen["get_unknown_task"]["error"] == "JsonRpcTaskNotFoundError"
    assert seen["get_unknown_task"]["code"] == -32001
    # requests no SDK sends: JSON-RPC 2.0 codes and ids
    assert seen["malformed_json"] == {"status": 200, "id": None, "code": -32700}
    assert seen["unknown_method"] == {"status": 200, "id": 7, "code": -32601}
    assert seen["no_jsonrpc_member"] == {"status": 200, "id": 8, "code": -32600}
    assert seen["invalid_params"] == {"status": 200, "id": 9, "code": -32602}
    assert seen["v1_method_without_version_header"]["code"] == -32009  # VersionNotSupported
    # the origin root serves no card (one origin, many agents) and says where the cards are
    assert seen["origin_root_card"]["status"] == 404
    assert "/r/{run_id}/{agent}/.well-known/agent-card.json" in seen["origin_root_card"]["text"]
    no_tracebacks(caplog)


def test_mcp_official_ts_client(caplog):
    caplog.set_level(logging.INFO)
    calls: list[tuple[str, str, str]] = []

    async def main() -> dict[str, Any]:
        def record(run_id: str, node_: str, tool: str, _args: Any, _result: Any) -> None:
            calls.append((run_id, node_, tool))

        async with open_mcp_server(TOOLS, on_call=record) as server:
            url = server.url_for("interop-run", "agent")
            return await node("mcp.mjs", url, server.key.token)

    seen = asyncio.run(main())
    print(json.dumps(seen, indent=1))
    init = seen["initialize"]
    assert "error" not in init, init
    assert init["server"]["name"] == "mastif-tools" and init["session"] is True
    assert init["protocol"] == "2025-11-25"
    assert init["capabilities"]["tools"] == {"listChanged": False}
    # the tools reach a foreign client byte for byte as mastif defines them
    listed = seen["tools_list"]
    assert [t["name"] for t in listed] == [t.name for t in TOOLS]
    for offered, ours in zip(listed, TOOLS, strict=True):
        assert offered["description"] == ours.description
        assert json.dumps(offered["inputSchema"]) == json.dumps(ours.parameters)
    assert seen["call_valid"] == {"isError": False, "text": "3"}
    # bad arguments and unknown tools are failed tool results the model can read (the
    # 2025-11-25 spec's tool execution errors), recorded like every other call
    assert seen["call_invalid_arguments"]["isError"] is True
    assert "json_string" in seen["call_invalid_arguments"]["text"]
    assert seen["call_unknown_tool"]["isError"] is True
    assert "unknown tool 'no_such_tool'" in seen["call_unknown_tool"]["text"]
    assert [c[2] for c in calls] == ["json_parser", "json_parser", "no_such_tool"]
    assert {c[:2] for c in calls} == {("interop-run", "agent")}
    # the session ends with the client's DELETE; the old session id is then 404
    assert seen["session_end"] == {"session": None}
    assert seen["after_session_end"]["status"] == 404
    # malformed requests are refused; their codes/ids are the Python SDK's, which deviate
    # from JSON-RPC 2.0 in places (docs/protocols.md, "Known deviations")
    assert seen["malformed_json"]["status"] == 400
    assert seen["malformed_json"]["code"] == -32700
    assert seen["no_jsonrpc_member"]["status"] == 400
    assert seen["no_jsonrpc_member"]["code"] in {-32600, -32602}
    assert seen["unknown_method"]["id"] == 7
    assert seen["unknown_method"]["code"] in {-32601, -32602}
    no_tracebacks(caplog)


def test_a2a_v03_official_js_client(caplog):
    caplog.set_level(logging.INFO)
    handle = ScriptedAgents()

    async def main() -> tuple[dict[str, Any], str]:
        async with open_a2a_agents(SPECS, handle) as agents:
            url = agents.agent_url("interop-v03", "navigate")
            return await node("a2a_v03.mjs", url, agents.key.token), url

    seen, url = asyncio.run(main())
    print(json.dumps(seen, indent=1))
    # the card a v0.3 client reads (no A2A-Version header): the v0.3 fields, same endpoint
    discovery = seen["discovery"]
    assert "error" not in discovery, discovery
    assert discovery["card_url"] == url + ".well-known/agent-card.json"
    assert discovery["url"] == url
    assert discovery["protocolVersion"] == "0.3"
    assert discovery["preferredTransport"] == "JSONRPC"
    assert discovery["name"] == "navigate" and discovery["skills"] == ["nav"]
    # v0.3 methods (message/send, tasks/get, tasks/cancel) on the same endpoint
    done, parked = seen["ids"]["done"], seen["ids"]["parked"]
    assert seen["send_message"] == {
        "kind": "task", "id": done, "contextId": "interop-v03", "state": "completed",
        "answer": "navigate answers 'hello' (step 1)",
    }  # fmt: skip
    assert seen["get_task"] == seen["send_message"]
    assert seen["send_message_nonblocking"]["id"] == parked
    assert seen["send_message_nonblocking"]["state"] in {"submitted", "working"}
    assert seen["working"]["state"] == "working"
    assert seen["cancel_task"]["state"] == "canceled"
    assert handle.cancelled == 1
    assert seen["cancel_completed_task"]["code"] == -32002
    assert seen["get_unknown_task"]["code"] == -32001
    # a2a-sdk's v0.3 adapter answers params that do not validate with -32600
    assert seen["invalid_request"]["id"] == 11
    assert seen["invalid_request"]["code"] in {-32600, -32602}
    no_tracebacks(caplog)

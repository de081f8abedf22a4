"""Every framework under the real protocols, with a scripted model.

The model is a test double (a scripted OpenAI-compatible server); the MCP server, the A2A
agents, the frameworks' own MCP clients and our A2A orchestrator are the real thing. The
protocol's servers count on their side what reached them, and those counts are checked.
"""

from __future__ import annotations

import json
import logging
import socket
import time

import pytest

from mastif.protocols import wire
from tests.support.contract_frameworks import CONTRACT_FRAMEWORKS as FRAMEWORKS
from tests.support.contract_frameworks import (
    TEXT_TOOL_RESULTS,
    mcp_client_name,
    results_follow_up,
    wire_tool_name,
)
from tests.support.fakes import ScriptedChatServer, last_user_text, opens_interaction_round
from tests.support.stackrun import run_stack
from tests.support.workflows import hierarchical_workflow

PARSER_ARGS = {"json_string": '{"flights": [{"price": 120}, {"price": 95}]}',
               "query": "flights[1].price"}  # fmt: skip


@pytest.fixture(params=FRAMEWORKS)
def framework(request):
    return request.param


@pytest.fixture
def served_urls(monkeypatch):
    """Base URLs of every protocol server started, to check they are gone afterwards."""
    urls: list[str] = []
    real = wire.serve_asgi

    def recording(app, name, key):
        cm = real(app, name, key)

        class Wrapper:
            async def __aenter__(self):
                url = await cm.__aenter__()
                urls.append(url)
                return url

            async def __aexit__(self, *exc):
                return await cm.__aexit__(*exc)

        return Wrapper()

    monkeypatch.setattr(wire, "serve_asgi", recording)
    for module in ("mastif.protocols.mcp", "mastif.protocols.a2a"):
        monkeypatch.setattr(f"{module}.serve_asgi", recording)
    return urls


def refuses_connections(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) != 0


def interact_calls_parser(payload):
    if opens_interaction_round(payload):
        return {"tool_calls": [("json_parser", PARSER_ARGS), ("no_such_tool", {"x": 1})]}
    return {"content": "done."}


@pytest.mark.parametrize("protocol", ["mcp", "a2a"])
def test_tool_calls_travel_over_the_protocol(
    protocol, framework, fake_model_config, tmp_path, served_urls, caplog
):
    caplog.set_level(logging.INFO, logger="mastif.protocols.mcp")
    with ScriptedChatServer(interact_calls_parser) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        cfg["protocols"], cfg["frameworks"] = [protocol], [framework]
        (trace,) = run_stack(cfg, tmp_path)
    assert trace.status == "ok", trace.error_message
    assert trace.protocol == protocol
    calls = {c.name: c for c in trace.tool_calls}
    assert len(trace.tool_calls) == 2
    ok_call, bad_call = calls["json_parser"], calls["no_such_tool"]
    assert ok_call.ok and ok_call.output == "95" and ok_call.node == "interact"
    assert json.loads(ok_call.arguments) == PARSER_ARGS
    assert not bad_call.ok and "no_such_tool" in bad_call.error
    follow_up = results_follow_up(framework, srv.requests)
    if framework in TEXT_TOOL_RESULTS:
        # the refusal ended the step (smolagents); the model reads it as text
        assert "no_such_tool" in last_user_text(follow_up).rsplit("interaction round", 1)[1]
    else:
        # the tool result reached the model
        tool_texts = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
        assert any("95" in (t if isinstance(t, str) else json.dumps(t)) for t in tool_texts)
    # the same tools were offered as under the standard protocol
    offered = {t["function"]["name"] for t in follow_up["tools"]}
    tools = ("python_repl", "sympy", "datetime", "json_parser")
    assert offered == {wire_tool_name(framework, t) for t in tools}
    if protocol == "mcp":
        # counted by the MCP server: the valid call went over MCP (the unknown name never
        # left the framework)
        assert trace.protocol_calls == 1
        # the server logged, once for the run, what the calling client declared and did
        lines = [r.getMessage() for r in caplog.records
                 if r.name == "mastif.protocols.mcp" and r.getMessage().startswith(
                     f"MCP run {trace.run_id}: client ")]  # fmt: skip
        assert len(lines) == 1, lines
        assert f"client {mcp_client_name(framework)!r} " in lines[0]
        assert lines[0].endswith(", 1 tools/call")
    else:
        # counted by the agents: the task to the orchestrator, one message per node visit
        assert trace.protocol_calls == 1 + len(trace.node_outputs) == 5
    assert trace.protocol_messages >= 2 * trace.protocol_calls
    assert trace.protocol_bytes_sent > 0 and trace.protocol_bytes_received > 0
    assert trace.protocol_requests > 0
    # every exchange of the framework's own client (MCP) or of our orchestrator (A2A) was
    # timed on the client side: an untimed one would leave the peer's work (the tool, the
    # agents' nodes) longer than the clients' wait, and protocol_seconds null
    assert trace.protocol_peer_seconds > 0
    assert trace.protocol_exchange_seconds > trace.protocol_peer_seconds
    assert trace.protocol_seconds == pytest.approx(
        trace.protocol_exchange_seconds - trace.protocol_peer_seconds
    )
    # the servers are gone after the job
    assert served_urls and all(refuses_connections(u) for u in served_urls)


def test_a2a_runs_the_linear_loop_like_the_framework(fake_model_config, tmp_path):
    def respond(payload):
        text = last_user_text(payload)
        if "observation round 2" in text:
            return {"content": "The cart holds the item.\nTASK COMPLETE"}
        return {"content": "Looking around. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=3)
        cfg["protocols"], cfg["frameworks"] = ["a2a"], ["langgraph"]
        (trace,) = run_stack(cfg, tmp_path)
    assert [(n.node, n.step) for n in trace.node_outputs] == [
        ("navigate", 1), ("observe", 1), ("interact", 1), ("observe", 2), ("report", 1),
    ]  # fmt: skip
    assert trace.protocol_calls == 1 + 5
    # every model call is still attributed to its node
    assert [c.node for c in trace.llm_calls] == [n.node for n in trace.node_outputs]


# in LangChain's environment (tests/conftest.py): the servers are watched in process
@pytest.mark.parametrize("framework", ["langchain"])
@pytest.mark.parametrize("protocol", ["mcp", "a2a"])
def test_servers_are_gone_when_the_run_fails(
    protocol, framework, fake_model_config, tmp_path, served_urls
):
    with ScriptedChatServer(lambda p: {"status": 500}) as srv:
        cfg = fake_model_config(srv.base_url)
        cfg["protocols"], cfg["frameworks"] = [protocol], [framework]
        (trace,) = run_stack(cfg, tmp_path)
    assert trace.status == "error" and trace.error_class == "provider_error"
    assert served_urls and all(refuses_connections(u) for u in served_urls)


@pytest.mark.slow
def test_a2a_timeout_is_a_row_and_stops_the_agent(fake_model_config, tmp_path):
    # The run's clock leaves the agent time to reach its first model call even on a loaded
    # machine (1 s did not, in CI); that call outlasts the run, and the server stays up until
    # its reply has gone out and a second call would have had time to come.
    timeout_s, reply_after_s = 4, 6
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": reply_after_s}) as srv:
        cfg = fake_model_config(srv.base_url, timeout_s=timeout_s)
        cfg["protocols"], cfg["frameworks"] = ["a2a"], ["langgraph"]
        (trace,) = run_stack(cfg, tmp_path)
        time.sleep(reply_after_s - timeout_s + 2)
    assert trace.status == "timeout"
    assert len(srv.requests) == 1  # the agent's node did not go on after the run ended


@pytest.mark.parametrize("protocol", ["standard", "a2a"])
def test_hierarchical_shape_decomposes_dispatches_synthesises(
    protocol, fake_model_config, tmp_path
):
    def respond(payload):
        text = last_user_text(payload)
        if "Split the task" in text:
            return {"content": "1. Find the flights page.\n2. Compare the prices.\n3. Extra."}
        if "Your subtask:" in text:
            return {"content": "Did: " + text.split("Your subtask:")[1].split("\n")[0].strip()}
        return {"content": "Final report."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url)
        cfg["protocols"], cfg["frameworks"] = [protocol], ["semantic_kernel"]
        cfg["workflow"] = hierarchical_workflow()
        (trace,) = run_stack(cfg, tmp_path)
    assert trace.status == "ok", trace.error_message
    assert trace.workflow_shape == "hierarchical"
    assert [(n.node, n.step) for n in trace.node_outputs] == [
        ("decompose", 1), ("worker", 1), ("worker", 2), ("synthesise", 1),
    ]  # fmt: skip
    assert [n.text for n in trace.node_outputs[1:3]] == [
        "Did: Find the flights page.", "Did: Compare the prices.",
    ]  # fmt: skip
    synth_prompt = last_user_text(srv.requests[-1])
    assert "Did: Find the flights page." in synth_prompt and "Did: Compare" in synth_prompt
    # under a2a the task travels to the orchestrator agent and each subtask to the worker
    assert trace.protocol_calls == (1 + 2 if protocol == "a2a" else 0)


def test_prompt_format_wraps_prompts_in_the_protocol_message(fake_model_config, tmp_path):
    with ScriptedChatServer(lambda p: {"content": "ok"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        cfg["protocols"], cfg["frameworks"] = ["mcp"], ["langgraph"]
        cfg["protocol_options"] = {"mcp": {"prompt_format": True}}
        (trace,) = run_stack(cfg, tmp_path)
    assert trace.prompt_format
    wrapped = json.loads(last_user_text(srv.requests[0]))
    assert wrapped["jsonrpc"] == "2.0" and wrapped["method"] == "sampling/createMessage"
    assert trace.task_text in wrapped["params"]["messages"][0]["content"]["text"]

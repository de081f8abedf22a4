"""What the LangChain adapter does beyond the shared workflow contract (tests/test_workflow.py).

Scripted model server, real gateway, real ``create_agent`` runtime, real tools.
"""

from __future__ import annotations

import copy
from pathlib import Path

from tests.fakes import ScriptedChatServer, last_user_text
from tests.stackrun import run_stack

REPO = Path(__file__).resolve().parents[1]


def interacting(payload):
    return "interaction round" in last_user_text(payload)


def assistant_turns(payload):
    return sum(1 for m in payload["messages"] if m["role"] == "assistant")


def without_ids(payload):
    payload = copy.deepcopy(payload)
    for m in payload["messages"]:
        m.pop("tool_call_id", None)
        for tc in m.get("tool_calls") or []:
            tc.pop("id", None)
    return payload


def test_requests_are_those_of_langgraph(tmp_path, fake_model_config):
    """Same model client, same tools, same turn policy: byte-equal requests (but for ids)."""

    def respond(payload):
        if interacting(payload):
            turn = assistant_turns(payload)
            if turn == 0:
                return {"tool_calls": [("json_parser", {"json_string": "[1, 2]", "query": "[0]"})]}
            if turn == 1:
                return {"tool_calls": [("no_such_tool", {})]}
            return {"tool_calls": [("datetime", {})]}  # asked for although no tools offered
        return {"content": "CONTINUE"}

    cfg = fake_model_config("http://unused", max_steps=1, max_tool_rounds=2)
    requests, traces = {}, {}
    for framework in ("langgraph", "langchain"):
        with ScriptedChatServer(respond) as srv:
            cfg["models"]["fake"]["base_url"] = srv.base_url
            (traces[framework],) = run_stack(cfg, tmp_path / framework, framework=framework)
        requests[framework] = [without_ids(r) for r in srv.requests]
    assert requests["langchain"] == requests["langgraph"]
    lc = traces["langchain"]
    assert lc.status == "ok", lc.error_message
    assert [(c.name, c.ok) for c in lc.tool_calls] == [
        ("json_parser", True),
        ("no_such_tool", False),
    ]
    assert [(c.name, c.ok) for c in lc.tool_calls] == [
        (c.name, c.ok) for c in traces["langgraph"].tool_calls
    ]
    # system prompt: none added by the agent
    assert not any(m["role"] == "system" for r in requests["langchain"] for m in r["messages"])


def test_capped_turn_ends_the_node_without_running_tools(tmp_path, fake_model_config):
    def respond(payload):
        if interacting(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=1),
            tmp_path,
            framework="langchain",
        )
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime"]
    interact = [r for r in srv.requests if interacting(r)]
    assert len(interact) == 2  # one tool round, then one turn without tools
    assert "tools" in interact[0] and "tools" not in interact[1]
    assert [(n.node, n.text) for n in trace.node_outputs if n.node == "interact"] == [
        ("interact", "")
    ]
    assert trace.node_outputs[-1].node == "report"


def test_tool_choice_applies_to_the_first_turn(tmp_path, fake_model_config):
    def respond(payload):
        if interacting(payload) and assistant_turns(payload) == 0:
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    cfg = fake_model_config("http://unused", max_steps=1)
    cfg["workflow"]["nodes"][2]["tool_choice"] = "required"
    with ScriptedChatServer(respond) as srv:
        cfg["models"]["fake"]["base_url"] = srv.base_url
        (trace,) = run_stack(cfg, tmp_path, framework="langchain")
    assert trace.status == "ok", trace.error_message
    interact = [r for r in srv.requests if interacting(r)]
    assert [r["tool_choice"] for r in interact] == ["required", "auto"]
    assert [n.text for n in trace.node_outputs if n.node == "interact"] == ["done."]


def test_malformed_call_beside_a_valid_one_is_recorded_once(tmp_path, fake_model_config):
    """create_agent answers a malformed call itself; it is recorded once, never run."""

    def respond(payload):
        if interacting(payload) and assistant_turns(payload) == 0:
            return {
                "tool_calls": [
                    ("json_parser", {"json_string": '{"a": 7}', "query": "a"}),
                    ("python_repl", '{"code": "1+'),
                ]
            }
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="langchain"
        )
    assert trace.status == "ok", trace.error_message
    calls = sorted((c.name, c.ok) for c in trace.tool_calls)
    assert calls == [("json_parser", True), ("python_repl", False)]
    bad = next(c for c in trace.tool_calls if c.name == "python_repl")
    assert "not valid JSON" in bad.error and bad.arguments == '{"code": "1+'
    follow_up = next(r for r in srv.requests if interacting(r) and assistant_turns(r) == 1)
    tool_msgs = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert "7" in tool_msgs
    assert any("malformed" in t for t in tool_msgs)  # the agent's own answer

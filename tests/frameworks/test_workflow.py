"""The workflow contract every framework adapter must meet, with a scripted model.

The model is a test double (a scripted OpenAI-compatible server); everything between the
runner and that endpoint is the real thing: the gateway, the framework's own runtime, the
protocol and the tools. Every test runs once per framework in ``FRAMEWORKS``.
"""

from __future__ import annotations

import json

import pytest

from mastif.execution.runner import Checkpoint
from mastif.tasks import load_tasks
from tests.support.contract_frameworks import CONTRACT_FRAMEWORKS as FRAMEWORKS
from tests.support.contract_frameworks import (
    TEXT_TOOL_RESULTS,
    invalid_json_error,
    results_follow_up,
    tool_result_message,
    wire_tool_name,
)
from tests.support.fakes import (
    ScriptedChatServer,
    in_interaction_round,
    last_user_text,
    opens_interaction_round,
)
from tests.support.stackrun import run_stack


@pytest.fixture(params=FRAMEWORKS)
def framework(request):
    return request.param


@pytest.fixture
def fake_model_config(fake_model_config, framework):
    """The conftest factory, with the framework under test as the only framework."""

    def make(base_url, **generation):
        cfg = fake_model_config(base_url, **generation)
        cfg["frameworks"] = [framework]
        return cfg

    return make


def node_sequence(trace):
    return [(n.node, n.step) for n in trace.node_outputs]


def never_done(payload):
    return {"content": "Still working. CONTINUE"}


def test_observe_interact_alternate_for_max_steps(tmp_path, fake_model_config):
    with ScriptedChatServer(never_done) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=3), tmp_path)
    assert trace.status == "ok", trace.error_message
    assert node_sequence(trace) == [
        ("navigate", 1),
        ("observe", 1), ("interact", 1),
        ("observe", 2), ("interact", 2),
        ("observe", 3), ("interact", 3),
        ("report", 1),
    ]  # fmt: skip
    assert trace.final_answer == "Still working. CONTINUE"
    # every call went through the gateway and was attributed to its node
    assert [c.node for c in trace.llm_calls] == [n for n, _ in node_sequence(trace)]
    assert trace.n_llm_calls == 8
    assert trace.prompt_tokens == 8 * 11 and trace.completion_tokens == 8 * 7


def test_observe_stops_loop_early(tmp_path, fake_model_config):
    def respond(payload):
        text = last_user_text(payload)
        if "observation round 2" in text:
            return {"content": "The cart holds the item.\nTASK COMPLETE"}
        return {"content": "Looking around. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=3), tmp_path)
    assert node_sequence(trace) == [
        ("navigate", 1), ("observe", 1), ("interact", 1), ("observe", 2), ("report", 1),
    ]  # fmt: skip


def test_prompts_carry_task_and_history(tmp_path, fake_model_config):
    task = load_tasks("builtin")[0]
    with ScriptedChatServer(lambda p: {"content": "NAV-PLAN-XYZ"}) as srv:
        run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path, [task])
    first, second = srv.requests[0], srv.requests[1]
    assert task.confirmed_task in last_user_text(first)
    assert task.website in last_user_text(first)
    assert "NAV-PLAN-XYZ" in last_user_text(second)  # observe sees navigate's output
    assert first["temperature"] == 0.7 and first["seed"] == 20260504


def test_tool_arguments_reach_the_tool_as_produced(tmp_path, fake_model_config, framework):
    args = {
        "json_string": '{"flights": [{"price": 120}, {"price": 95}]}',
        "query": "flights[1].price",
    }

    def respond(payload):
        if opens_interaction_round(payload):
            return {"tool_calls": [("json_parser", args), ("no_such_tool", {"x": 1})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path)
    calls = {c.name: c for c in trace.tool_calls}
    ok_call, bad_call = calls["json_parser"], calls["no_such_tool"]
    assert len(trace.tool_calls) == 2
    assert ok_call.name == "json_parser" and json.loads(ok_call.arguments) == args
    assert ok_call.ok and ok_call.output == "95" and ok_call.node == "interact"
    assert not bad_call.ok and "unknown tool 'no_such_tool'" in bad_call.error
    follow_up = results_follow_up(framework, srv.requests)
    # tools were offered with their guidance descriptions, only on the interact node
    offered = {t["function"]["name"] for t in follow_up["tools"]}
    tools = ("python_repl", "sympy", "datetime", "json_parser")
    assert offered == {wire_tool_name(framework, t) for t in tools}
    assert "tools" not in srv.requests[0]
    if framework in TEXT_TOOL_RESULTS:
        # the refusal ended the step; the model reads it in its next user turn
        assert "no_such_tool" in last_user_text(follow_up).rsplit("interaction round", 1)[1]
        return
    # the follow-up request carries the tool results, and the assistant turn that asked
    # for them has content "" (the gateway's mend for llama.cpp), never null
    tool_msgs = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assistant = [m for m in follow_up["messages"] if m["role"] == "assistant"][-1]
    # matched by call id: a framework may write results back as they finish (SK)
    said = {m["tool_call_id"]: m["content"] for m in tool_msgs}
    ok_id, bad_id = (tc["id"] for tc in assistant["tool_calls"])
    assert said[ok_id] == tool_result_message(framework, "95")
    # the refused call was answered with the framework's own refusal text (CrewAI: "Tool not found")
    assert len(tool_msgs) == 2 and said[bad_id] != "95"
    assert assistant["content"] == "" and assistant["tool_calls"]


def test_tool_rounds_are_capped(tmp_path, fake_model_config):
    def respond(payload):
        # a tool call whenever tools are offered (a call in a reply to a request without
        # tools is not run: the cap is what withholds them)
        if "tools" in payload:
            return {"tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=2), tmp_path
        )
    assert [c.name for c in trace.tool_calls] == ["datetime", "datetime"]
    assert all(c.ok for c in trace.tool_calls)
    # the last interact call is made without tools, so the node ends in text
    # (the interact prompt is the last user turn, or is followed by a framework's own
    # text turns of tool results: smolagents' "Observation:")
    interact = [r for r in srv.requests if in_interaction_round(r)]
    last_interact = interact[-1]
    assert "tools" not in last_interact


def test_invalid_tool_json_is_a_failed_call(tmp_path, fake_model_config, framework):
    def respond(payload):
        if opens_interaction_round(payload):
            return {"tool_calls": [("python_repl", '{"code": "1+')]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path)
    (call,) = trace.tool_calls
    expected = invalid_json_error(framework)
    if expected is None:  # the framework repairs the arguments itself (its own behaviour)
        assert call.name == "python_repl"
    else:
        assert not call.ok and expected in call.error


def test_provider_error_is_retried_then_classified(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"status": 500}) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url), tmp_path)
    assert trace.status == "error" and trace.error_class == "provider_error"
    assert len(srv.requests) == 2  # provider_retries=1: one try + one retry
    (call,) = trace.llm_calls
    assert call.attempts == 2 and call.http_status == 500 and "upstream 500" in call.error


@pytest.mark.slow
def test_timeout_is_a_row_not_a_crash(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 3}) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, timeout_s=1), tmp_path)
    assert trace.status == "timeout" and trace.error_class == "timeout"
    assert 0.9 < trace.wall_seconds < 2.5


# resuming from the checkpoint is the runner's business, not a framework's: one framework is
# enough (what a framework keeps between runs is closed with the run: test_framework_plugins)
@pytest.mark.parametrize("framework", ["langgraph"])
def test_checkpoint_resumes_without_redoing(tmp_path, fake_model_config):
    tasks = load_tasks("builtin")[:2]
    cfg = fake_model_config("http://unused", max_steps=1)
    with ScriptedChatServer(lambda p: {"content": "TASK COMPLETE"}) as srv:
        cfg["models"]["fake"]["base_url"] = srv.base_url
        first = run_stack(cfg, tmp_path, tasks[:1])
        n_first = len(srv.requests)
        both = run_stack(cfg, tmp_path, tasks)
    assert both[0].run_id == first[0].run_id
    assert len(srv.requests) == 2 * n_first  # only the second task ran
    assert len(Checkpoint(tmp_path / "ckpt.jsonl").load()) == 2


# which config a checkpointed run belongs to is the runner's business, not a framework's
@pytest.mark.parametrize("framework", ["langgraph"])
def test_checkpoint_ignores_runs_of_another_config(tmp_path, fake_model_config):
    tasks = load_tasks("builtin")[:1]
    with ScriptedChatServer(lambda p: {"content": "TASK COMPLETE"}) as srv:
        run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path, tasks)
        n = len(srv.requests)
        run_stack(fake_model_config(srv.base_url, max_steps=1, temperature=0.2), tmp_path, tasks)
    assert len(srv.requests) == 2 * n


@pytest.mark.parametrize("torn", ['{"run_id": "abc", "trunc', ""])
def test_checkpoint_tolerates_torn_line(tmp_path, torn):
    path = tmp_path / "c.jsonl"
    path.write_text(torn + "\n")
    assert Checkpoint(path).load() == {}


def test_workflow_without_loop_runs_in_line(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "ok"}) as srv:
        cfg = fake_model_config(srv.base_url)
        nodes = cfg["workflow"]["nodes"]
        cfg["workflow"]["nodes"] = [nodes[0], nodes[3]]
        (trace,) = run_stack(cfg, tmp_path)
    assert node_sequence(trace) == [("navigate", 1), ("report", 1)]


def test_loop_at_the_end_exits_to_end(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["workflow"]["nodes"] = cfg["workflow"]["nodes"][:3]
        (trace,) = run_stack(cfg, tmp_path)
    assert node_sequence(trace) == [
        ("navigate", 1), ("observe", 1), ("interact", 1), ("observe", 2), ("interact", 2),
    ]  # fmt: skip
    assert trace.final_answer == "CONTINUE"


def test_split_loop_is_rejected(tmp_path, fake_model_config):
    cfg = fake_model_config("http://unused")
    nodes = cfg["workflow"]["nodes"]
    nodes[0]["loop"] = True  # navigate and observe/interact loops separated? no: 0,1,2 consecutive
    nodes[2]["loop"] = False
    nodes[3]["loop"] = True  # loop nodes 0,1,3: not consecutive
    with pytest.raises(ValueError, match="loop nodes must be consecutive"):
        run_stack(cfg, tmp_path)


def test_history_shows_each_visits_tool_results_before_its_output() -> None:
    from mastif.core.trace import NodeOutput, ToolCall
    from mastif.frameworks.plan import format_history

    outputs = [NodeOutput("navigate", 1, "plan", "Search first."),
               NodeOutput("interact", 1, "act", "Found it.")]  # fmt: skip
    calls = [
        ToolCall("interact", 1, "web_search", '{"query": "tent"}', True, "1. Tent $89", None, 0.1),
        ToolCall("interact", 1, "web_browser", '{"url": "/x"}', False, "", "HTTP 404 from /x", 0.1),
        ToolCall("interact", 2, "web_search", "{}", True, "not shown: visit in progress", None, 0),
    ]
    assert format_history(outputs, calls).splitlines() == [
        "[navigate 1] Search first.",
        '[interact 1] tool web_search({"query": "tent"}) -> ok: 1. Tent $89',
        '[interact 1] tool web_browser({"url": "/x"}) -> failed: HTTP 404 from /x',
        "[interact 1] Found it.",
    ]
    long = ToolCall("interact", 1, "web_browser", "{}", True, "x" * 5000, None, 0.1)
    line = format_history(outputs[1:], [long]).splitlines()[0]
    assert line.endswith(" ...") and len(line) < 800

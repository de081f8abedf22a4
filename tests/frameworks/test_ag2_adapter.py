"""What is particular to the AG2 adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that AG2's own ``GroupChat`` (a speaker-selection function, run by the
``GroupChatManager``) drives the linear workflow, what AG2 puts on the wire (its system
message, the tool schemas as given), its refusals and their record, the turn policy applied in
its model client, that the run's agents are built once, that AG2's MCP toolkit is what calls
the tools under ``mcp``, that AG2 prints nothing, and that a timed-out run stops.
"""

from __future__ import annotations

import json
import time

import pytest
from autogen import GroupChat, GroupChatManager

import mastif.frameworks.ag2 as ag2
from mastif.execution.experiment import parse_config
from mastif.frameworks import orchestration
from mastif.frameworks import plan as workflow
from mastif.frameworks.plan import plan_workflow, render_prompt
from mastif.tasks import load_tasks
from tests.support.adapter_checks import (
    check_an_unreachable_endpoint_is_classified_as_such,
    check_required_tool_choice_holds_for_the_first_turn,
    first_interact_turn,
)
from tests.support.fakes import ScriptedChatServer, in_interaction_round, last_user_text
from tests.support.paths import REPO
from tests.support.stackrun import SLOW_CODE, SLOW_OUTPUT, run_stack, run_with_one_reply_of_calls
from tests.support.workflows import EARLY_STOP_VISITS

FRAMEWORK = "ag2"


def refuse(*args, **kwargs):
    raise AssertionError("mastif's own chaining must not run the AG2 stack")


@pytest.mark.parametrize("protocol", ["standard", "a2a"])
def test_the_group_chat_drives_the_loop(tmp_path, fake_model_config, monkeypatch, protocol):
    """CONTINUE twice, then TASK COMPLETE: one GroupChat per run, whose speaker-selection
    function picked every node in turn (the manager's transcript), then ended the chat."""
    monkeypatch.setattr(workflow, "drive_workflow", refuse)
    monkeypatch.setattr(orchestration, "drive_workflow", refuse)
    monkeypatch.setattr(orchestration, "run_linear", refuse)
    built = []
    original = ag2.build_group_chat

    def spy(ctx, dispatch):
        built.append(original(ctx, dispatch))
        return built[-1]

    monkeypatch.setattr(ag2, "build_group_chat", spy)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=5)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert trace.final_answer == "Still going. CONTINUE"
    ((starter, manager),) = built
    assert isinstance(manager, GroupChatManager) and isinstance(manager.groupchat, GroupChat)
    chat = manager.groupchat
    assert isinstance(chat.speaker_selection_method, ag2.Route)
    # the manager's transcript: the task, then every node's turn, as the route chose them
    assert [m["name"] for m in chat.messages] == [ag2.STARTER] + [n for n, _ in EARLY_STOP_VISITS]
    assert chat.messages[0]["content"] == load_tasks("builtin")[0].confirmed_task
    assert [m["content"] for m in chat.messages[1:]] == [o.text for o in trace.node_outputs]


def test_the_route_follows_the_plans_rules():
    """The speaker-selection function alone, on layouts drive_workflow handles: the same
    visits in the same order (a loop node that stops, max_steps, no loop, no nodes after)."""
    cfg = parse_config(_config())

    def visits(before, loop, after, max_steps, stop_at=None):
        nodes = {n.name: n for n in plan_workflow(cfg.workflow, cfg.generation, REPO).nodes}
        plan = workflow.WorkflowPlan(
            tuple(nodes[n] for n in before), tuple(nodes[n] for n in loop),
            tuple(nodes[n] for n in after), max_steps,
        )  # fmt: skip

        class Speaker:
            def __init__(self, name):
                self.name = name

        route = ag2.Route(plan, {n: Speaker(n) for n in nodes})
        chat = GroupChat(agents=[], messages=[{"content": "task"}])
        seen, speaker = [], route(None, chat)
        while speaker is not None:
            node = nodes[speaker.name]
            step = route.step_of(node)
            seen.append((speaker.name, step))
            said = "TASK COMPLETE" if (speaker.name, step) == stop_at else "CONTINUE"
            chat.messages.append({"content": said})
            speaker = route(speaker, chat)
        expected = []

        async def visit(node, step):
            expected.append((node.name, step))
            return "TASK COMPLETE" if (node.name, step) == stop_at else "CONTINUE"

        import asyncio

        asyncio.run(workflow.drive_workflow(plan, visit))
        assert seen == expected
        return seen

    full = visits(["navigate"], ["observe", "interact"], ["report"], 2)
    assert full == [("navigate", 1), ("observe", 1), ("interact", 1), ("observe", 2),
                    ("interact", 2), ("report", 1)]  # fmt: skip
    assert visits(["navigate"], ["observe", "interact"], ["report"], 3, ("observe", 2))[-1] == (
        "report", 1,
    )  # fmt: skip
    assert visits([], ["observe"], [], 3) == [("observe", 1), ("observe", 2), ("observe", 3)]
    assert visits(["navigate"], ["observe", "interact"], [], 0) == [("navigate", 1)]
    assert visits(["navigate", "report"], [], [], 2) == [("navigate", 1), ("report", 1)]


def _config():
    import yaml

    with (REPO / "config" / "config.yaml").open() as fh:
        return yaml.safe_load(fh)


def test_ag2s_system_message_and_the_tool_schemas_as_given(tmp_path, fake_model_config):
    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    plan = plan_workflow(parse_config(cfg).workflow, parse_config(cfg).generation, REPO)
    ours = render_prompt(plan.nodes[0], load_tasks("builtin")[0], [], 1, 1, [])
    first = srv.requests[0]
    # ConversableAgent's own system message, then our prompt as the executor's message
    assert first["messages"][0] == {"role": "system", "content": "You are a helpful AI Assistant."}
    assert first["messages"][1]["role"] == "user" and first["messages"][1]["content"] == ours
    assert first["messages"][1]["name"] == "navigate_tools"  # AG2 names the sending agent
    assert len(first["messages"]) == 2
    assert first["max_tokens"] == 77 and "tools" not in first and "tool_choice" not in first
    with_tools = next(r for r in srv.requests if "tools" in r)
    (dt,) = [t["function"] for t in with_tools["tools"] if t["function"]["name"] == "datetime"]
    spec = next(s for s in _tool_specs(cfg) if s.name == "datetime")
    assert dt["parameters"] == spec.parameters
    (call,) = trace.tool_calls
    assert call.name == "datetime" and call.ok and json.loads(call.arguments) == {}


def _tool_specs(cfg):
    from mastif.protocols.standard import InProcessTransport
    from mastif.tools import get_tools

    return InProcessTransport(get_tools(list(parse_config(cfg).tools))).tool_specs()


def test_refusals_are_ag2s_and_recorded_in_order(tmp_path, fake_model_config):
    """An unknown tool ("Error: Function x not found.") and arguments that are not JSON ("The
    argument must be in JSON format.") are answered by AG2's executor and recorded as failed
    calls, in the model's order."""
    good = {"json_string": '{"price": 95}', "query": "price"}
    calls = [("no_such_tool", {"x": 1}), ("json_parser", good), ("python_repl", '{"code": "1+'),
             ("datetime", {})]  # fmt: skip

    trace, requests = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("no_such_tool", False), ("json_parser", True), ("python_repl", False), ("datetime", True),
    ]  # fmt: skip
    unknown, _, invalid, _ = trace.tool_calls
    assert json.loads(unknown.arguments) == {"x": 1}
    assert "unknown tool 'no_such_tool'" in unknown.error
    assert "Error: Function no_such_tool not found." in unknown.error
    assert invalid.arguments == '{"code": "1+'  # the model's text, as it came
    assert "The argument must be in JSON format." in invalid.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    texts = [said[c["id"]] for c in asked["tool_calls"]]
    assert texts[0] == "Error: Function no_such_tool not found."
    assert texts[1] == "95"
    assert texts[2].startswith("Error: ") and texts[2].endswith(
        "The argument must be in JSON format."
    )
    assert texts[3] == trace.tool_calls[3].output


def test_arguments_that_are_not_an_object_fail_the_run_as_in_ag2(tmp_path, fake_model_config):
    """AG2's executor fails on JSON arguments that are not an object (its ExecuteFunctionEvent
    requires a dict): the run fails as an AG2 user's would, and the call is on record."""
    calls = [("sympy", "[1, 2]")]
    trace, _ = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert trace.status == "error" and "ExecuteFunctionEvent" in trace.error_message
    (call,) = trace.tool_calls
    assert (call.name, call.ok, call.arguments) == ("sympy", False, "[1, 2]")
    assert "ValidationError" in call.error


def test_a_failed_tool_is_answered_as_ag2_answers_an_exception(tmp_path, fake_model_config):
    calls = [("json_parser", {"json_string": "{", "query": "a"})]
    trace, requests = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    (call,) = trace.tool_calls
    assert not call.ok and call.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    (tool_msg,) = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assert tool_msg["content"] == f"Error: {call.error}"


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    """AG2's executor gathers a reply's calls: the quick datetime call starts before the slow
    python_repl call ended, yet the record keeps the model's order."""
    calls = [("python_repl", {"code": SLOW_CODE}), ("datetime", {})]

    trace, _ = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    slow, quick = trace.tool_calls
    assert (slow.name, slow.ok, slow.output) == ("python_repl", True, SLOW_OUTPUT)
    assert quick.name == "datetime" and quick.ok
    assert quick.started_s < slow.started_s + slow.duration_s  # ran while the slow one did


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn(FRAMEWORK, tmp_path, fake_model_config)


def test_the_last_request_carries_no_tools_and_its_calls_do_not_run(tmp_path, fake_model_config):
    """Two tool rounds, then one request without tools (AG2 would send its tools again);
    the tool calls of its reply are dropped, so the visit ends with that reply's text."""

    def respond(payload):
        if in_interaction_round(payload):
            return {"content": "calling again", "tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=2)
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime", "datetime"]
    interact = [r for r in srv.requests if in_interaction_round(r)]
    assert [("tools" in r, r.get("tool_choice")) for r in interact] == [
        (True, "auto"), (True, "auto"), (False, None),
    ]  # fmt: skip
    (out,) = [o for o in trace.node_outputs if o.node == "interact"]
    assert out.text == "calling again"


@pytest.mark.parametrize("protocol", ["standard", "a2a"])
def test_agents_and_tools_are_built_once_per_run(
    protocol, tmp_path, fake_model_config, monkeypatch
):
    builds = []
    original = ag2.RunObjects.build.__func__

    async def spy(cls, ctx, stack):
        builds.append(ctx.run_id)
        return await original(cls, ctx, stack)

    monkeypatch.setattr(ag2.RunObjects, "build", classmethod(spy))
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6  # six node visits (under a2a: six run_node calls)
    assert builds == [trace.run_id]


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such(FRAMEWORK, fake_model_config)


def test_under_mcp_ag2s_toolkit_calls_the_tools(tmp_path, fake_model_config, monkeypatch):
    """The tools come from AG2's MCP toolkit (autogen.mcp.create_toolkit), made once for the
    run on one session, and every call went over MCP."""
    import autogen.mcp

    made = []
    real = autogen.mcp.create_toolkit

    async def spy(session, **kwargs):
        made.append(kwargs)
        return await real(session, **kwargs)

    monkeypatch.setattr(autogen.mcp, "create_toolkit", spy)

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {}), ("no_such_tool", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["mcp"]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert made == [{"use_mcp_resources": False}]
    assert trace.protocol_calls == 2  # the datetime calls; the refused one never left
    assert sorted((c.name, c.ok) for c in trace.tool_calls) == [
        ("datetime", True), ("datetime", True), ("no_such_tool", False), ("no_such_tool", False),
    ]  # fmt: skip
    follow_up = next(r for r in srv.requests if any(m["role"] == "tool" for m in r["messages"]))
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    # the toolkit's result, (text, non-text contents), written back as AG2 serialises a tuple
    first = next(c for c in trace.tool_calls if c.ok)
    assert said[asked["tool_calls"][0]["id"]] == repr((first.output, None))


def test_ag2_prints_nothing(tmp_path, fake_model_config, capfd):
    """AG2 prints every message and tool event to the console by default; a run's output
    stream drops them."""
    calls = [("datetime", {}), ("no_such_tool", {})]
    trace, _ = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    out = capfd.readouterr().out
    assert "datetime" not in out and "no_such_tool" not in out and ">>>>" not in out


@pytest.mark.slow
def test_a_timed_out_run_stops_its_group_chat(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework=FRAMEWORK
        )
        time.sleep(2.5)
        # the cancelled chat made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []

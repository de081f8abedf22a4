"""What is particular to the Google ADK adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that ADK's workflow agents (a ``SequentialAgent`` holding a ``LoopAgent``) drive the
linear workflow and that a ``stop_when`` match ends the loop by ADK's escalation without a
model call, that each visit is the node's ``LlmAgent`` on ADK's ``OpenAILlm``, what ADK puts on
the wire, its refusals, the turn policy's callbacks, that the run's agents are built once, and
that a timed-out run stops.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from mastif.execution.experiment import parse_config
from mastif.frameworks.plan import plan_workflow, render_prompt
from mastif.tasks import load_tasks
from tests.support.adapter_checks import (
    check_an_unreachable_endpoint_is_classified_as_such,
    check_required_tool_choice_holds_for_the_first_turn,
    first_interact_turn,
)
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.paths import REPO
from tests.support.stackrun import SLOW_CODE, SLOW_OUTPUT, run_stack, run_with_one_reply_of_calls
from tests.support.workflows import EARLY_STOP_VISITS

adk = pytest.importorskip("mastif.frameworks.google_adk")


def spy_events(monkeypatch) -> list:
    """Every event ADK's runners yield (the session's record of the run)."""
    events = []
    original = adk.Runner.run_async

    async def spy(self, **kwargs):
        async for event in original(self, **kwargs):
            events.append(event)
            yield event

    monkeypatch.setattr(adk.Runner, "run_async", spy)
    return events


def test_the_workflow_agents_drive_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: the runner ran one SequentialAgent whose LoopAgent
    (max_iterations = max_steps) made the loop visits; the observe agent's escalation ended
    the loop without a model call of its own; mastif's drive_workflow was never used."""

    def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the ADK stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    roots = []
    original_build = adk.build_workflow

    def spy_build(ctx, agents):
        root = original_build(ctx, agents)
        roots.append(root)
        return root

    monkeypatch.setattr(adk, "build_workflow", spy_build)
    events = spy_events(monkeypatch)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework="google_adk"
        )
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert len(srv.requests) == len(EARLY_STOP_VISITS)  # the exit made no model call
    (root,) = roots
    assert isinstance(root, adk.SequentialAgent)
    navigate, loop, report = root.sub_agents
    assert isinstance(loop, adk.LoopAgent) and loop.max_iterations == 5
    assert [a.name for a in loop.sub_agents] == ["observe", "interact"]
    assert all(isinstance(a, adk.NodeAgent) for a in (navigate, *loop.sub_agents, report))
    # ADK's agents made the visits: the model replies are events of the node agents, in order
    replies = [e.author for e in events if e.author != "user" and e.content and e.content.parts]
    assert replies == [node for node, _ in EARLY_STOP_VISITS]
    (escalation,) = [e for e in events if e.actions.escalate]
    assert escalation.author == "observe"
    after = [e.author for e in events[events.index(escalation) + 1 :] if e.content]
    assert after == ["user", "report"]  # the report's prompt, then its reply: the loop is over
    assert trace.final_answer == "Still going. CONTINUE"


def test_adks_own_prompt_and_tool_declarations(tmp_path, fake_model_config):
    """ADK's system prompt, our node prompt as the only user turn, the generation settings
    (the seed added to OpenAILlm's request), the protocol's schemas as they are, and a tool's
    text result written back as ADK's function response."""

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework="google_adk")
    assert trace.status == "ok", trace.error_message
    plan = plan_workflow(parse_config(cfg).workflow, parse_config(cfg).generation, REPO)
    ours = render_prompt(plan.nodes[0], load_tasks("builtin")[0], [], 1, 1, [])
    first = srv.requests[0]
    assert first["messages"] == [
        {"role": "system", "content": 'You are an agent. Your internal name is "navigate".'},
        {"role": "user", "content": ours},
    ]
    assert first["max_tokens"] == 77 and first["seed"] == 20260504
    assert first["temperature"] == 0.7
    # what OpenAILlm passes as None is left out, not sent as null
    assert not {"tools", "tool_choice", "response_format"} & set(first)
    with_tools = next(r for r in srv.requests if "tools" in r)
    assert with_tools["tool_choice"] == "auto"
    defs = {t["function"]["name"]: t["function"] for t in with_tools["tools"]}
    from mastif.tools import get_tools

    schemas = {t.name: t.parameters for t in get_tools(list(defs))}
    assert {name: d["parameters"] for name, d in defs.items()} == schemas
    assert all("strict" not in d for d in defs.values())
    (call,) = trace.tool_calls
    assert call.name == "datetime" and call.ok and json.loads(call.arguments) == {}
    follow_up = next(r for r in srv.requests if any(m["role"] == "tool" for m in r["messages"]))
    (tool_message,) = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assert json.loads(tool_message["content"]) == {"result": call.output}


def test_refusals_are_recorded_in_the_models_order(tmp_path, fake_model_config):
    """An unknown tool is answered with ADK's own text and recorded as failed; arguments that
    are not JSON reach the tool as {} (OpenAILlm's parsing), whose schema check refuses them;
    every call of the reply is recorded in the model's order."""
    calls = [("json_parser", {"json_string": '{"price": 95}', "query": "price"}),
             ("no_such_tool", {"x": 1}), ("python_repl", '{"code": "1+'),
             ("datetime", {})]  # fmt: skip
    trace, requests = run_with_one_reply_of_calls(calls, "google_adk", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("json_parser", True), ("no_such_tool", False), ("python_repl", False), ("datetime", True),
    ]  # fmt: skip
    _, unknown, bad_json, _ = trace.tool_calls
    assert json.loads(unknown.arguments) == {"x": 1}
    assert unknown.error.startswith("unknown tool 'no_such_tool'; offered: ")
    assert "Tool 'no_such_tool' not found." in unknown.error  # ADK's lookup error
    assert bad_json.arguments == "{}" and "'code' is a required property" in bad_json.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    said = {m["tool_call_id"]: json.loads(m["content"]) for m in follow_up["messages"]
            if m["role"] == "tool"}  # fmt: skip
    answers = [said[c["id"]] for c in asked["tool_calls"]]
    assert answers[0] == {"result": "95"}
    assert answers[1]["error"].startswith(
        "Invoking `no_such_tool()` failed as no tool with that name is available."
    )
    assert "required property" in answers[2]["error"]
    # ADK writes back the arguments as it parsed them
    assert json.loads(asked["tool_calls"][2]["function"]["arguments"]) == {}


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    """ADK runs a reply's calls concurrently: the quick datetime call starts before the slow
    python_repl call ended, yet the record keeps the model's order."""
    calls = [("python_repl", {"code": SLOW_CODE}), ("datetime", {})]
    trace, _ = run_with_one_reply_of_calls(calls, "google_adk", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    slow, quick = trace.tool_calls
    assert (slow.name, slow.ok, slow.output) == ("python_repl", True, SLOW_OUTPUT)
    assert quick.name == "datetime" and quick.ok
    assert quick.started_s < slow.started_s + slow.duration_s  # ran while the slow one did


def test_calls_in_a_reply_to_a_request_without_tools_are_not_run(tmp_path, fake_model_config):
    """After max_tool_rounds the request goes out without tools; calls in its reply are
    dropped by the after-model callback, and its text is the node's output."""

    def respond(payload):
        if "interaction round" in last_user_text(payload):
            return {"content": "my answer", "tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=1)
        (trace,) = run_stack(cfg, tmp_path, framework="google_adk")
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime"]  # the first round's only
    interact = [r for r in srv.requests if "interaction round" in last_user_text(r)]
    assert ["tools" in r for r in interact] == [True, False]
    (out,) = [o for o in trace.node_outputs if o.node == "interact"]
    assert out.text == "my answer"


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("google_adk", tmp_path, fake_model_config)


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("google_adk", fake_model_config)


@pytest.mark.parametrize("protocol", ["standard", "a2a", "mcp"])
def test_agents_are_built_once_per_run(protocol, tmp_path, fake_model_config, monkeypatch):
    """One LlmAgent per node, built once per run (under a2a by the node agents' first visit,
    each then the root of a runner of its own); under mcp the tools are ADK's McpToolset."""
    built = []
    original = adk.RunObjects.open.__func__

    def spy(cls, ctx, stack, in_workflow=True):
        objects = original(cls, ctx, stack, in_workflow)
        built.append(objects)
        return objects

    monkeypatch.setattr(adk.RunObjects, "open", classmethod(spy))

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework="google_adk")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6
    assert [c.name for c in trace.tool_calls] == ["datetime", "datetime"]
    (objects,) = built
    assert set(objects.agents) == {"navigate", "observe", "interact", "report"}
    assert all(isinstance(a.model, adk.OpenAILlm) for a in objects.agents.values())
    assert isinstance(objects.mcp, adk.McpToolset) == (protocol == "mcp")
    if protocol == "a2a":
        assert set(objects.runners) == {"navigate", "observe", "interact", "report"}
    if protocol == "mcp":
        assert trace.protocol_calls == 2


@pytest.mark.slow
def test_a_timed_out_run_stops(tmp_path, fake_model_config):
    threads = threading.active_count()
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="google_adk"
        )
        time.sleep(2.5)
        # the cancelled runner made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []
    assert threading.active_count() <= threads  # nothing left running in a thread

"""What is particular to the Microsoft Agent Framework adapter, against a scripted model behind
the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that the framework's own ``WorkflowBuilder`` workflow drives the linear workflow
(executors, conditional edges, a cycle), what the framework puts on the wire, its refusals,
the turn policy on its function-invocation loop, that the run's objects are built once, that
its OpenTelemetry instrumentation is off, and that a timed-out run stops.
"""

from __future__ import annotations

import json
import time

import pytest
from agent_framework import Workflow

import mastif.frameworks.agent_framework as af
from mastif.execution.experiment import parse_config
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

FRAMEWORK = "agent_framework"


def test_the_workflow_builder_workflow_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: one Workflow per run, built with an executor per
    node, conditional edges and the loop's cycle, ran every visit; drive_workflow never ran."""

    def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the Agent Framework stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    built = []
    original = af.build_workflow

    def spy(ctx, dispatch):
        built.append(original(ctx, dispatch))
        return built[-1]

    monkeypatch.setattr(af, "build_workflow", spy)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework=FRAMEWORK
        )
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert trace.final_answer == "Still going. CONTINUE"
    (workflow,) = built
    assert isinstance(workflow, Workflow)
    edges = {
        (e.source_id, e.target_id, e.condition_name) for g in workflow.edge_groups for e in g.edges
    }
    pairs = {(s, t) for s, t, _ in edges}
    assert {("navigate", "observe"), ("observe", "interact"), ("interact", "observe"),
            ("observe", "report"), ("interact", "report"), ("report", af.FINISH)} <= pairs  # fmt: skip
    conditioned = {(s, t) for s, t, c in edges if c}
    # the cycle and the loop's exits are conditional edges; the line is not
    assert {("interact", "observe"), ("observe", "report"), ("interact", "report")} <= conditioned
    assert ("navigate", "observe") not in conditioned


def test_no_system_prompt_and_the_frameworks_tool_definitions(tmp_path, fake_model_config):
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
    assert first["messages"] == [{"role": "user", "content": ours}]  # no instructions, no name
    # the framework's own spelling of max_tokens; no client-side streaming
    assert first["max_completion_tokens"] == 77 and "max_tokens" not in first
    assert first["stream"] is False and "tools" not in first
    with_tools = next(r for r in srv.requests if "tools" in r)
    # the framework's tool definitions: the JSON schema as given, no strict, no
    # parallel_tool_calls sent
    (dt,) = [t["function"] for t in with_tools["tools"] if t["function"]["name"] == "datetime"]
    spec = next(s for s in _tool_specs(cfg) if s.name == "datetime")
    assert dt["parameters"] == spec.parameters and "strict" not in dt
    assert "parallel_tool_calls" not in with_tools
    (call,) = trace.tool_calls
    assert call.name == "datetime" and call.ok and json.loads(call.arguments) == {}


def _tool_specs(cfg):
    from mastif.protocols.standard import InProcessTransport
    from mastif.tools import get_tools

    return InProcessTransport(get_tools(list(parse_config(cfg).tools))).tool_specs()


def test_refusals_are_the_frameworks_and_recorded_in_order(tmp_path, fake_model_config):
    """An unknown tool is answered by the framework's loop ('Requested function ... not
    found'); arguments that are not JSON become {"raw": text}, which the schema check
    refuses ("Argument parsing failed"); the record keeps the model's order."""
    good = {"json_string": '{"price": 95}', "query": "price"}
    calls = [("no_such_tool", {"x": 1}), ("json_parser", good), ("python_repl", '{"code": "1+'),
             ("datetime", {})]  # fmt: skip

    trace, requests = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("no_such_tool", False), ("json_parser", True), ("python_repl", False), ("datetime", True),
    ]  # fmt: skip
    unknown, _, refused, _ = trace.tool_calls
    assert json.loads(unknown.arguments) == {"x": 1}
    assert "unknown tool 'no_such_tool'" in unknown.error
    assert refused.arguments == '{"code": "1+'  # the model's text, as it came
    assert refused.error == (
        "Error: Argument parsing failed. Exception: "
        "Missing required argument(s) for 'python_repl': code"
    )
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    texts = [said[c["id"]] for c in asked["tool_calls"]]
    assert texts[0] == 'Error: Requested function "no_such_tool" not found.'
    assert texts[1] == "95"
    assert texts[2] == "Error: Argument parsing failed."
    assert texts[3] == trace.tool_calls[3].output


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    """The loop gathers a reply's calls: the quick datetime call starts before the slow
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


def test_the_loops_last_request_carries_no_tools_and_its_calls_do_not_run(
    tmp_path, fake_model_config
):
    """max_tool_rounds is the loop's max_iterations: two rounds, then one request without
    tools (not tools with tool_choice "none"), whose tool calls are not run; the
    framework's own fallback text is the node's answer."""

    def respond(payload):
        return (
            {"tool_calls": [("datetime", {})]}
            if in_interaction_round(payload)
            else {"content": "CONTINUE"}
        )

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
    assert out.text.startswith("Function invocation limit reached")


@pytest.mark.parametrize("protocol", ["standard", "a2a"])
def test_agents_and_tools_are_built_once_per_run(
    protocol, tmp_path, fake_model_config, monkeypatch
):
    builds = []
    original = af.RunObjects.build.__func__

    async def spy(cls, ctx, nodes, stack):
        builds.append(ctx.run_id)
        return await original(cls, ctx, nodes, stack)

    monkeypatch.setattr(af.RunObjects, "build", classmethod(spy))
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6  # six node visits (under a2a: six run_node calls)
    assert builds == [trace.run_id]


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such(FRAMEWORK, fake_model_config)


def test_opentelemetry_instrumentation_is_off():
    """Switched off on import, stickily: a later enable by other code is ignored."""
    from agent_framework.observability import OBSERVABILITY_SETTINGS, enable_instrumentation

    assert OBSERVABILITY_SETTINGS.ENABLED is False
    enable_instrumentation()
    assert OBSERVABILITY_SETTINGS.ENABLED is False


def test_under_mcp_the_frameworks_own_mcp_tool_connects_once_per_run(
    tmp_path, fake_model_config, monkeypatch
):
    """The tools come from Agent Framework's own MCPStreamableHTTPTool, connected once for
    the run (not per node visit or per call), and the call went over MCP."""
    from agent_framework import MCPStreamableHTTPTool

    connects = []
    real = MCPStreamableHTTPTool.connect

    async def spy(self, *args, **kwargs):
        connects.append(self)
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(MCPStreamableHTTPTool, "connect", spy)

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["mcp"]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert len(connects) == 1
    assert trace.protocol_calls == len(trace.tool_calls) == 2
    assert all(c.ok and c.name == "datetime" for c in trace.tool_calls)


@pytest.mark.slow
def test_a_timed_out_run_stops_its_workflow(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework=FRAMEWORK
        )
        time.sleep(2.5)
        # the cancelled workflow made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []

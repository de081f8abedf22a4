"""What is particular to the Haystack adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that Haystack's own Pipeline (a cycle routed by ``ConditionalRouter`` s) drives the
linear workflow and its ``Agent`` makes every node visit, what Haystack puts on the wire,
its refusals, that the run's objects are built once, that no telemetry is on, and that a
timed-out run stops.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

import pytest

import mastif.frameworks.haystack as hs
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


def test_the_haystack_pipeline_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: one Pipeline per run, whose node components made
    every visit (each one Agent run) and whose routers sent the loop back twice; mastif's
    drive_workflow was never used."""

    def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the Haystack stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    pipelines, visits, agent_runs = [], [], []
    real_build, real_visit_node = hs.build_pipeline, hs.visit_node
    real_visit = hs.RunObjects.visit

    def spy_build(*args, **kwargs):
        built = real_build(*args, **kwargs)
        pipelines.append(built[0])
        return built

    async def spy_visit_node(ctx, dispatch, node, step):
        visits.append((sys._getframe(1).f_code.co_qualname, node.name, step))  # the caller
        return await real_visit_node(ctx, dispatch, node, step)

    async def spy_visit(self, node, step, prompt):
        agent = self.agents[node.name]  # Haystack's Agent, its generator at the node's URL
        assert isinstance(agent, hs.Agent) and agent.chat_generator.node is node
        agent_runs.append(node.name)
        return await real_visit(self, node, step, prompt)

    monkeypatch.setattr(hs, "build_pipeline", spy_build)
    monkeypatch.setattr(hs, "visit_node", spy_visit_node)
    monkeypatch.setattr(hs.RunObjects, "visit", spy_visit)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework="haystack"
        )
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    (pipe,) = pipelines
    assert isinstance(pipe, hs.Pipeline)
    routers = {n for n, c in pipe.walk() if isinstance(c, hs.ConditionalRouter)}
    assert routers == {"observe__route", "interact__route"}
    # the cycle: interact's router goes back to the loop's joiner, which feeds observe
    edges = {(a, b) for a, b, _ in pipe.graph.edges}
    assert {("interact__route", "loop_entry"), ("loop_entry", "observe")} <= edges
    # every visit was made by a node component of the pipeline
    assert visits == [("NodeStep.run_async", n, s) for n, s in EARLY_STOP_VISITS]
    assert agent_runs == [n for n, _ in EARLY_STOP_VISITS]
    assert trace.final_answer == "Still going. CONTINUE"


def test_the_agent_adds_no_system_prompt_and_offers_the_tool_specs(tmp_path, fake_model_config):
    def respond(payload):
        return (
            {"tool_calls": [("datetime", {})]}
            if first_interact_turn(payload)
            else {"content": "done."}
        )

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework="haystack")
    assert trace.status == "ok", trace.error_message
    parsed = parse_config(cfg)
    plan = plan_workflow(parsed.workflow, parsed.generation, REPO)
    ours = render_prompt(plan.nodes[0], load_tasks("builtin")[0], [], 1, 1, [])
    first = srv.requests[0]
    assert first["messages"] == [{"role": "user", "content": ours}]
    assert first["max_tokens"] == 77 and first["stream"] is False and "tools" not in first
    assert first["seed"] == parsed.generation.seed
    with_tools = next(r for r in srv.requests if "tools" in r)
    # Haystack's Tool.tool_spec: the tools' names, descriptions and schemas as they are
    from mastif.tools import get_tools

    specs = {t.name: t for t in get_tools(list(cfg["tools"]))}
    for offered in with_tools["tools"]:
        fn = offered["function"]
        assert set(fn) == {"name", "description", "parameters"}  # not strict
        assert fn["parameters"] == specs[fn["name"]].parameters
    assert with_tools["tool_choice"] == "auto" and "parallel_tool_calls" not in with_tools
    (call,) = trace.tool_calls
    assert call.name == "datetime" and call.ok and json.loads(call.arguments) == {}


def test_refusals_are_haystacks_and_recorded_before_the_calls_that_ran(tmp_path, fake_model_config):
    """An unknown tool gets the Agent's own tool message; arguments that are not JSON make
    the generator drop the call (no tool message: the model is not told); a failing tool is
    written back as Haystack's ToolInvocationError text. The record holds every call,
    refusals first (as Haystack writes its tool messages), then the others in the model's
    order."""
    good = {"json_string": '{"price": 95}', "query": "price"}
    calls = [("json_parser", good), ("no_such_tool", {"x": 1}), ("python_repl", '{"code": "1+'),
             ("sympy", {"expression": 3})]  # fmt: skip

    trace, requests = run_with_one_reply_of_calls(calls, "haystack", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("python_repl", False), ("no_such_tool", False), ("json_parser", True), ("sympy", False),
    ]  # fmt: skip
    dropped, unknown, ok, bad_type = trace.tool_calls
    assert dropped.arguments == '{"code": "1+' and hs.MALFORMED_JSON in dropped.error
    assert "not valid JSON" in dropped.error
    assert "unknown tool 'no_such_tool'" in unknown.error and "Tool 'no_such_tool' not found" in (
        unknown.error
    )
    assert json.loads(unknown.arguments) == {"x": 1}
    assert ok.output == "95" and json.loads(ok.arguments) == good
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    said = [(m["tool_call_id"], m["content"]) for m in follow_up["messages"] if m["role"] == "tool"]
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    ids = {c["function"]["name"]: c["id"] for c in asked["tool_calls"]}
    assert "python_repl" not in ids  # the dropped call is not in the conversation
    assert [i for i, _ in said] == [ids["no_such_tool"], ids["json_parser"], ids["sympy"]]
    texts = [t for _, t in said]
    assert texts[0].startswith("Tool 'no_such_tool' not found. Available tools: ")
    assert texts[1] == "95"
    assert texts[2].startswith("Failed to invoke Tool `sympy` with parameters")
    assert bad_type.error in texts[2]


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    calls = [("python_repl", {"code": SLOW_CODE}), ("datetime", {})]

    trace, _ = run_with_one_reply_of_calls(calls, "haystack", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    slow, quick = trace.tool_calls
    assert (slow.name, slow.ok, slow.output) == ("python_repl", True, SLOW_OUTPUT)
    assert quick.name == "datetime" and quick.ok
    assert quick.started_s < slow.started_s + slow.duration_s  # ran while the slow one did


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("haystack", tmp_path, fake_model_config)


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("haystack", fake_model_config)


@pytest.mark.parametrize("protocol", ["standard", "a2a"])
def test_agents_are_built_once_per_run(protocol, tmp_path, fake_model_config, monkeypatch):
    builds = []
    original = hs.RunObjects.build.__func__

    async def spy(cls, ctx):
        builds.append(ctx.run_id)
        return await original(cls, ctx)

    monkeypatch.setattr(hs.RunObjects, "build", classmethod(spy))
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework="haystack")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6  # six node visits (under a2a: six run_node calls)
    assert builds == [trace.run_id]


def test_mcp_tools_come_from_mcp_haystack_on_the_runs_timed_client(
    tmp_path, fake_model_config, caplog
):
    """Under mcp the calls go through mcp-haystack's MCPToolset on an httpx client from the
    run's factory (timed, the server's key sent), its identity the MCP SDK's default; the
    model reads the CallToolResult as JSON, as mcp-haystack returns it."""
    caplog.set_level(logging.INFO, logger="mastif.protocols.mcp")

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("json_parser", {"json_string": '{"a": 7}', "query": "a"})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        cfg["protocols"] = ["mcp"]
        (trace,) = run_stack(cfg, tmp_path, framework="haystack")
    assert trace.status == "ok", trace.error_message
    (call,) = trace.tool_calls
    assert call.name == "json_parser" and call.ok and call.output == "7"
    assert trace.wall_protocol_s is not None and trace.wall_protocol_s > 0
    # the server's line for the run: the SDK's default identity, one session for the run
    (line,) = [r.getMessage() for r in caplog.records
               if r.getMessage().startswith(f"MCP run {trace.run_id}: ")]  # fmt: skip
    assert "client 'mcp' 0.1.0 " in line and line.endswith(
        ": 1 session, 1 tools/list, 1 tools/call"
    )
    follow_up = next(r for r in srv.requests if any(m["role"] == "tool" for m in r["messages"]))
    (result,) = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert json.loads(result)["content"][0]["text"] == "7"


def test_telemetry_is_off():
    import haystack.telemetry._telemetry as telemetry
    import posthog

    assert os.environ["HAYSTACK_TELEMETRY_ENABLED"] == "False"
    assert posthog.disabled is True
    assert telemetry.telemetry is None  # no Telemetry was made (nor its config file written)
    assert not hs.tracing.is_tracing_enabled()


@pytest.mark.slow
def test_a_timed_out_run_stops_its_pipeline(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="haystack"
        )
        time.sleep(2.5)
        # the cancelled pipeline made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []

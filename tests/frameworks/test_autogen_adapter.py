"""What is particular to the AutoGen adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that AgentChat's ``GraphFlow`` (a ``DiGraph`` from ``DiGraphBuilder``, conditional
edges, a cycle) drives the linear workflow, what AutoGen puts on the wire (its system message,
its tool definitions), its own answers to calls it refuses and their record, the turn policy
on ``AssistantAgent``'s tool loop, that the run's objects are built once, that under ``mcp``
AutoGen's ``McpWorkbench`` is the client, that its runtime tracing is off, and that a
timed-out run stops.
"""

from __future__ import annotations

import json
import logging
import os
import time

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import DiGraphBuilder, GraphFlow

import mastif.frameworks.autogen as ag
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

FRAMEWORK = "autogen"
#: AssistantAgent's own default system message (kept)
AUTOGEN_SYSTEM = (
    "You are a helpful AI assistant. Solve tasks using your tools. "
    "Reply with TERMINATE when the task has been completed."
)


def test_the_graphflow_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: one GraphFlow per run, its DiGraph built with a
    participant per node, conditional edges and the loop's cycle, ran every visit; each
    visit was the node's AssistantAgent; drive_workflow never ran."""

    def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the AutoGen stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    teams, graphs, agent_runs = [], [], []
    build_team, build_graph = ag.build_graph, DiGraphBuilder.build

    def spy_team(ctx, dispatch, state):
        teams.append(build_team(ctx, dispatch, state))
        return teams[-1]

    def spy_graph(self):
        graphs.append(build_graph(self))
        return graphs[-1]

    real_on_messages = AssistantAgent.on_messages

    async def spy_agent(self, messages, token):
        agent_runs.append(self.name)
        return await real_on_messages(self, messages, token)

    monkeypatch.setattr(ag, "build_graph", spy_team)
    monkeypatch.setattr(DiGraphBuilder, "build", spy_graph)
    monkeypatch.setattr(AssistantAgent, "on_messages", spy_agent)

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
    assert agent_runs == [n for n, _ in EARLY_STOP_VISITS]
    (team,), (graph,) = teams, graphs
    assert isinstance(team, GraphFlow)
    edges = {(name, e.target, e.condition_function is not None)
             for name, node in graph.nodes.items() for e in node.edges}  # fmt: skip
    pairs = {(s, t) for s, t, _ in edges}
    assert {("navigate", "observe"), ("observe", "interact"), ("interact", "observe"),
            ("observe", "report"), ("interact", "report"), ("report", ag.FINISH)} <= pairs  # fmt: skip
    conditioned = {(s, t) for s, t, c in edges if c}
    # the cycle and the loop's exits are conditional edges; the line is not
    assert {("interact", "observe"), ("observe", "report"), ("interact", "report")} <= conditioned
    assert ("navigate", "observe") not in conditioned
    assert graph.get_has_cycles() and graph.get_start_nodes() == {"navigate"}


def test_autogens_system_message_and_tool_definitions(tmp_path, fake_model_config):
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
    # AutoGen's default system message; the prompt as the one user turn, named by its source
    assert first["messages"] == [
        {"role": "system", "content": AUTOGEN_SYSTEM},
        {"role": "user", "content": ours, "name": "user"},
    ]
    assert first["max_tokens"] == 77 and first["stream"] is False and "tools" not in first
    with_tools = next(r for r in srv.requests if "tools" in r)
    # AutoGen's tool definitions: the schema as the workbench lists it, "strict": false
    (dt,) = [t["function"] for t in with_tools["tools"] if t["function"]["name"] == "datetime"]
    spec = next(s for s in _tool_specs(cfg) if s.name == "datetime")
    assert dt["parameters"] == spec.parameters and dt["strict"] is False
    (call,) = trace.tool_calls
    assert call.name == "datetime" and call.ok and json.loads(call.arguments) == {}


def _tool_specs(cfg):
    from mastif.protocols.standard import InProcessTransport
    from mastif.tools import get_tools

    return InProcessTransport(get_tools(list(parse_config(cfg).tools))).tool_specs()


def test_refusals_are_autogens_and_recorded_in_order(tmp_path, fake_model_config):
    """An unknown tool and arguments that are not JSON are answered by AutoGen itself
    ("Error: tool ... not found in any workbench", "Error: <JSONDecodeError>"); they are
    recorded as failed with AutoGen's text, and the record keeps the model's order."""
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
    assert unknown.error.startswith("unknown tool 'no_such_tool'; offered: [")
    assert unknown.error.endswith(
        "(AutoGen: Error: tool 'no_such_tool' not found in any workbench)"
    )
    assert refused.arguments == '{"code": "1+'  # the model's text, as it came
    assert refused.error.startswith("arguments are not valid JSON")
    assert "(AutoGen: Error: Unterminated string" in refused.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    texts = [said[c["id"]] for c in asked["tool_calls"]]
    assert texts[0] == "Error: tool 'no_such_tool' not found in any workbench"
    assert texts[1] == "95"
    assert texts[2].startswith("Error: Unterminated string")
    assert texts[3] == trace.tool_calls[3].output


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    """AutoGen gathers a reply's calls: the quick datetime call starts before the slow
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


def test_tool_rounds_end_in_autogens_reflection_without_tools(tmp_path, fake_model_config):
    """max_tool_rounds is the agent's max_tool_iterations: two rounds, then AutoGen's
    reflection request, which carries no tools; a reply to it with tool calls runs none of
    them, and its text is the node's answer."""

    def respond(payload):
        if in_interaction_round(payload):
            return {"content": "reflected", "tool_calls": [("datetime", {})]}
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
    assert out.text == "reflected"


def test_a_node_without_tools_runs_no_call(tmp_path, fake_model_config):
    """A node that uses no tools is offered none; calls in its reply are not run (AutoGen
    would answer them with its not-found error and go on): the reply's text is the answer."""

    def respond(payload):
        if "tools" not in payload and not in_interaction_round(payload):
            return {"content": "planned", "tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), tmp_path, framework=FRAMEWORK
        )
    assert trace.status == "ok", trace.error_message
    assert trace.tool_calls == []
    assert trace.node_outputs[0].text == "planned"
    assert len(srv.requests) == 4  # one request per visit: nothing was run, nothing asked again


@pytest.mark.parametrize("protocol", ["standard", "a2a"])
def test_agents_and_tools_are_built_once_per_run(
    protocol, tmp_path, fake_model_config, monkeypatch
):
    builds = []
    original = ag.RunObjects.build.__func__

    async def spy(cls, ctx, nodes, stack):
        builds.append(ctx.run_id)
        return await original(cls, ctx, nodes, stack)

    monkeypatch.setattr(ag.RunObjects, "build", classmethod(spy))
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6  # six node visits (under a2a: six run_node calls)
    assert builds == [trace.run_id]


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such(FRAMEWORK, fake_model_config)


def test_the_runtimes_tracing_is_off():
    """AutoGen's own switch is set on import: its runtime builds a no-op tracer provider."""
    from autogen_core import SingleThreadedAgentRuntime
    from opentelemetry.trace import NoOpTracerProvider

    assert os.environ["AUTOGEN_DISABLE_RUNTIME_TRACING"] == "true"
    runtime = SingleThreadedAgentRuntime()
    assert isinstance(runtime._tracer_helper.tracer_provider, NoOpTracerProvider)


def test_under_mcp_autogens_mcp_workbench_is_the_client(
    tmp_path, fake_model_config, monkeypatch, caplog
):
    """The tools come from AutoGen's own McpWorkbench, started once for the run (not per
    visit or call), its streams on the run's HTTP client factory; the calls went over MCP,
    and its session declared the MCP SDK's default clientInfo."""
    from autogen_ext.tools.mcp import McpWorkbench

    starts, opened = [], []
    real_start, real_streams = McpWorkbench.start, ag._streams

    async def spy_start(self):
        starts.append(self)
        return await real_start(self)

    def spy_streams(url, *args, **kwargs):
        opened.append((url, ag.MCP_HTTP.get()))
        return real_streams(url, *args, **kwargs)

    monkeypatch.setattr(McpWorkbench, "start", spy_start)
    monkeypatch.setattr("autogen_ext.tools.mcp._session.streamablehttp_client", spy_streams)
    caplog.set_level(logging.INFO, logger="mastif.protocols.mcp")

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["mcp"]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert len(starts) == 1 and isinstance(starts[0], ag.RunMcpWorkbench)
    ((url, factory),) = opened
    assert url.startswith("http://127.0.0.1:") and factory is not None
    assert trace.protocol_calls == len(trace.tool_calls) == 2
    assert all(c.ok and c.name == "datetime" for c in trace.tool_calls)
    (line,) = [r.getMessage() for r in caplog.records
               if r.getMessage().startswith(f"MCP run {trace.run_id}: client ")]  # fmt: skip
    assert "client 'mcp' " in line and line.endswith(", 2 tools/call")


@pytest.mark.slow
def test_a_timed_out_run_stops_its_graph(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        t0 = time.perf_counter()
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework=FRAMEWORK
        )
        took = time.perf_counter() - t0
        time.sleep(2.5)
        # the cancelled graph made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []
    assert took < 4  # the run did not wait for the request in flight

"""What is particular to the AG2 (1.x) adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that AG2's own network (a hub's workflow channel ordered by a ``TransitionGraph``)
drives the linear workflow, that the graph follows the plan's rules on several layouts, what
AG2 puts on the wire, its refusals and their record, the turn policy applied in the model
client, that AG2's MCP toolkit is what calls the tools under ``mcp`` (on the run's HTTP
client factory), and that a timed-out run stops.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from ag2.network import EV_TEXT, Envelope, WorkflowAdapter, WorkflowState

import mastif.frameworks.ag2 as ag2
import mastif.frameworks.ag2_network as ag2_network
from mastif.execution.experiment import parse_config
from mastif.frameworks import orchestration
from mastif.frameworks import plan as workflow
from mastif.frameworks.plan import plan_workflow
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
def test_the_network_drives_the_loop(tmp_path, fake_model_config, monkeypatch, protocol):
    """CONTINUE twice, then TASK COMPLETE: one hub per run, whose workflow channel admitted
    every node's turn in order (its write-ahead log) and closed after the report."""
    monkeypatch.setattr(workflow, "drive_workflow", refuse)
    monkeypatch.setattr(orchestration, "drive_workflow", refuse)
    monkeypatch.setattr(orchestration, "run_linear", refuse)
    networks = []
    real_run = ag2_network.Network.run

    async def spy(self):
        networks.append(self)
        answer = await real_run(self)
        (channel,) = await self.hub.list_channels()
        wal = await self.hub.read_wal(channel.channel_id)
        self.turns = [self.hub.name_for(e.sender_id) for e in wal if e.event_type == EV_TEXT]
        self.closed = (await self.hub.get_channel(channel.channel_id)).close_reason
        return answer

    monkeypatch.setattr(ag2_network.Network, "run", spy)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Looking.\nCONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=4)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    (network,) = networks
    assert network.turns == ["workflow", *(node for node, _ in EARLY_STOP_VISITS)]
    assert network.closed == "workflow_complete"  # the graph's end, not a cap or our close
    assert trace.final_answer == trace.node_outputs[-1].text


def _plan(before, loop, after, max_steps):
    import yaml

    with (REPO / "config" / "config.yaml").open() as fh:
        cfg = parse_config(yaml.safe_load(fh))
    nodes = {n.name: n for n in plan_workflow(cfg.workflow, cfg.generation, REPO).nodes}
    return workflow.WorkflowPlan(
        tuple(nodes[n] for n in before), tuple(nodes[n] for n in loop),
        tuple(nodes[n] for n in after), max_steps,
    )  # fmt: skip


def test_the_graph_follows_the_plans_rules():
    """The transition graph alone, folded by AG2's WorkflowAdapter as the hub folds each
    turn, on layouts drive_workflow handles: the same visits in the same order (a loop node
    that stops, max_steps, a one-node loop, no loop, no nodes after)."""

    def visits(before, loop, after, max_steps, stop_at=None):
        plan = _plan(before, loop, after, max_steps)
        graph = ag2_network.build_graph(plan)
        adapter = WorkflowAdapter()
        state = WorkflowState(
            participant_order=["workflow", *(n.name for n in plan.nodes)],
            expected_next_speaker=graph.initial_speaker, graph_data=graph.to_dict(),
        )  # fmt: skip
        seen, counts = [], {}
        while (speaker := state.expected_next_speaker) is not None:
            said = "task"
            if speaker != "workflow":
                counts[speaker] = step = counts.get(speaker, 0) + 1
                seen.append((speaker, step))
                said = "TASK COMPLETE" if (speaker, step) == stop_at else "CONTINUE"
            state = adapter.fold(
                Envelope(channel_id="c", sender_id=speaker, audience=None, event_type=EV_TEXT,
                         event_data={"text": said}), state,
            )  # fmt: skip
            assert state.turn_count <= graph.max_turns  # the cap never cuts a run
        expected = []

        async def visit(node, step):
            expected.append((node.name, step))
            return "TASK COMPLETE" if (node.name, step) == stop_at else "CONTINUE"

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
    assert visits(["navigate"], ["observe", "interact"], ["report"], 3, ("observe", 1)) == [
        ("navigate", 1), ("observe", 1), ("report", 1),
    ]  # fmt: skip


def test_ag2s_wire_format_and_the_tool_schemas_as_given(tmp_path, fake_model_config):
    """AG2 sends its (empty) system message, the prompt as the user turn, and the protocol's
    tool schemas as they are."""
    calls = [("datetime", {})]
    trace, requests = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    first = requests[0]
    assert first["messages"][0] == {"role": "system", "content": ""}
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    offered = next(r for r in requests if "tools" in r)
    names = {t["function"]["name"]: t["function"] for t in offered["tools"]}
    assert set(names) == {"python_repl", "sympy", "datetime", "json_parser"}
    assert all(f["parameters"]["type"] == "object" for f in names.values())


def test_refusals_are_ag2s_and_recorded_in_order(tmp_path, fake_model_config):
    """An unknown tool (AG2's ToolNotFoundError) and text that is not JSON (the json.loads
    error of AG2's parse) are answered by AG2 and recorded as failed calls, in the model's
    order; AG2 then cannot replay the bad call (its mapper re-parses it): the run fails."""
    good = {"json_string": '{"price": 95}', "query": "price"}
    calls = [("no_such_tool", {"x": 1}), ("json_parser", good), ("python_repl", '{"code": "1+')]
    trace, requests = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("no_such_tool", False), ("json_parser", True), ("python_repl", False),
    ]  # fmt: skip
    unknown, _, invalid = trace.tool_calls
    assert "unknown tool 'no_such_tool'" in unknown.error
    assert "Tool `no_such_tool` not found" in unknown.error
    assert invalid.arguments == '{"code": "1+'  # the model's text, as it came
    assert "JSONDecodeError" in invalid.error
    assert trace.status == "error" and "JSONDecodeError" in (trace.error_message or "")


def test_a_failed_tool_is_answered_with_ag2s_error_text(tmp_path, fake_model_config):
    calls = [("json_parser", {"json_string": "{", "query": "a"})]
    trace, requests = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    (call,) = trace.tool_calls
    assert not call.ok and call.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    (tool_msg,) = [m for m in follow_up["messages"] if m["role"] == "tool"]
    # a ToolErrorEvent: AG2 writes the exception back formatted as a traceback (no frames:
    # the tool's error was not raised through AG2)
    assert tool_msg["content"] == f"RuntimeError: {call.error}\n"


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
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
    """Two tool rounds, then one request without tools (AG2 would loop while the model
    calls tools); the tool calls of its reply are dropped, so the visit ends with its text."""

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


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such(FRAMEWORK, fake_model_config)


def test_under_mcp_ag2s_toolkit_calls_the_tools(tmp_path, fake_model_config, monkeypatch):
    """The tools come from AG2's MCPToolkit at the run's MCP URL; its HTTP clients come from
    the run's factory (else the server's key is missing: 401); every call went over MCP."""
    from ag2.tools.toolkits.mcp_server import MCPToolkit

    made = []
    real = MCPToolkit.__init__

    def spy(self, server, **kwargs):
        made.append(server.server_url)
        real(self, server, **kwargs)

    monkeypatch.setattr(MCPToolkit, "__init__", spy)

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {}), ("no_such_tool", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["mcp"]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert len(made) == 1 and made[0].startswith("http://127.0.0.1")
    assert trace.protocol_calls == 2  # the datetime calls; the refused one never left
    assert sorted((c.name, c.ok) for c in trace.tool_calls) == [
        ("datetime", True), ("datetime", True), ("no_such_tool", False), ("no_such_tool", False),
    ]  # fmt: skip


@pytest.mark.slow
def test_a_timed_out_run_stops(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework=FRAMEWORK
        )
        time.sleep(2.5)
        assert len(srv.requests) <= 1  # the cancelled network made no further call
    assert trace.status == "timeout"
    assert trace.node_outputs == []


def test_the_graph_is_data_ag2_can_reload():
    """The graph round-trips through AG2's registry (the hub reloads it on every fold)."""
    plan = _plan(["navigate"], ["observe", "interact"], ["report"], 3)
    data = ag2_network.build_graph(plan).to_dict()
    assert json.loads(json.dumps(data)) == data
    reloaded = ag2_network.TransitionGraph.loads(data)
    assert any(isinstance(t.when, ag2_network.LoopExit) for t in reloaded.transitions)
    assert ag2.AG2Adapter.name == FRAMEWORK

"""What is particular to the Agno adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that an Agno ``Workflow`` (``Step`` s, a ``Loop``, ``Condition`` s) drives the linear
workflow and each visit is one ``Agent.arun``, what Agno puts on the wire, its refusals, the
turn policy of ``GatewayModel``, that the run's agents are built once, that its MCP client is
``MCPTools`` on a fastmcp client connected once per run, that telemetry is off, and that a
timed-out run stops.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import pytest

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

ag = pytest.importorskip("mastif.frameworks.agno")
FRAMEWORK = "agno"


def test_the_agno_workflow_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE in observe's third round: Agno's Loop ran the
    rounds, its Condition skipped interact once observe stopped the loop, each visit was one
    Agent.arun, and mastif's drive_workflow was never used."""
    from agno.agent import Agent
    from agno.workflow import Condition, Loop

    def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the Agno stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    monkeypatch.setattr("mastif.frameworks.orchestration.drive_workflow", no_drive)
    loops, conditions, agent_runs = [], [], []
    real_loop = Loop.aexecute
    real_eval, real_arun = Condition._aevaluate_condition, Agent.arun

    async def spy_loop(self, *args, **kwargs):
        out = await real_loop(self, *args, **kwargs)
        loops.append((self.max_iterations, out.content))
        return out

    async def spy_eval(self, *args, **kwargs):
        went_on = await real_eval(self, *args, **kwargs)
        conditions.append(went_on)
        return went_on

    def spy_arun(self, *args, **kwargs):
        agent_runs.append(self.name)
        return real_arun(self, *args, **kwargs)

    monkeypatch.setattr(Loop, "aexecute", spy_loop)
    monkeypatch.setattr(Condition, "_aevaluate_condition", spy_eval)
    monkeypatch.setattr(Agent, "arun", spy_arun)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "The cart holds the item.\nTASK COMPLETE"}
        return {"content": "Looking around.\nCONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=4), tmp_path,
                             framework=FRAMEWORK)  # fmt: skip
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert trace.final_answer == trace.node_outputs[-1].text
    # one Loop of max_steps iterations, ended by its end condition after 3 rounds (its steps:
    # observe and the Condition around interact, per round, the last Condition skipped)
    assert loops == [(4, "Loop loop completed 3 iterations with 6 total steps")]
    assert conditions == [True, True, False]  # interact ran after observe 1 and 2 only
    assert agent_runs == [n for n, _ in EARLY_STOP_VISITS]


def _context(cfg: dict[str, Any]):  # type: ignore[no-untyped-def]
    from mastif.frameworks import RunContext, RunRecorder
    from mastif.protocols.standard import InProcessTransport
    from mastif.tools import get_tools

    parsed = parse_config(cfg)
    return RunContext(
        run_id="r1",
        task=load_tasks("builtin")[0],
        plan=plan_workflow(parsed.workflow, parsed.generation, REPO),
        generation=parsed.generation,
        tools=InProcessTransport(get_tools(list(parsed.tools))),
        recorder=RunRecorder(),
        gateway_url="http://127.0.0.1:9/r/r1",
        model_name="fake-model",
        gateway_token="unused",
    )


LAYOUT_NODES = {
    "nav": {"name": "nav", "prompt": "config/prompts/navigate.md", "output_key": "a"},
    "l1": {"name": "l1", "prompt": "config/prompts/observe.md", "output_key": "b",
           "loop": True, "stop_when": "STOP1"},
    "l2": {"name": "l2", "prompt": "config/prompts/interact.md", "output_key": "c",
           "loop": True, "stop_when": "STOP2"},
    "l3": {"name": "l3", "prompt": "config/prompts/observe.md", "output_key": "d",
           "loop": True},
    "rep": {"name": "rep", "prompt": "config/prompts/report.md", "output_key": "e"},
}  # fmt: skip


@pytest.mark.parametrize(
    ("layout", "max_steps", "stops"),
    [
        (["nav", "l1", "l2", "l3", "rep"], 3, {("l2", 2)}),  # a middle node stops round 2
        (["nav", "l1", "l2", "l3", "rep"], 2, set()),  # max_steps rounds, no stop
        (["l1", "l2", "l3"], 3, {("l1", 3)}),  # no nodes around the loop
        (["nav", "l1", "rep"], 3, {("l1", 1)}),  # one loop node
        (["nav", "rep"], 3, set()),  # no loop
        (["nav", "l1", "l2"], 2, {("l1", 2)}),  # the loop at the end
    ],
)
def test_the_workflow_visits_what_drive_workflow_visits(
    fake_model_config, layout, max_steps, stops
):
    """Agno's Workflow and mastif's reference chaining (drive_workflow) make the same visits
    on the same scripted outputs, for several layouts (the nested Conditions end the round
    at once, the Loop's end condition ends the loop)."""
    from mastif.frameworks.plan import drive_workflow

    cfg = fake_model_config("http://unused", max_steps=max_steps)
    cfg["workflow"]["nodes"] = [dict(LAYOUT_NODES[n]) for n in layout]
    ctx = _context(cfg)

    def text(node, step):
        return f"{node.name} {step} " + (node.spec.stop_when or "") * ((node.name, step) in stops)

    async def dispatch(node, step, prompt):
        return text(node, step)

    async def ours() -> tuple[list[tuple[str, int]], str]:
        workflow, state = ag.build_workflow(ctx, dispatch)
        await workflow.arun(input="task")
        return [(o.node, o.step) for o in ctx.recorder.node_outputs], state.last

    reference: list[tuple[str, int]] = []

    async def visit(node, step):
        reference.append((node.name, step))
        return text(node, step)

    visits, last = asyncio.run(ours())
    asyncio.run(drive_workflow(ctx.plan, visit))
    assert visits == reference and visits
    assert last == text(next(n for n in ctx.plan.nodes if n.name == visits[-1][0]), visits[-1][1])


def test_no_system_prompt_and_agnos_tool_definitions(tmp_path, fake_model_config):
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
    assert first["messages"] == [{"role": "user", "content": ours}]  # no instructions
    assert first["max_tokens"] == 77 and "tools" not in first and "tool_choice" not in first
    with_tools = next(r for r in srv.requests if "tools" in r)
    # Agno's tool definitions: the JSON schema as given (parameters of the Function), no strict
    (dt,) = [t["function"] for t in with_tools["tools"] if t["function"]["name"] == "datetime"]
    spec = next(s for s in ctx_specs(cfg) if s.name == "datetime")
    assert dt["parameters"] == spec.parameters and "strict" not in dt
    assert dt["description"] == spec.description
    (call,) = trace.tool_calls
    assert call.name == "datetime" and call.ok and json.loads(call.arguments) == {}


def ctx_specs(cfg):  # type: ignore[no-untyped-def]
    return _context(cfg).tools.tool_specs()


def test_refusals_are_agnos_and_recorded_in_order(tmp_path, fake_model_config):
    """Agno answers an unknown tool and arguments it cannot parse with its own tool messages
    (before the results of the calls that ran); the record keeps the model's order."""
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
    assert "The requested tool does not exist or is not available." in unknown.error
    assert refused.arguments == '{"code": "1+'  # the model's text, as it came
    assert refused.error.startswith("arguments refused by Agno: Error while decoding function")
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    tool_msgs = [m for m in follow_up["messages"] if m["role"] == "tool"]
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    ids = [c["id"] for c in asked["tool_calls"]]
    # Agno writes its refusals first, then the results of the calls it ran
    assert [m["tool_call_id"] for m in tool_msgs] == [ids[0], ids[2], ids[1], ids[3]]
    assert (
        tool_msgs[0]["content"] == "Error: The requested tool does not exist or is not available."
    )
    assert tool_msgs[1]["content"].startswith("Error while decoding function arguments:")
    assert tool_msgs[2]["content"] == "95"


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    """Agno gathers a reply's calls: the quick datetime call starts before the slow
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


def test_the_cap_withholds_the_tools_and_a_tools_less_replys_calls_do_not_run(
    tmp_path, fake_model_config
):
    """Two tool rounds, then one request without tools (Agno would offer them again); its
    reply's tool calls are dropped, not run. The node's output is Agno's run content: the
    text of every reply of the visit, joined (Agno's own)."""

    def respond(payload):
        if in_interaction_round(payload):
            return {"content": "still at it", "tool_calls": [("datetime", {})]}
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
    assert out.text == "still at it" * 3


@pytest.mark.parametrize("protocol", ["standard", "a2a"])
def test_agents_are_built_once_per_run(protocol, tmp_path, fake_model_config, monkeypatch):
    builds = []
    original = ag.RunObjects.build.__func__

    async def spy(cls, ctx, stack):
        builds.append(ctx.run_id)
        return await original(cls, ctx, stack)

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


def test_telemetry_is_off_whatever_the_environment_says(tmp_path, fake_model_config, monkeypatch):
    """AGNO_TELEMETRY=true (which beats telemetry=False in Agno) is overridden when a run's
    objects are built, and no run event reaches Agno's API client."""
    import agno.api.api as agno_api

    posted = []
    monkeypatch.setattr(agno_api.api, "post_in_background", lambda *a, **k: posted.append(a))

    async def apost(*args, **kwargs):
        posted.append(args)

    monkeypatch.setattr(agno_api.api, "apost_in_background", apost)
    monkeypatch.setenv("AGNO_TELEMETRY", "true")
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path,
                             framework=FRAMEWORK)  # fmt: skip
    assert trace.status == "ok", trace.error_message
    assert os.environ["AGNO_TELEMETRY"] == "false"
    assert posted == []


def test_under_mcp_agnos_mcp_tools_connect_once_per_run(tmp_path, fake_model_config, monkeypatch):
    """The tools come from Agno's MCPTools, initialised once for the run on one fastmcp
    client (not per node visit or per call), and the calls went over MCP."""
    from agno.tools.mcp import MCPTools

    inits = []
    real = MCPTools.initialize

    async def spy(self):
        inits.append(type(self.session).__module__)
        return await real(self)

    monkeypatch.setattr(MCPTools, "initialize", spy)

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {}), ("no_such_tool", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["mcp"]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert inits == ["fastmcp.client.client"]
    served = [c for c in trace.tool_calls if c.name == "datetime"]
    refused = [c for c in trace.tool_calls if c.name == "no_such_tool"]
    assert trace.protocol_calls == len(served) == 2 and all(c.ok for c in served)
    assert len(refused) == 2 and not any(c.ok for c in refused)  # Agno refused, no MCP call


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

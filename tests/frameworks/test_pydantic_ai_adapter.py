"""What is particular to the Pydantic AI adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that a pydantic-graph ``Graph`` drives the linear workflow and each visit is one
``Agent.run``, what Pydantic AI puts on the wire, its refusals and retry prompts, the turn
policy's capability, that the run's agents are built once, that no instrumentation is on,
and that a timed-out run stops.
"""

from __future__ import annotations

import json
import sys
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

pai = pytest.importorskip("mastif.frameworks.pydantic_ai")


def test_the_pydantic_graph_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: the graph's nodes made every visit (the loop node
    returned itself for the next round), each visit was one Agent.run, and mastif's
    drive_workflow was never used."""

    def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the Pydantic AI stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    visits, agent_runs = [], []
    original_visit = pai.WorkflowDeps.visit
    original_run = pai.Agent.run

    async def spy_visit(self, state, node, step):
        caller = sys._getframe(1).f_locals["self"]  # the graph node whose run made the visit
        visits.append((type(caller).__name__, node.name, step))
        return await original_visit(self, state, node, step)

    async def spy_run(self, *args, **kwargs):
        agent_runs.append(self.name)
        return await original_run(self, *args, **kwargs)

    monkeypatch.setattr(pai.WorkflowDeps, "visit", spy_visit)
    monkeypatch.setattr(pai.Agent, "run", spy_run)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework="pydantic_ai"
        )
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert visits == [
        ("BeforeLoop", "navigate", 1),
        ("LoopVisit", "observe", 1), ("LoopVisit", "interact", 1),
        ("LoopVisit", "observe", 2), ("LoopVisit", "interact", 2),
        ("LoopVisit", "observe", 3),
        ("AfterLoop", "report", 1),
    ]  # fmt: skip
    assert agent_runs == [node for node, _ in EARLY_STOP_VISITS]
    assert trace.final_answer == "Still going. CONTINUE"


def test_the_graph_is_a_pydantic_graph_with_a_cycle(fake_model_config):
    """build_graph makes a pydantic-graph Graph (GraphBuilder, BaseNode steps), without
    instrumentation, whose loop node has an edge back to itself."""
    from pydantic_graph import Graph

    from mastif.frameworks import RunContext, RunRecorder
    from mastif.protocols.standard import InProcessTransport
    from mastif.tools import get_tools

    cfg = parse_config(fake_model_config("http://unused"))
    ctx = RunContext(
        run_id="r1", task=load_tasks("builtin")[0],
        plan=plan_workflow(cfg.workflow, cfg.generation, REPO), generation=cfg.generation,
        tools=InProcessTransport(get_tools(list(cfg.tools))), recorder=RunRecorder(),
        gateway_url="http://127.0.0.1:9/r/r1", model_name="m", gateway_token="t",
    )  # fmt: skip

    async def dispatch(node, step, prompt):
        return ""

    workflow = pai.build_graph(ctx, dispatch)
    assert isinstance(workflow.graph, Graph) and workflow.graph.auto_instrument is False
    lines = [line.strip() for line in workflow.graph.render().splitlines()]
    # the loop node's decision leads back to it (the cycle), on to the nodes after the
    # loop, or to the end
    (decision,) = [line.split(" --> ")[1] for line in lines if line.startswith("LoopVisit -->")]
    assert {line.split(" --> ")[1] for line in lines if line.startswith(f"{decision} -->")} == {
        "LoopVisit", "AfterLoop", "[*]"
    }  # fmt: skip


def test_no_system_prompt_and_pydantic_ai_tool_definitions(tmp_path, fake_model_config):
    def respond(payload):
        return (
            {"tool_calls": [("datetime", {})]}
            if first_interact_turn(payload)
            else {"content": "done."}
        )

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework="pydantic_ai")
    assert trace.status == "ok", trace.error_message
    plan = plan_workflow(parse_config(cfg).workflow, parse_config(cfg).generation, REPO)
    ours = render_prompt(plan.nodes[0], load_tasks("builtin")[0], [], 1, 1, [])
    first = srv.requests[0]
    assert first["messages"] == [{"role": "user", "content": ours}]
    # Pydantic AI's spelling of max_tokens (the gateway turns it into max_tokens for llama.cpp)
    assert first["max_completion_tokens"] == 77 and first["stream"] is False
    assert first["seed"] == 20260504 and "tools" not in first and "tool_choice" not in first
    with_tools = next(r for r in srv.requests if "tools" in r)
    assert with_tools["tool_choice"] == "auto" and "parallel_tool_calls" not in with_tools
    defs = {t["function"]["name"]: t["function"] for t in with_tools["tools"]}
    # the protocol's schemas as they are; Pydantic AI marks strict the ones OpenAI's strict
    # mode accepts as they are (every property required: python_repl)
    assert defs["python_repl"]["strict"] is True and "strict" not in defs["datetime"]
    assert defs["datetime"]["parameters"]["required"] == []
    (call,) = trace.tool_calls
    assert call.name == "datetime" and call.ok and json.loads(call.arguments) == {}


def test_refusals_are_recorded_in_the_models_order(tmp_path, fake_model_config):
    """An unknown tool and arguments that are not JSON are refused by Pydantic AI with its
    own retry prompts; every call of the reply is recorded in the model's order."""
    calls = [("json_parser", {"json_string": '{"price": 95}', "query": "price"}),
             ("no_such_tool", {"x": 1}), ("python_repl", '{"code": "1+'),
             ("datetime", {})]  # fmt: skip

    trace, requests = run_with_one_reply_of_calls(calls, "pydantic_ai", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("json_parser", True), ("no_such_tool", False), ("python_repl", False), ("datetime", True),
    ]  # fmt: skip
    _, unknown, bad_json, _ = trace.tool_calls
    assert json.loads(unknown.arguments) == {"x": 1}
    assert unknown.error.startswith("unknown tool 'no_such_tool'; offered: ")
    assert "Unknown tool name: 'no_such_tool'" in unknown.error
    assert bad_json.arguments == '{"code": "1+' and "Invalid JSON" in bad_json.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    texts = [said[c["id"]] for c in asked["tool_calls"]]
    assert texts[0] == "95"
    # in 2.78 a refusal goes back as the call's own tool message, {"error": ...}
    assert json.loads(texts[1])["error"].startswith(
        "Unknown tool name: 'no_such_tool'. Available tools: "
    )
    assert "Invalid JSON" in json.dumps(json.loads(texts[2])["error"])  # its validation errors
    # Pydantic AI writes the unparseable arguments back wrapped in its own object
    assert json.loads(asked["tool_calls"][2]["function"]["arguments"]) == {
        "INVALID_JSON": '{"code": "1+'
    }


def test_a_failed_tool_is_a_retry_prompt(tmp_path, fake_model_config):
    """A tool's failure reaches the model as Pydantic AI's retry (ModelRetry: the call's tool
    message, outcome "retried"), as its MCP toolset answers an isError result; the run goes on."""
    calls = [("python_repl", {"code": "1/0"})]
    trace, requests = run_with_one_reply_of_calls(calls, "pydantic_ai", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    (call,) = trace.tool_calls
    assert not call.ok and "ZeroDivisionError" in call.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    (text,) = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert "ZeroDivisionError" in json.loads(text)["error"]  # {"error": ...} in 2.78


def test_a_call_past_the_retry_budget_ends_the_run_and_is_recorded(tmp_path, fake_model_config):
    """Pydantic AI's default retry budget (1 per tool): an unknown tool called again right
    after its refusal ends the run with its UnexpectedModelBehavior; both calls recorded."""

    def respond(payload):
        if "tools" in payload:
            return {"tool_calls": [("no_such_tool", {"x": 1})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="pydantic_ai"
        )
    assert trace.status == "error" and trace.error_class == "framework_error"
    assert "exceeded max retries count of 1" in trace.error_message
    first, second = trace.tool_calls
    assert (first.name, first.ok, second.name, second.ok) == (
        "no_such_tool", False, "no_such_tool", False
    )  # fmt: skip
    assert "Unknown tool name" in first.error and "exceeded max retries" in second.error


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    """Pydantic AI runs a reply's calls concurrently: the quick datetime call starts before
    the slow python_repl call ended, yet the record keeps the model's order."""
    calls = [("python_repl", {"code": SLOW_CODE}), ("datetime", {})]
    trace, _ = run_with_one_reply_of_calls(calls, "pydantic_ai", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    slow, quick = trace.tool_calls
    assert (slow.name, slow.ok, slow.output) == ("python_repl", True, SLOW_OUTPUT)
    assert quick.name == "datetime" and quick.ok
    assert quick.started_s < slow.started_s + slow.duration_s  # ran while the slow one did


def test_calls_in_a_reply_to_a_request_without_tools_are_not_run(tmp_path, fake_model_config):
    """After max_tool_rounds the request goes out without tools; calls in its reply are
    dropped, and its text is the node's output."""

    def respond(payload):
        if "interaction round" in last_user_text(payload):
            return {"content": "my answer", "tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=1)
        (trace,) = run_stack(cfg, tmp_path, framework="pydantic_ai")
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime"]  # the first round's only
    interact = [r for r in srv.requests if "interaction round" in last_user_text(r)]
    assert ["tools" in r for r in interact] == [True, False]
    (out,) = [o for o in trace.node_outputs if o.node == "interact"]
    assert out.text == "my answer"


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("pydantic_ai", tmp_path, fake_model_config)


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("pydantic_ai", fake_model_config)


@pytest.mark.parametrize("protocol", ["standard", "a2a", "mcp"])
def test_agents_are_built_once_per_run_without_instrumentation(
    protocol, tmp_path, fake_model_config, monkeypatch
):
    """One agent per node, built once per run (under a2a by the node agents' first visit),
    none instrumented even when Agent.instrument_all asks for it; under mcp the tools are
    Pydantic AI's own MCPToolset."""
    from pydantic_ai import Agent

    monkeypatch.setattr(Agent, "_instrument_default", True)  # Agent.instrument_all(True)
    built = []
    original = pai.RunObjects.open.__func__

    async def spy(cls, ctx, stack):
        objects = await original(cls, ctx, stack)
        built.append(objects)
        return objects

    monkeypatch.setattr(pai.RunObjects, "open", classmethod(spy))

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework="pydantic_ai")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6
    assert [c.name for c in trace.tool_calls] == ["datetime", "datetime"]
    (objects,) = built
    assert set(objects.agents) == {"navigate", "observe", "interact", "report"}
    assert all(a.instrument is False for a in objects.agents.values())
    assert isinstance(objects.mcp, pai.MCPToolset) == (protocol == "mcp")
    if protocol == "mcp":
        assert trace.protocol_calls == 2


@pytest.mark.slow
def test_a_timed_out_run_stops(tmp_path, fake_model_config):
    threads = threading.active_count()
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="pydantic_ai"
        )
        time.sleep(2.5)
        # the cancelled graph and agent run made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []
    assert threading.active_count() <= threads  # nothing left running in a thread

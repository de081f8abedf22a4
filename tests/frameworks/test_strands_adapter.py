"""What is particular to the Strands Agents adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that a Strands ``Graph`` (``GraphBuilder``, conditional edges, a cycle) drives the
linear workflow and each visit is one ``Agent`` invocation, what Strands puts on the wire, its
refusals, the turn policy's middleware, that Strands' own retries are off, that the run's agents
(and under ``mcp`` its ``MCPClient``) are built once, that no span is recorded, and that a
timed-out run stops.
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

st = pytest.importorskip("mastif.frameworks.strands")


def a_context(fake_model_config):
    from mastif.frameworks import RunContext, RunRecorder
    from mastif.protocols.standard import InProcessTransport
    from mastif.tools import get_tools

    cfg = parse_config(fake_model_config("http://unused"))
    return RunContext(
        run_id="r1", task=load_tasks("builtin")[0],
        plan=plan_workflow(cfg.workflow, cfg.generation, REPO), generation=cfg.generation,
        tools=InProcessTransport(get_tools(list(cfg.tools))), recorder=RunRecorder(),
        gateway_url="http://127.0.0.1:9/r/r1", model_name="m", gateway_token="t",
    )  # fmt: skip


def test_the_strands_graph_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: Strands' graph executed the nodes in that order (its
    own execution_order: the cycle interact -> observe taken twice, the exit to report on the
    match), each visit was one invocation of the node's Agent, drive_workflow never ran."""

    def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the Strands stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    monkeypatch.setattr("mastif.frameworks.orchestration.run_linear", no_drive)
    executed, invoked = [], []
    original_run, original_invoke = st.WorkflowGraph.run, st.Agent.invoke_async

    async def spy_run(self):
        try:
            return await original_run(self)
        finally:
            executed.extend(n.node_id for n in self.graph.state.execution_order)

    async def spy_invoke(self, *args, **kwargs):
        invoked.append(self.name)
        return await original_invoke(self, *args, **kwargs)

    monkeypatch.setattr(st.WorkflowGraph, "run", spy_run)
    monkeypatch.setattr(st.Agent, "invoke_async", spy_invoke)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework="strands"
        )
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert executed == [node for node, _ in EARLY_STOP_VISITS]
    assert invoked == [node for node, _ in EARLY_STOP_VISITS]
    assert trace.final_answer == "Still going. CONTINUE"


def test_the_graph_has_conditional_edges_and_a_cycle(fake_model_config):
    """build_graph makes a Strands Graph: navigate its entry, the cycle interact -> observe and
    the exits to report as conditional edges, the plain line navigate -> observe, revisits
    reset, and at most the plan's number of visits."""
    from strands.multiagent.graph import Graph

    ctx = a_context(fake_model_config)

    async def dispatch(node, step, prompt):
        return ""

    workflow = st.build_graph(ctx, dispatch)
    graph = workflow.graph
    assert isinstance(graph, Graph)
    edges = {(e.from_node.node_id, e.to_node.node_id): e.condition for e in graph.edges}
    assert set(edges) == {("navigate", "observe"), ("observe", "interact"),
                          ("interact", "observe"), ("observe", "report"),
                          ("interact", "report")}  # fmt: skip
    assert edges[("navigate", "observe")] is None
    assert all(c is not None for pair, c in edges.items() if pair[0] != "navigate")
    assert [n.node_id for n in graph.entry_points] == ["navigate"]
    assert graph.reset_on_revisit is True
    assert graph.max_node_executions == 2 + 2 * ctx.plan.max_steps
    assert all(isinstance(n.executor, st.WorkflowNode) for n in graph.nodes.values())


def test_the_wire_has_no_system_prompt_and_strands_tool_specs(tmp_path, fake_model_config):
    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework="strands")
    assert trace.status == "ok", trace.error_message
    plan = plan_workflow(parse_config(cfg).workflow, parse_config(cfg).generation, REPO)
    ours = render_prompt(plan.nodes[0], load_tasks("builtin")[0], [], 1, 1, [])
    first = srv.requests[0]
    # no system prompt; our prompt as the one user turn, as a string (not a list of parts)
    assert first["messages"] == [{"role": "user", "content": ours}]
    assert first["max_tokens"] == 77 and first["stream"] is False
    assert "stream_options" not in first and "tools" not in first and "tool_choice" not in first
    with_tools = next(r for r in srv.requests if "tools" in r)
    assert with_tools["tool_choice"] == "auto" and "parallel_tool_calls" not in with_tools
    defs = {t["function"]["name"]: t["function"] for t in with_tools["tools"]}
    # the JSON schemas as given, normalised by Strands' registry (required filled in)
    assert defs["datetime"]["parameters"]["required"] == []
    assert defs["python_repl"]["parameters"]["required"] == ["code"]
    assert "strict" not in defs["python_repl"]
    follow_up = next(r for r in srv.requests if any(m["role"] == "tool" for m in r["messages"]))
    (tool_msg,) = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assert isinstance(tool_msg["content"], str) and "UTC" in tool_msg["content"]
    (call,) = trace.tool_calls
    assert call.name == "datetime" and call.ok and json.loads(call.arguments) == {}


def test_refusals_are_strands_own_and_recorded_in_the_models_order(tmp_path, fake_model_config):
    """An unknown tool ("Unknown tool: X"), a name Strands' pattern refuses, and arguments that
    are not JSON (Strands runs the tool with {}): every call of the reply recorded in the
    model's order, the refusals as failed calls with Strands' text."""
    calls = [("json_parser", {"json_string": '{"price": 95}', "query": "price"}),
             ("no_such_tool", {"x": 1}), ("python_repl", '{"code": "1+'),
             ("bad name!", {}), ("datetime", {})]  # fmt: skip
    trace, requests = run_with_one_reply_of_calls(calls, "strands", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("json_parser", True), ("no_such_tool", False), ("python_repl", False),
        ("bad name!", False), ("datetime", True),
    ]  # fmt: skip
    _, unknown, bad_json, bad_name, _ = trace.tool_calls
    assert json.loads(unknown.arguments) == {"x": 1}
    assert unknown.error.startswith("unknown tool 'no_such_tool'; offered: ")
    assert "(Strands: Unknown tool: no_such_tool)" in unknown.error
    # Strands' json.loads failed: it logged a warning and ran the tool with {}
    assert (
        json.loads(bad_json.arguments) == {} and "'code' is a required property" in bad_json.error
    )
    assert "invalid tool name pattern" in bad_name.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    texts = [said[c["id"]] for c in asked["tool_calls"]]
    assert texts[0] == "95" and texts[1] == "Unknown tool: no_such_tool"
    assert "invalid tool name pattern" in texts[3]
    # Strands writes the calls back as it holds them: {} for the unparseable arguments, its
    # stand-in for the refused name
    names = [c["function"]["name"] for c in asked["tool_calls"]]
    assert (
        names[3] == "INVALID_TOOL_NAME" and asked["tool_calls"][2]["function"]["arguments"] == "{}"
    )


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    """Strands' ConcurrentToolExecutor runs a reply's calls at once: the quick datetime call
    starts before the slow python_repl call ended, yet the record keeps the model's order."""
    calls = [("python_repl", {"code": SLOW_CODE}), ("datetime", {})]
    trace, _ = run_with_one_reply_of_calls(calls, "strands", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    slow, quick = trace.tool_calls
    assert (slow.name, slow.ok, slow.output) == ("python_repl", True, SLOW_OUTPUT)
    assert quick.name == "datetime" and quick.ok
    assert quick.started_s < slow.started_s + slow.duration_s  # ran while the slow one did


def test_calls_in_a_reply_to_a_request_without_tools_are_not_run(tmp_path, fake_model_config):
    """After max_tool_rounds the request goes out without tools; calls in its reply are
    dropped (the Output middleware), and its text is the node's output."""

    def respond(payload):
        if "interaction round" in last_user_text(payload):
            return {"content": "my answer", "tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=1)
        (trace,) = run_stack(cfg, tmp_path, framework="strands")
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime"]  # the first round's only
    interact = [r for r in srv.requests if "interaction round" in last_user_text(r)]
    assert ["tools" in r for r in interact] == [True, False]
    (out,) = [o for o in trace.node_outputs if o.node == "interact"]
    assert out.text == "my answer"


def cut_off(content, tool_calls=()):
    """A chat completion stopped by max_tokens (finish_reason "length")."""
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(tool_calls)
        ]
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}  # fmt: skip
    return {"raw": json.dumps(body)}


def test_a_reply_cut_off_by_max_tokens_ends_the_visit_in_its_text(tmp_path, fake_model_config):
    """Strands ends a visit whose reply stopped at max_tokens (MaxTokensReachedException, the
    reply kept in the conversation with its tool calls replaced by its notes): the reply's
    text is the node's output, its calls are not run and are recorded with the model's
    (cut-off) arguments."""

    def respond(payload):
        if first_interact_turn(payload):
            return cut_off(None, [("sympy", '{"expression": "x**')])
        if "interaction round" in last_user_text(payload):
            return {"content": "unexpected"}
        return cut_off("A plan cut sh")

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="strands"
        )
    assert trace.status == "ok", trace.error_message
    texts = {o.node: o.text for o in trace.node_outputs}
    assert texts["navigate"] == "A plan cut sh" and texts["report"] == "A plan cut sh"
    assert texts["interact"] == (
        "The selected tool sympy's tool use was incomplete due to maximum token limits being "
        "reached."
    )
    (call,) = trace.tool_calls
    assert (call.name, call.ok, call.arguments) == ("sympy", False, '{"expression": "x**')
    assert call.error.startswith("not run: the reply stopped at max_tokens")
    assert len(srv.requests) == 4  # one request per visit: nothing ran, nothing was retried


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("strands", tmp_path, fake_model_config)


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("strands", fake_model_config)


def test_strands_does_not_retry_a_throttled_call(tmp_path, fake_model_config):
    """A provider error whose text says "rate limit" is throttling to Strands
    (classify_openai_error: ModelThrottledException), which its default ModelRetryStrategy
    retries after 4 s; it is off, so Strands sends the call once (the gateway's retry is the
    only one), and the OpenAI error Strands wrapped ends the run as the provider's."""
    body = json.dumps({"error": {"message": "Rate limit reached, slow down"}})
    with ScriptedChatServer(lambda p: {"status": 503, "raw": body}) as srv:
        started = time.perf_counter()
        (trace,) = run_stack(fake_model_config(srv.base_url), tmp_path, framework="strands")
        took = time.perf_counter() - started
    assert trace.status == "error" and trace.error_class == "provider_error", trace.error_message
    assert "rate limit" in trace.error_message.lower()  # what made it throttling to Strands
    (call,) = trace.llm_calls  # one request from Strands
    assert call.attempts == len(srv.requests) == 2  # the gateway's try and retry
    assert took < 4  # and no Strands back-off


@pytest.mark.parametrize("protocol", ["standard", "a2a", "mcp"])
def test_agents_are_built_once_per_run(protocol, tmp_path, fake_model_config, monkeypatch):
    """One agent per node, built once per run (under a2a by the node agents' first visit);
    under mcp the tools come from Strands' own MCPClient, one client for the run, which
    declares no application name (the MCP SDK's default clientInfo)."""
    built = []
    original = st.RunObjects.open.__func__

    async def spy(cls, ctx, stack):
        objects = await original(cls, ctx, stack)
        built.append(objects)
        return objects

    monkeypatch.setattr(st.RunObjects, "open", classmethod(spy))

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework="strands")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6
    assert [c.name for c in trace.tool_calls] == ["datetime", "datetime"]
    (objects,) = built
    assert set(objects.agents) == {"navigate", "observe", "interact", "report"}
    assert objects.agents["navigate"].tool_names == []
    assert "datetime" in objects.agents["interact"].tool_names
    assert isinstance(objects.mcp, st.MCPClient) == (protocol == "mcp")
    if protocol == "mcp":
        assert objects.mcp.client_name is None
        assert trace.protocol_calls == 2


def test_no_span_is_recorded_whatever_provider_is_installed(tmp_path, fake_model_config):
    """Strands' tracer is on OpenTelemetry's no-op provider: with an SDK provider installed
    globally (what an OTLP set-up would do), a run records no span there."""
    from opentelemetry import trace as otel
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from strands.telemetry import get_tracer

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.set_tracer_provider(provider)
    calls = [("datetime", {})]
    trace, _ = run_with_one_reply_of_calls(calls, "strands", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert not get_tracer().tracer.start_span("probe").is_recording()
    assert exporter.get_finished_spans() == ()


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["standard", "mcp"])
def test_a_timed_out_run_stops(protocol, tmp_path, fake_model_config):
    threads = threading.active_count()
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        cfg = fake_model_config(srv.base_url, timeout_s=1)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework="strands")
        time.sleep(2.5)
        # the cancelled graph and agent made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []
    # nothing left running in a thread (under mcp: the MCP client's session thread stopped)
    assert threading.active_count() <= threads

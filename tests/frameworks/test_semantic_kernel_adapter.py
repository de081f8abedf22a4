"""What the Semantic Kernel adapter does beyond the shared workflow contract.

Scripted model (tests.support.fakes.ScriptedChatServer) behind the real gateway, SK runtime and tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from importlib import metadata

import pytest
from semantic_kernel import Kernel
from semantic_kernel.processes.local_runtime.local_kernel_process_context import (
    LocalKernelProcessContext,
)
from semantic_kernel.processes.local_runtime.local_step import LocalStep

import mastif.frameworks.plan
from mastif.core.config import NodeSpec
from mastif.core.provenance import IncompatibleLibraryError, check_framework
from mastif.frameworks import semantic_kernel as sk_adapter
from mastif.frameworks.plan import PlannedNode, WorkflowPlan, drive_workflow
from mastif.tools import get_tools
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.stackrun import run_stack
from tests.support.workflows import EARLY_STOP_VISITS


@pytest.fixture
def sk_config(fake_model_config):
    def make(base_url, **generation):
        cfg = fake_model_config(base_url, **generation)
        cfg["frameworks"] = ["semantic_kernel"]
        return cfg

    return make


def is_first_interact_turn(payload):
    return (
        "interaction round" in last_user_text(payload) and payload["messages"][-1]["role"] == "user"
    )


@pytest.mark.parametrize("protocol", ["standard", "mcp"])
def test_tools_are_offered_as_sk_offers_them_and_required_holds_for_the_first_turn(
    tmp_path, sk_config, protocol
):
    def respond(payload):
        if "interaction round" in last_user_text(payload):
            # the model may name a tool bare or as SK offers it; SK resolves both
            turn = sum(m["role"] == "tool" for m in payload["messages"])
            name = "datetime" if turn == 0 else f"{sk_adapter.PLUGIN_NAME}-datetime"
            return {"tool_calls": [(name, {"timezone": "UTC"})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = sk_config(srv.base_url, max_steps=1, max_tool_rounds=2)
        cfg["workflow"]["nodes"][2]["tool_choice"] = "required"
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path)
    assert trace.status == "ok", trace.error_message
    interact = [r for r in srv.requests if "interaction round" in last_user_text(r)]
    assert len(interact) == 3  # two tool rounds, then one request without tools
    # the gateway maps "required" to "auto" for llama.cpp only; this endpoint is not local.
    # SK would send "required" on every round: the turn policy sends it on the first only
    assert [r.get("tool_choice") for r in interact] == ["required", "auto", None]
    assert "tools" not in interact[-1]
    # SK's own tool definitions, in-process and from SK's MCP plugin alike:
    # ``<plugin>-<function>``, and a parameters object SK rebuilds from the parameter
    # metadata (the tool's property schemas and required list; no additionalProperties)
    expected = [
        {"type": "function",
         "function": {"name": f"mastif_tools-{t.name}", "description": t.description,
                      "parameters": {"type": "object",
                                     "properties": t.parameters["properties"],
                                     "required": t.parameters.get("required", [])}}}
        for t in get_tools(["python_repl", "sympy", "datetime", "json_parser"])
    ]  # fmt: skip
    # (in the order the tools were listed: the registry's in-process, the server's under mcp)
    by_name = sorted(interact[0]["tools"], key=lambda t: t["function"]["name"])
    assert by_name == sorted(expected, key=lambda t: t["function"]["name"])
    assert any("additionalProperties" in t.parameters for t in get_tools(["datetime"]))
    # recorded under the protocol's tool name, whatever name SK resolved
    assert [(c.name, json.loads(c.arguments), c.ok) for c in trace.tool_calls] == [
        ("datetime", {"timezone": "UTC"}, True),
        ("datetime", {"timezone": "UTC"}, True),
    ]


def test_calls_of_a_reply_run_concurrently_and_are_recorded_in_the_models_order(
    tmp_path, sk_config, monkeypatch
):
    """SK's default: the calls of one reply start together (``asyncio.gather``) and each
    tool message is appended when its call is done; the trace keeps the model's order."""
    events = []
    invoke = Kernel.invoke_function_call

    async def spy_invoke(self, function_call, chat_history, **kwargs):
        events.append(("start", function_call.name))
        try:
            return await invoke(self, function_call, chat_history, **kwargs)
        finally:
            events.append(("end", function_call.name))

    monkeypatch.setattr(Kernel, "invoke_function_call", spy_invoke)
    slow = "s = 0\nfor i in range(999):\n    for j in range(999):\n        s += i * j\nprint(s)"
    calls = [
        ("python_repl", {"code": slow}),
        ("no_such_tool", {"x": 1}),
        ("mastif_tools-datetime", {"timezone": "UTC"}),
        ("json_parser", '{"json_string": "{}", '),
    ]

    def respond(payload):
        if is_first_interact_turn(payload):
            return {"tool_calls": calls}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(sk_config(srv.base_url, max_steps=1), tmp_path)
    assert trace.status == "ok", trace.error_message
    # started in the model's order, all four before the first (the slow one) ended
    assert [n for e, n in events if e == "start"] == [name for name, _ in calls]
    assert events[-1] == ("end", "python_repl") and len(events) == 8
    # the trace: the model's order, under the protocol's names for the calls that ran
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("python_repl", True), ("no_such_tool", False), ("datetime", True),
        ("json_parser", False),
    ]  # fmt: skip
    assert trace.tool_calls[0].output == str(sum(i * j for i in range(999) for j in range(999)))
    # the wire: SK's own write-back, each tool message when its call is done, so the
    # refusals (answered at once) come before the slow call's result
    follow_up = next(r for r in srv.requests if r["messages"][-1]["role"] == "tool")
    (assistant,) = [m for m in follow_up["messages"] if m["role"] == "assistant"]
    ids = [tc["id"] for tc in assistant["tool_calls"]]
    tool_msgs = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs[:2]] == [ids[1], ids[3]]
    assert tool_msgs[-1]["tool_call_id"] == ids[0]
    # SK's own refusal texts, and the recorded errors carry them
    assert "is not part of the provided tools" in tool_msgs[0]["content"]
    assert "Arguments must be in JSON format" in tool_msgs[1]["content"]
    unknown, invalid = trace.tool_calls[1], trace.tool_calls[3]
    assert "unknown tool 'no_such_tool'" in unknown.error
    assert tool_msgs[0]["content"] in unknown.error
    assert invalid.arguments == '{"json_string": "{}", '  # as the model produced it
    assert "not valid JSON" in invalid.error and tool_msgs[1]["content"] in invalid.error


def test_call_sk_refuses_is_recorded_and_the_tool_not_run(tmp_path, sk_config):
    def respond(payload):
        if is_first_interact_turn(payload):
            # json_string is required: SK refuses the call before any function runs
            return {"tool_calls": [("json_parser", {"query": "a"}), ("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(sk_config(srv.base_url, max_steps=1), tmp_path)
    refused, ran = trace.tool_calls
    assert (refused.name, json.loads(refused.arguments), refused.ok) == (
        "json_parser", {"query": "a"}, False,
    )  # fmt: skip
    assert "refused by Semantic Kernel" in refused.error and "json_string" in refused.error
    assert ran.name == "datetime" and ran.ok
    follow_up = next(r for r in srv.requests if r["messages"][-1]["role"] == "tool")
    tool_msgs = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert "Missing required argument(s): ['json_string']" in tool_msgs[0]


def test_legacy_function_call_beside_tool_calls_is_not_a_second_call(tmp_path, sk_config):
    """llama-cpp-python's chatml-function-calling adds a (misnamed) legacy function_call."""

    def respond(payload):
        if is_first_interact_turn(payload):
            body = {
                "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                "model": "fake",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": None,
                    "tool_calls": [{"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                                    "function": {"name": "datetime", "arguments": "{}"}}],
                    "function_call": {"name": "python_repl:", "arguments": "{}"},
                }}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }  # fmt: skip
            return {"raw": json.dumps(body)}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(sk_config(srv.base_url, max_steps=1), tmp_path)
    assert [(c.name, c.ok) for c in trace.tool_calls] == [("datetime", True)]
    follow_up = next(r for r in srv.requests if r["messages"][-1]["role"] == "tool")
    (assistant,) = [m for m in follow_up["messages"] if m["role"] == "assistant"]
    assert [tc["function"]["name"] for tc in assistant["tool_calls"]] == ["datetime"]


def test_no_tool_rounds_means_no_tools_offered(tmp_path, sk_config):
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        (trace,) = run_stack(sk_config(srv.base_url, max_steps=1, max_tool_rounds=0), tmp_path)
    assert trace.status == "ok", trace.error_message
    assert all("tools" not in r for r in srv.requests)
    assert len(srv.requests) == 4


def test_the_workflow_is_an_sk_process_on_one_kernel(tmp_path, sk_config, monkeypatch):
    """SK's process runtime drives the nodes and the loop (not mastif's drive_workflow), on
    one kernel with one chat service per node for the whole run."""

    def no_drive_workflow(*args, **kwargs):
        raise AssertionError("drive_workflow must not chain the nodes")

    monkeypatch.setattr(mastif.frameworks.plan, "drive_workflow", no_drive_workflow)
    monkeypatch.setattr(sk_adapter, "drive_workflow", no_drive_workflow, raising=False)

    started, invoked, kernels, services = [], [], [], []
    start_with_event = LocalKernelProcessContext.start_with_event
    invoke_function = LocalStep.invoke_function
    ask = sk_adapter.SemanticKernelAdapter.ask
    chat_service = sk_adapter.chat_service

    async def spy_start(self, initial_event):
        started.append(initial_event.id)
        return await start_with_event(self, initial_event)

    async def spy_invoke(self, function, kernel, arguments):
        invoked.append((self.name, arguments["step"]))
        return await invoke_function(self, function, kernel, arguments)

    async def spy_ask(self, ctx, kernel, node, step, prompt):
        kernels.append(kernel)
        return await ask(self, ctx, kernel, node, step, prompt)

    def spy_chat_service(ctx, node, client):
        services.append(node)
        return chat_service(ctx, node, client)

    monkeypatch.setattr(LocalKernelProcessContext, "start_with_event", spy_start)
    monkeypatch.setattr(LocalStep, "invoke_function", spy_invoke)
    monkeypatch.setattr(sk_adapter.SemanticKernelAdapter, "ask", spy_ask)
    monkeypatch.setattr(sk_adapter, "chat_service", spy_chat_service)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(sk_config(srv.base_url, max_steps=4), tmp_path)
    assert trace.status == "ok", trace.error_message
    expected = EARLY_STOP_VISITS
    assert [(n.node, n.step) for n in trace.node_outputs] == expected
    assert invoked == expected  # each visit was a process step SK's runtime invoked
    assert started == ["start"]  # one process run
    assert len(kernels) == len(expected) and len({id(k) for k in kernels}) == 1
    assert services == ["navigate", "observe", "interact", "report"]  # built once
    assert trace.final_answer == "CONTINUE"


def test_a2a_node_visits_reuse_the_runs_kernel(tmp_path, sk_config, monkeypatch):
    """Under A2A every node visit is a run_node call; the kernel and its chat services (one
    per node of the plan) are opened once per run, and closed when the run ends."""
    services, opened, closed = [], [], []
    chat_service = sk_adapter.chat_service
    open_kernel = sk_adapter.SemanticKernelAdapter.open_kernel

    def spy_chat_service(ctx, node, client):
        services.append(node)
        return chat_service(ctx, node, client)

    @contextlib.asynccontextmanager
    async def spy_open_kernel(self, ctx, nodes):
        async with open_kernel(self, ctx, nodes) as kernel:
            opened.append(kernel)
            try:
                yield kernel
            finally:
                closed.append(kernel)

    monkeypatch.setattr(sk_adapter, "chat_service", spy_chat_service)
    monkeypatch.setattr(sk_adapter.SemanticKernelAdapter, "open_kernel", spy_open_kernel)
    with ScriptedChatServer(lambda payload: {"content": "CONTINUE"}) as srv:
        cfg = sk_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["a2a"]
        (trace,) = run_stack(cfg, tmp_path)
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6
    assert len(opened) == 1  # one kernel for the run, not one per visit
    assert services == ["navigate", "observe", "interact", "report"]  # once per node
    assert closed == opened  # closed with the run (ctx.resources)


class ScriptedRun(sk_adapter.WorkflowRun):
    """A run whose node visits only answer from a script and emit their event."""

    def __init__(self, plan, answer):
        self.process_kernel, self.plan, self.answer = Kernel(), plan, answer
        self.nodes = {n.name: n for n in plan.nodes}
        self.visits, self.error = [], None

    async def visit(self, name, step, context):
        self.visits.append((name, step))
        text = self.answer(name, step)
        event, next_step = sk_adapter.next_event(self.plan, self.nodes[name], step, text)
        await context.emit_event(event, data=next_step)


def planned(name, loop=False, stop_when=None):
    spec = NodeSpec(name=name, prompt="p.md", output_key=name, loop=loop, use_tools=False,
                    tool_choice="auto", stop_when=stop_when)  # fmt: skip
    return PlannedNode(spec, "{task}", "0" * 64)


@pytest.mark.parametrize(
    ("before", "loop", "after", "stop_at", "expected"),
    [
        # loop only, ended by max_steps
        ((), ("a", "b"), (), None, [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)]),
        # stop_when on the loop's last node, no node after the loop
        (("n",), ("a", "b"), (), ("b", 2), [("n", 1), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]),
        # a one-node loop between two lines
        (("n", "m"), ("a",), ("r", "s"), ("a", 2),
         [("n", 1), ("m", 1), ("a", 1), ("a", 2), ("r", 1), ("s", 1)]),
        # no loop at all
        (("n", "m"), (), (), None, [("n", 1), ("m", 1)]),
    ],
)  # fmt: skip
def test_process_routes_like_drive_workflow(before, loop, after, stop_at, expected):
    plan = WorkflowPlan(
        tuple(planned(n) for n in before),
        tuple(planned(n, loop=True, stop_when="DONE") for n in loop),
        tuple(planned(n) for n in after),
        max_steps=3,
    )

    def answer(name, step):
        return "DONE" if (name, step) == stop_at else "CONTINUE"

    async def with_drive_workflow():
        seen = []

        async def visit(node, step):
            seen.append((node.name, step))
            return answer(node.name, step)

        await drive_workflow(plan, visit)
        return seen

    async def with_process():
        run = ScriptedRun(plan, answer)
        process = sk_adapter.workflow_process(plan, run)
        await sk_adapter.start(process, run.process_kernel, sk_adapter.NodeEvents.START, data=1)
        return run.visits

    assert asyncio.run(with_drive_workflow()) == expected
    assert asyncio.run(with_process()) == expected


# moved from tests/core/test_provenance.py: the library is only here, in its environment
def test_semantic_kernel_without_a_member_it_overrides_is_refused(monkeypatch):
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion

    from mastif.frameworks.semantic_kernel import SemanticKernelAdapter

    owner = next(
        k for k in OpenAIChatCompletion.__mro__ if "_get_function_call_from_chat_choice" in vars(k)
    )
    monkeypatch.delattr(owner, "_get_function_call_from_chat_choice")
    with pytest.raises(
        IncompatibleLibraryError, match="_get_function_call_from_chat_choice is gone"
    ) as err:
        check_framework(SemanticKernelAdapter())
    assert f"semantic-kernel {metadata.version('semantic-kernel')}: " in str(err.value)

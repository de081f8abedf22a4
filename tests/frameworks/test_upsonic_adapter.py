"""What is particular to the Upsonic adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that an Upsonic graphv2 ``StateGraph`` drives the linear workflow and each visit is
one ``Agent.do_async`` task, Upsonic's own refusals and tool-result texts, the turn policy of
its wrapper model, that tool retries are off, that the run's agents are built once, that
Sentry is never set up, and that a timed-out run stops.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.support.adapter_checks import (
    check_an_unreachable_endpoint_is_classified_as_such,
    check_required_tool_choice_holds_for_the_first_turn,
    first_interact_turn,
)
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.stackrun import SLOW_CODE, SLOW_OUTPUT, run_stack, run_with_one_reply_of_calls
from tests.support.workflows import EARLY_STOP_VISITS

ups = pytest.importorskip("mastif.frameworks.upsonic")


def test_the_state_graph_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: Upsonic's graph runner made every visit (the last
    loop node routed back to the first for the next round), each visit one agent task, and
    mastif's drive_workflow was never used."""

    def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the Upsonic stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    tasks, graphs = [], []
    original_do = ups.Agent.do_async
    original_build = ups.build_graph

    async def spy_do(self, task, *args, **kwargs):
        tasks.append(self.name)
        return await original_do(self, task, *args, **kwargs)

    def spy_build(ctx, dispatch):
        graph = original_build(ctx, dispatch)
        graphs.append(graph)
        return graph

    monkeypatch.setattr(ups.Agent, "do_async", spy_do)
    monkeypatch.setattr(ups, "build_graph", spy_build)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework="upsonic"
        )
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert tasks == [node for node, _ in EARLY_STOP_VISITS]
    (graph,) = graphs
    assert type(graph).__module__.startswith("upsonic.graphv2")
    assert trace.final_answer == "Still going. CONTINUE"


def test_upsonic_refusals_and_result_texts(tmp_path, fake_model_config):
    """An unknown tool and arguments missing a required field are answered by Upsonic
    without running a tool, with its own texts; results go back as its executor's
    ``{"func": ...}``; every call is recorded in the model's order."""
    calls = [("json_parser", {"json_string": '{"price": 95}', "query": "price"}),
             ("no_such_tool", {"x": 1}), ("python_repl", {}), ("datetime", {})]  # fmt: skip
    trace, requests = run_with_one_reply_of_calls(calls, "upsonic", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("json_parser", True), ("no_such_tool", False), ("python_repl", False), ("datetime", True),
    ]  # fmt: skip
    _, unknown, missing, _ = trace.tool_calls
    assert unknown.error.startswith("unknown tool 'no_such_tool'; offered: ")
    assert "not found" in unknown.error
    assert missing.error.startswith("refused by Upsonic: Missing required argument(s)")
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    texts = [said[c["id"]] for c in asked["tool_calls"]]
    assert json.loads(texts[0]) == {"func": "95"}
    assert texts[1].startswith("Error executing tool:")
    assert texts[2].startswith("Missing required argument(s) for 'python_repl'")


def test_a_failed_tool_is_called_once(tmp_path, fake_model_config):
    """Upsonic would retry a raising tool five times with back-off; its retries are off, so
    the failure is one recorded call and reaches the model as the error's text."""
    calls = [("python_repl", {"code": "1/0"})]
    trace, requests = run_with_one_reply_of_calls(calls, "upsonic", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    (call,) = trace.tool_calls
    assert not call.ok and "ZeroDivisionError" in call.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    (text,) = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert text.startswith("ZeroDivisionError")  # the tool's error, as Upsonic's executor caught it


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    calls = [("python_repl", {"code": SLOW_CODE}), ("datetime", {})]
    trace, _ = run_with_one_reply_of_calls(calls, "upsonic", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    slow, quick = trace.tool_calls
    assert (slow.name, slow.ok, slow.output) == ("python_repl", True, SLOW_OUTPUT)
    assert quick.name == "datetime" and quick.ok
    assert quick.started_s < slow.started_s + slow.duration_s  # ran while the slow one did


def test_calls_in_a_reply_to_a_request_without_tools_are_not_run(tmp_path, fake_model_config):
    """After max_tool_rounds the request goes out without tools; calls in its reply are
    dropped by the wrapper model, and its text is the node's output."""

    def respond(payload):
        if "interaction round" in last_user_text(payload):
            return {"content": "my answer", "tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=1)
        (trace,) = run_stack(cfg, tmp_path, framework="upsonic")
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime"]  # the first round's only
    interact = [r for r in srv.requests if "interaction round" in last_user_text(r)]
    assert ["tools" in r for r in interact] == [True, False]
    assert "tool_choice" not in interact[1]
    (out,) = [o for o in trace.node_outputs if o.node == "interact"]
    assert out.text == "my answer"


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("upsonic", tmp_path, fake_model_config)


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("upsonic", fake_model_config)


@pytest.mark.parametrize("protocol", ["standard", "a2a", "mcp"])
def test_agents_are_built_once_per_run_without_telemetry(
    protocol, tmp_path, fake_model_config, monkeypatch
):
    """One agent per node, built once per run (under a2a by the node agents' first visit);
    under mcp the tools are Upsonic's MCP tools on one session; Sentry is never set up."""
    import os

    from upsonic.utils import logging_config

    built = []
    original = ups.RunObjects.open.__func__

    async def spy(cls, ctx, stack):
        objects = await original(cls, ctx, stack)
        built.append(objects)
        return objects

    monkeypatch.setattr(ups.RunObjects, "open", classmethod(spy))

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework="upsonic")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6
    assert [c.name for c in trace.tool_calls] == ["datetime", "datetime"]
    (objects,) = built
    assert set(objects.agents) == {"navigate", "observe", "interact", "report"}
    assert all(isinstance(a.model, ups.TurnPolicyModel) for a in objects.agents.values())
    assert isinstance(objects.mcp, ups.MCPHandler) == (protocol == "mcp")
    if protocol == "mcp":
        assert all(isinstance(t, ups.PlacedMCPTool) for t in objects.mcp.tools)
        assert all(t.config.max_retries == 0 for t in objects.mcp.tools)
    assert os.environ["UPSONIC_TELEMETRY"] == "false"
    assert logging_config._upsonic_client is None  # no Sentry client was made


@pytest.mark.slow
def test_a_timed_out_run_stops(tmp_path, fake_model_config):
    threads = threading.active_count()
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="upsonic"
        )
        time.sleep(2.5)
        # the cancelled graph and agent task made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []
    assert threading.active_count() <= threads  # nothing left running in a thread

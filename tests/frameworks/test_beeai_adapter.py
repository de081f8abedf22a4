"""What is particular to the BeeAI adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that a BeeAI ``Workflow`` drives the linear workflow (the last loop step naming the
first again) and each visit is one ``RequirementAgent.run``, what BeeAI puts on the wire, its
refusals in the model's order, the turn policy of its model middleware, no resent requests,
that the run's agents are built once (BeeAI's ``MCPTool`` under mcp), and that a timed-out
run stops.
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
from tests.support.fakes import ScriptedChatServer, last_user_text, opens_interaction_round
from tests.support.paths import REPO
from tests.support.stackrun import SLOW_CODE, SLOW_OUTPUT, run_stack, run_with_one_reply_of_calls
from tests.support.workflows import EARLY_STOP_VISITS

bee = pytest.importorskip("mastif.frameworks.beeai")


def test_the_beeai_workflow_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: BeeAI's Workflow ran one step per visit, the last
    loop step named the first loop step again (the cycle) and observe's stop named report;
    each visit was one RequirementAgent.run; mastif's drivers were never used."""

    def refuse(*args, **kwargs):
        raise AssertionError("mastif's driver must not run the BeeAI stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", refuse)
    monkeypatch.setattr("mastif.frameworks.orchestration.run_linear", refuse)
    routes, agent_runs = [], []
    original_run = bee.Workflow.run
    original_agent_run = bee.RequirementAgent.run

    def spy_run(self, state, options=None):
        run = original_run(self, state, options)
        return run.on("success", lambda data, meta: routes.append((data.step, data.next)))

    def spy_agent_run(self, *args, **kwargs):
        agent_runs.append(self.meta.name)
        return original_agent_run(self, *args, **kwargs)

    monkeypatch.setattr(bee.Workflow, "run", spy_run)
    monkeypatch.setattr(bee.RequirementAgent, "run", spy_agent_run)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework="beeai"
        )
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert routes == [
        ("navigate", "observe"),
        ("observe", "interact"), ("interact", "observe"),
        ("observe", "interact"), ("interact", "observe"),
        ("observe", "report"),
        ("report", "__end__"),
    ]  # fmt: skip
    assert agent_runs == [node for node, _ in EARLY_STOP_VISITS]
    assert trace.final_answer == "Still going. CONTINUE"
    assert len(srv.requests) == len(EARLY_STOP_VISITS)  # BeeAI adds no request of its own


def test_beeais_prompts_and_tools_on_the_wire(tmp_path, fake_model_config):
    """BeeAI's system prompt and its "Your task:" wrapper around the node prompt (verbatim,
    not HTML-escaped); only the protocol's tools (not BeeAI's final_answer), with BeeAI's
    strict schemas, on the interact node only; no prompt-caching marks; each visit afresh."""

    def respond(payload):
        return (
            {"tool_calls": [("datetime", {})]}
            if first_interact_turn(payload)
            else {"content": "ok."}
        )

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework="beeai")
    assert trace.status == "ok", trace.error_message
    plan = plan_workflow(parse_config(cfg).workflow, parse_config(cfg).generation, REPO)
    task = load_tasks("builtin")[0]
    ours = render_prompt(plan.nodes[0], task, [], 1, 2, [])
    first = srv.requests[0]
    system, user = first["messages"]
    assert system["role"] == "system" and system["content"].startswith("# Role\nAssume the role of")
    assert "calling the 'final_answer' tool" in system["content"]
    assert user == {"role": "user", "content": f"Your task: {ours}"}
    assert '"' in ours and "&quot;" not in user["content"]
    assert first["max_tokens"] == 77 and first["seed"] == 20260504
    assert "tools" not in first and "tool_choice" not in first
    assert "cache_control" not in json.dumps(srv.requests)
    with_tools = [r for r in srv.requests if "tools" in r]
    assert with_tools and all(last_user_text(r).count("interaction round") for r in with_tools)
    offered = with_tools[0]
    assert offered["tool_choice"] == "auto" and offered["parallel_tool_calls"] is False
    defs = {t["function"]["name"]: t["function"] for t in offered["tools"]}
    assert set(defs) == {"python_repl", "sympy", "datetime", "json_parser"}
    parameters = defs["json_parser"]["parameters"]
    assert defs["json_parser"]["strict"] is True and parameters["additionalProperties"] is False
    assert set(parameters["required"]) == set(parameters["properties"])  # BeeAI's strict rewrite
    # the second interact visit starts afresh: no messages of the first visit
    interacts = [r for r in srv.requests if opens_interaction_round(r)]
    assert len(interacts) == 2 and len(interacts[1]["messages"]) == 2
    assert [c.name for c in trace.tool_calls] == ["datetime", "datetime"]


def test_refusals_are_recorded_in_the_models_order(tmp_path, fake_model_config):
    """An unknown tool and arguments BeeAI's schema model rejects are refused with its own
    texts, written back as tool messages; every call of the reply is recorded in the model's
    order."""
    calls = [("json_parser", {"json_string": '{"price": 95}', "query": "price"}),
             ("no_such_tool", {"x": 1}), ("python_repl", {"code": 5}),
             ("datetime", {})]  # fmt: skip
    trace, requests = run_with_one_reply_of_calls(calls, "beeai", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("json_parser", True), ("no_such_tool", False), ("python_repl", False), ("datetime", True),
    ]  # fmt: skip
    _, unknown, wrong_type, _ = trace.tool_calls
    assert json.loads(unknown.arguments) == {"x": 1}
    assert unknown.error.startswith("unknown tool 'no_such_tool'; offered: ")
    assert "Tool 'no_such_tool' does not exist!" in unknown.error
    assert json.loads(wrong_type.arguments) == {"code": 5}
    assert wrong_type.error.startswith("arguments refused by BeeAI: The tool has failed")
    assert "Tool input validation error" in wrong_type.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    texts = [said[c["id"]] for c in asked["tool_calls"]]
    assert texts[0] == "95"
    assert texts[1].startswith("The tool has failed; the error log is shown below.")
    assert "Tool 'no_such_tool' does not exist!" in texts[1]


def test_a_reply_with_arguments_that_are_not_json_ends_the_visit_unsent_again(
    tmp_path, fake_model_config
):
    """BeeAI's litellm adapter rejects a reply whose call arguments are not JSON as a whole;
    BeeAI would resend the request (its retries), which are off: the run fails at once, every
    call of the reply recorded as refused, no second interact request."""
    calls = [("datetime", {}), ("python_repl", '{"code": "1+')]
    trace, requests = run_with_one_reply_of_calls(calls, "beeai", tmp_path, fake_model_config)
    assert trace.status == "error" and trace.error_class == "framework_error"
    assert "Response could not be produced because it is invalid" in trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("datetime", False),
        ("python_repl", False),
    ]
    assert trace.tool_calls[1].arguments == '{"code": "1+'
    assert sum(1 for r in requests if "interaction round" in last_user_text(r)) == 1


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    """BeeAI runs a reply's calls concurrently (asyncio.gather): the quick datetime call starts
    before the slow python_repl call ended, yet the record keeps the model's order."""
    calls = [("python_repl", {"code": SLOW_CODE}), ("datetime", {})]
    trace, _ = run_with_one_reply_of_calls(calls, "beeai", tmp_path, fake_model_config)
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
        (trace,) = run_stack(cfg, tmp_path, framework="beeai")
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime"]  # the first round's only
    interact = [r for r in srv.requests if "interaction round" in last_user_text(r)]
    assert ["tools" in r for r in interact] == [True, False]
    (out,) = [o for o in trace.node_outputs if o.node == "interact"]
    assert out.text == "my answer"


def test_a_repeated_call_is_run_again(tmp_path, fake_model_config):
    """BeeAI's tool-call cycle checker is off: the same call in two rounds runs twice, with no
    hidden re-request and no tool withdrawn."""

    def respond(payload):
        if "tools" in payload:
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=3)
        (trace,) = run_stack(cfg, tmp_path, framework="beeai")
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [("datetime", True)] * 3
    offered = [{t["function"]["name"] for t in r["tools"]} for r in srv.requests if "tools" in r]
    assert len(offered) == 3 and all("datetime" in names for names in offered)


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("beeai", tmp_path, fake_model_config)


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("beeai", fake_model_config)


@pytest.mark.parametrize("protocol", ["standard", "a2a", "mcp"])
def test_agents_are_built_once_per_run(protocol, tmp_path, fake_model_config, monkeypatch):
    """One RequirementAgent per node, built once per run (under a2a by the node agents' first
    visit); under mcp the tools are BeeAI's own MCPTools, the calls travel over MCP."""
    built = []
    original = bee.RunObjects.open.__func__

    async def spy(cls, ctx, stack):
        objects = await original(cls, ctx, stack)
        built.append(objects)
        return objects

    monkeypatch.setattr(bee.RunObjects, "open", classmethod(spy))

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework="beeai")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6
    assert [(c.name, c.ok) for c in trace.tool_calls] == [("datetime", True)] * 2
    (objects,) = built
    assert set(objects.agents) == {"navigate", "observe", "interact", "report"}
    kinds = {type(t) for t in objects.tools}
    assert kinds == ({bee.MCPTool} if protocol == "mcp" else {bee.GatewayTool})
    if protocol == "mcp":
        assert trace.protocol_calls == 2


def running_threads() -> set[threading.Thread]:
    """The live threads but tqdm's monitor (the runner's progress bar starts it)."""
    return {t for t in threading.enumerate() if t.name != "tqdm_monitor"}


@pytest.mark.slow
def test_a_timed_out_run_stops(tmp_path, fake_model_config):
    threads = running_threads()
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="beeai"
        )
        time.sleep(2.5)
        # the cancelled workflow and agent run made no further request
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []
    assert running_threads() <= threads  # nothing left running in a thread

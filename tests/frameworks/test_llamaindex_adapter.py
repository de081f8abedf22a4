"""What is particular to the LlamaIndex adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that LlamaIndex's own workflow runtime drives the linear workflow, what LlamaIndex
puts on the wire, its refusals, and that the run's objects are built once.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

import mastif.frameworks.llamaindex as li
from mastif.execution.experiment import parse_config
from mastif.frameworks.plan import plan_workflow, render_prompt
from mastif.tasks import load_tasks
from tests.support.adapter_checks import (
    check_required_tool_choice_holds_for_the_first_turn,
    first_interact_turn,
)
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.paths import REPO
from tests.support.stackrun import SLOW_CODE, SLOW_OUTPUT, run_stack, run_with_one_reply_of_calls
from tests.support.workflows import EARLY_STOP_VISITS


def test_the_llamaindex_workflow_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: the workflow's steps made every visit, the loop
    event went back twice, and mastif's drive_workflow was never used."""

    def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the LlamaIndex stack")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    runs, visits = [], []
    original_run, original_visit = li.LinearWorkflow.run, li.LinearWorkflow.visit

    def spy_run(self, *args, **kwargs):
        runs.append(self)
        return original_run(self, *args, **kwargs)

    async def spy_visit(self, node, step):
        visits.append((sys._getframe(1).f_code.co_name, node.name, step))  # the calling step
        return await original_visit(self, node, step)

    monkeypatch.setattr(li.LinearWorkflow, "run", spy_run)
    monkeypatch.setattr(li.LinearWorkflow, "visit", spy_visit)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework="llamaindex"
        )
    assert trace.status == "ok", trace.error_message
    expected = EARLY_STOP_VISITS
    assert [(n.node, n.step) for n in trace.node_outputs] == expected
    assert len(runs) == 1 and isinstance(runs[0], li.Workflow)
    assert visits == [
        ("before", "navigate", 1),
        ("loop", "observe", 1), ("loop", "interact", 1),
        ("loop", "observe", 2), ("loop", "interact", 2),
        ("loop", "observe", 3),
        ("after", "report", 1),
    ]  # fmt: skip
    assert trace.final_answer == "Still going. CONTINUE"


def test_no_system_prompt_and_llamaindex_tool_definitions(tmp_path, fake_model_config):
    def respond(payload):
        return (
            {"tool_calls": [("datetime", {})]}
            if first_interact_turn(payload)
            else {"content": "done."}
        )

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework="llamaindex")
    assert trace.status == "ok", trace.error_message
    plan = plan_workflow(parse_config(cfg).workflow, parse_config(cfg).generation, REPO)
    ours = render_prompt(plan.nodes[0], load_tasks("builtin")[0], [], 1, 1, [])
    first = srv.requests[0]
    assert first["messages"] == [{"role": "user", "content": ours}]
    assert first["max_tokens"] == 77 and first["stream"] is False and "tools" not in first
    with_tools = next(r for r in srv.requests if "tools" in r)
    # LlamaIndex's own tool definitions: pydantic's schema, not strict, parallel calls allowed
    (dt,) = [t["function"] for t in with_tools["tools"] if t["function"]["name"] == "datetime"]
    assert dt["strict"] is False and dt["parameters"]["additionalProperties"] is False
    assert dt["parameters"]["properties"]["timezone"]["title"] == "Timezone"
    assert with_tools["parallel_tool_calls"] is True
    (call,) = trace.tool_calls
    assert call.name == "datetime" and call.ok and json.loads(call.arguments) == {}


def test_calls_are_recorded_in_order_and_arguments_repaired(tmp_path, fake_model_config):
    """An unknown tool is refused with LlamaIndex's agents' text; arguments that are not
    valid JSON are repaired by LlamaIndex (parse_partial_json) and the tool runs on the
    repair; text that is not JSON at all becomes {} -- no call is refused for its JSON."""
    good = {"json_string": '{"price": 95}', "query": "price"}
    calls = [("no_such_tool", {"x": 1}), ("json_parser", good), ("python_repl", '{"code": "1+'),
             ("datetime", "not json")]  # fmt: skip

    trace, requests = run_with_one_reply_of_calls(calls, "llamaindex", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("no_such_tool", False), ("json_parser", True), ("python_repl", False), ("datetime", True),
    ]  # fmt: skip
    unknown, _, repaired, emptied = trace.tool_calls
    assert json.loads(unknown.arguments) == {"x": 1}
    # the truncated string value became null, and the tool itself rejected that
    assert json.loads(repaired.arguments) == {"code": None}
    assert repaired.error == "invalid arguments for python_repl: None is not of type 'string'"
    assert json.loads(emptied.arguments) == {}
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    (asked,) = [m for m in follow_up["messages"] if m.get("tool_calls")]
    ids = [c["id"] for c in asked["tool_calls"]]
    texts = [said[i] for i in ids]  # one tool message per call, in the model's order
    assert list(said) == ids
    assert texts[0] == "Tool no_such_tool not found. Please select a tool that is available."
    assert texts[1] == "95"
    assert texts[2] == repaired.error and texts[3] == emptied.output


def test_calls_of_one_reply_run_concurrently_recorded_in_order(tmp_path, fake_model_config):
    """LlamaIndex gathers a reply's calls: the quick datetime call starts before the slow
    python_repl call ended, yet the record keeps the model's order."""
    calls = [("python_repl", {"code": SLOW_CODE}),
             ("datetime", {})]  # fmt: skip

    trace, requests = run_with_one_reply_of_calls(calls, "llamaindex", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    slow, quick = trace.tool_calls
    assert (slow.name, slow.ok, slow.output) == ("python_repl", True, SLOW_OUTPUT)
    assert quick.name == "datetime" and quick.ok
    assert quick.started_s < slow.started_s + slow.duration_s  # ran while the slow one did


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("llamaindex", tmp_path, fake_model_config)


@pytest.mark.parametrize("protocol", ["standard", "a2a"])
def test_llms_and_tools_are_built_once_per_run(protocol, tmp_path, fake_model_config, monkeypatch):
    builds = []
    original = li.RunObjects.build.__func__

    async def spy(cls, ctx, nodes):
        builds.append(ctx.run_id)
        return await original(cls, ctx, nodes)

    monkeypatch.setattr(li.RunObjects, "build", classmethod(spy))
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework="llamaindex")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6  # six node visits (under a2a: six run_node calls)
    assert builds == [trace.run_id]


def test_nothing_is_downloaded_or_set_globally(tmp_path, fake_model_config):
    """No tokenizer (tiktoken), no NLTK data, no global Settings touched by a run."""
    import llama_index.core
    from llama_index.core import Settings
    from llama_index.core.utils import globals_helper

    with ScriptedChatServer(lambda p: {"content": "TASK COMPLETE"}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="llamaindex"
        )
    assert trace.status == "ok", trace.error_message
    assert llama_index.core.global_tokenizer is None
    assert globals_helper._stopwords is None and globals_helper._nltk_data_dir is None
    assert Settings._llm is None and Settings._callback_manager is None


@pytest.mark.slow
def test_a_timed_out_run_stops_its_workflow(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="llamaindex"
        )
        time.sleep(2.5)
        # the cancelled workflow made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []

"""What is particular to the CrewAI adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py``; these tests pin down how CrewAI's own
runtime shows through: its prompt wrapping, its strict tool schemas, its refusals, and that
a cancelled run stops its worker thread.
"""

from __future__ import annotations

import json
import time
from importlib import metadata

import pytest

from mastif.core.provenance import IncompatibleLibraryError
from mastif.execution.experiment import parse_config
from mastif.frameworks.plan import plan_workflow, render_prompt
from mastif.tasks import load_tasks
from mastif.tools import get_tools
from tests.support.adapter_checks import (
    check_an_unreachable_endpoint_is_classified_as_such,
    check_required_tool_choice_holds_for_the_first_turn,
    first_interact_turn,
)
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.paths import REPO
from tests.support.stackrun import run_stack
from tests.support.workflows import EARLY_STOP_VISITS

pytest.importorskip("mastif.frameworks.crewai")  # sets its environment before crewai loads


def test_crewai_wraps_the_node_prompt_in_its_own(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "TASK COMPLETE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework="crewai")
    assert trace.status == "ok", trace.error_message
    plan = plan_workflow(parse_config(cfg).workflow, parse_config(cfg).generation, REPO)
    ours = render_prompt(plan.nodes[0], load_tasks("builtin")[0], [], 1, 1, [])
    system, user = srv.requests[0]["messages"]
    assert system["role"] == "system" and system["content"].startswith("You are web agent.")
    assert user["content"].startswith("\nCurrent Task: " + ours)
    assert (
        "This is the expected criteria for your final answer: The navigation plan."
        in (user["content"])
    )
    assert "stream" not in srv.requests[0] and srv.requests[0]["max_tokens"] == 77


def test_refused_calls_are_recorded_in_the_models_order(tmp_path, fake_model_config):
    good = {"json_string": '{"price": 95}', "query": "price"}
    calls = [("no_such_tool", {"x": 1}), ("json_parser", good), ("python_repl", '{"code": "1+')]

    def respond(payload):
        return {"tool_calls": calls} if first_interact_turn(payload) else {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="crewai"
        )
    assert trace.status == "ok", trace.error_message
    unknown, ok, bad_json = trace.tool_calls
    assert [c.name for c in trace.tool_calls] == ["no_such_tool", "json_parser", "python_repl"]
    assert not unknown.ok and "unknown tool 'no_such_tool'" in unknown.error
    assert json.loads(unknown.arguments) == {"x": 1}
    assert ok.ok and ok.output == "95" and json.loads(ok.arguments) == good
    assert not bad_json.ok and "not valid JSON" in bad_json.error
    assert bad_json.arguments == '{"code": "1+'  # unparseable arguments verbatim
    # what the model read back: CrewAI's own refusals, our tool's result
    follow_up = next(r for r in srv.requests if any(m["role"] == "tool" for m in r["messages"]))
    said = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert said[0] == "Tool not found"
    assert said[1] == "95"
    assert said[2].startswith("Error: Failed to parse tool arguments as JSON")


def test_calls_of_a_reply_run_concurrently_and_are_recorded_in_the_models_order(
    tmp_path, fake_model_config
):
    """CrewAI's default: the calls of one reply run in its thread pool; the results go back
    in the model's order (CrewAI's), and so do the records (ours)."""
    slow = "s = 0\nfor i in range(999):\n    for j in range(999):\n        s += i * j\nprint(s)"
    calls = [
        ("python_repl", {"code": slow}),
        ("no_such_tool", {"x": 1}),
        ("datetime", {"timezone": "UTC"}),
        ("json_parser", '{"json_string": "{}", '),
    ]

    def respond(payload):
        return {"tool_calls": calls} if first_interact_turn(payload) else {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="crewai"
        )
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [
        ("python_repl", True), ("no_such_tool", False), ("datetime", True),
        ("json_parser", False),
    ]  # fmt: skip
    repl, _, clock, _ = trace.tool_calls
    assert repl.output == str(sum(i * j for i in range(999) for j in range(999)))
    # the fast call ran while the slow one was running (in sequence it would start after)
    assert clock.started_s < repl.started_s + repl.duration_s - 0.05
    # the wire: CrewAI's results in the model's order, its own refusal texts
    follow_up = next(r for r in srv.requests if any(m["role"] == "tool" for m in r["messages"]))
    (assistant,) = [m for m in follow_up["messages"] if m["role"] == "assistant"]
    tool_msgs = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [tc["id"] for tc in assistant["tool_calls"]]
    assert tool_msgs[1]["content"] == "Tool not found"
    assert tool_msgs[3]["content"].startswith("Error: Failed to parse tool arguments as JSON")


def test_tools_are_offered_as_crewai_strict_functions(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="crewai")
    (req,) = [r for r in srv.requests if "tools" in r]
    offered = {t["function"]["name"]: t["function"] for t in req["tools"]}
    for tool in get_tools(["python_repl", "sympy", "datetime", "json_parser"]):
        fn = offered[tool.name]
        assert fn["description"] == tool.description and fn["strict"] is True
        params = fn["parameters"]
        assert set(params["properties"]) == set(tool.parameters["properties"])
        assert set(params["required"]) == set(tool.parameters["properties"])  # all required
    assert offered["datetime"]["parameters"]["properties"]["timezone"]["anyOf"] == [
        {"type": "string"}, {"type": "null"},
    ]  # fmt: skip


def test_arguments_reach_the_tool_untouched(tmp_path, fake_model_config):
    # strict schemas invite nulls for optional parameters; they are recorded as sent and the
    # tool treats null as "not given"
    args = {"json_string": '{"a": 1}', "query": None}

    def respond(payload):
        return (
            {"tool_calls": [("json_parser", args)]}
            if first_interact_turn(payload)
            else {"content": "done."}
        )

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="crewai"
        )
    (call,) = trace.tool_calls
    assert json.loads(call.arguments) == args
    assert call.ok and call.output == '{\n  "a": 1\n}'


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("crewai", tmp_path, fake_model_config)


@pytest.mark.slow
def test_a_timed_out_run_stops_its_crew(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="crewai"
        )
        time.sleep(2.5)
        # the abandoned crew made no further call (on a loaded machine the crew may not even
        # have sent its first one within the 1 s the run had)
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("crewai", fake_model_config)


def test_a_crewai_flow_drives_the_loop(tmp_path, fake_model_config, monkeypatch):
    """navigate -> observe <-> interact -> report is a CrewAI Flow: its router ends the loop
    when observe says TASK COMPLETE (the third time), not mastif's drive_workflow."""
    from crewai.flow.flow import Flow

    from mastif.frameworks.crewai import LOOP_EXIT, WorkflowState

    async def no_drive(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the CrewAI workflow")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_drive)
    monkeypatch.setattr("mastif.frameworks.crewai.drive_workflow", no_drive, raising=False)
    flows = []
    kickoff_async = Flow.kickoff_async

    async def spy(self, *args, **kwargs):
        if isinstance(self.state, WorkflowState):
            flows.append(self)
        return await kickoff_async(self, *args, **kwargs)

    monkeypatch.setattr(Flow, "kickoff_async", spy)
    observed = []

    def respond(payload):
        if "Current Task: You are a web agent working on" in last_user_text(payload):
            observed.append(1)
            return {"content": "TASK COMPLETE" if len(observed) == 3 else "CONTINUE"}
        return {"content": "ok"}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=5)
        (trace,) = run_stack(cfg, tmp_path, framework="crewai")
    assert trace.status == "ok", trace.error_message
    visits = [(o.node, o.step) for o in trace.node_outputs]
    assert visits == EARLY_STOP_VISITS
    (flow,) = flows  # one Flow for the run
    assert flow.state.step == 3 and flow.state.stopped
    # the flow's methods ran in this order (the router's outputs are its labels)
    assert flow.method_outputs == [
        "ok", "go:observe", "CONTINUE", "go:interact", "ok", "go:observe", "CONTINUE",
        "go:interact", "ok", "go:observe", "TASK COMPLETE", LOOP_EXIT, "ok",
    ]  # fmt: skip
    assert len(srv.requests) == 7


def _node(name, loop=False, stop_when=None):
    from mastif.core.config import NodeSpec
    from mastif.frameworks.plan import PlannedNode

    spec = NodeSpec(name=name, prompt="p.md", output_key=f"{name}_out", loop=loop,
                    use_tools=False, tool_choice="auto", stop_when=stop_when)  # fmt: skip
    return PlannedNode(spec, "", "")


@pytest.mark.parametrize(
    ("before", "loop", "after", "max_steps"),
    [
        (["navigate"], ["observe", "interact"], ["report"], 3),
        ([], ["observe", "interact"], ["report"], 2),
        (["navigate"], ["observe"], [], 4),
        (["a", "b"], ["c", "d", "e"], ["f", "g"], 3),
        (["navigate", "report"], [], [], 3),
        (["navigate"], ["observe", "interact"], ["report"], 0),
        (["state", "kickoff"], ["name"], ["report"], 2),  # names of Flow members
    ],
)
@pytest.mark.parametrize("stop_at", [None, 1, 2, 4])
def test_the_flow_visits_nodes_as_drive_workflow_does(before, loop, after, max_steps, stop_at):
    """For any layout and any visit whose output matches stop_when, the Flow visits the same
    nodes with the same steps as the reference chaining (mastif.frameworks.plan.drive_workflow)."""
    import asyncio

    from mastif.frameworks.crewai import build_flow
    from mastif.frameworks.plan import WorkflowPlan, drive_workflow

    plan = WorkflowPlan(
        tuple(_node(n) for n in before),
        tuple(_node(n, loop=True, stop_when="STOP") for n in loop),
        tuple(_node(n) for n in after),
        max_steps,
    )

    def recorder():
        seen = []

        async def visit(node, step):
            seen.append((node.name, step))
            return "STOP" if len(seen) == stop_at else "go on"

        return seen, visit

    expected, visit = recorder()
    asyncio.run(drive_workflow(plan, visit))
    seen, visit = recorder()
    asyncio.run(build_flow(plan, visit).kickoff_async())
    assert seen == expected


def test_a2a_node_visits_reuse_the_runs_agents(tmp_path, fake_model_config, monkeypatch):
    """Under A2A every node visit is a run_node call; the agents, their model clients and
    the tools are built once per run, and the clients are closed when the run ends."""
    from mastif.frameworks import crewai as crewai_adapter

    agents, llms, toolsets = [], [], []
    real_build_agent = crewai_adapter.build_agent
    real_gateway_llm = crewai_adapter.gateway_llm
    real_crewai_tools = crewai_adapter.crewai_tools
    real_mcp_tools = crewai_adapter.mcp_tools

    def spy_build_agent(*args, **kwargs):
        agents.append(real_build_agent(*args, **kwargs))
        return agents[-1]

    def spy_gateway_llm(*args, **kwargs):
        llms.append(real_gateway_llm(*args, **kwargs))
        return llms[-1]

    def spy_tools(real):
        def spy(*args, **kwargs):
            toolsets.append(real(*args, **kwargs))
            return toolsets[-1]

        return spy

    monkeypatch.setattr(crewai_adapter, "build_agent", spy_build_agent)
    monkeypatch.setattr(crewai_adapter, "gateway_llm", spy_gateway_llm)
    monkeypatch.setattr(crewai_adapter, "crewai_tools", spy_tools(real_crewai_tools))
    monkeypatch.setattr(crewai_adapter, "mcp_tools", spy_tools(real_mcp_tools))
    with ScriptedChatServer(lambda payload: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["a2a"]
        (trace,) = run_stack(cfg, tmp_path, framework="crewai")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6
    assert len(agents) == 4  # one per workflow node, not one per visit
    assert len(llms) == 4
    assert len(toolsets) == 1
    # the run's model clients were closed when it ended (ctx.resources)
    assert all(llm._client is not None and llm._client.is_closed() for llm in llms)


def test_a_run_keeps_no_crewai_replay_log(tmp_path, fake_model_config, monkeypatch):
    """CrewAI's replay log (one SQLite file in the user's data directory behind a
    machine-wide lock, reset by every kickoff) is never opened: concurrent runs and jobs
    would reset each other's entries and queue on that lock."""
    from crewai.memory.storage import kickoff_task_outputs_storage as replay_storage

    opened = []
    real_init = replay_storage.KickoffTaskOutputsSQLiteStorage.__init__

    def spy_init(self, *args, **kwargs):
        opened.append(args)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(replay_storage.KickoffTaskOutputsSQLiteStorage, "__init__", spy_init)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with ScriptedChatServer(lambda payload: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        (trace,) = run_stack(cfg, tmp_path / "run", framework="crewai")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6  # six crews kicked off
    assert opened == []
    assert not list((tmp_path / "data").rglob("*.db"))


# moved from tests/core/test_provenance.py: the library is only here, in its environment
def test_crewai_without_a_member_it_overrides_stops_before_any_run(
    tmp_path, fake_model_config, monkeypatch
):
    from crewai.llms.providers.openai.completion import OpenAICompletion

    monkeypatch.delattr(OpenAICompletion, "_handle_completion")
    with ScriptedChatServer(lambda p: {"content": "TASK COMPLETE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        with pytest.raises(IncompatibleLibraryError) as err:
            run_stack(cfg, tmp_path, framework="crewai")
    assert srv.requests == []  # no run started
    assert not (tmp_path / "ckpt.jsonl").exists()
    text = str(err.value)
    assert text.startswith(f"crewai {metadata.version('crewai')}: ")
    assert (
        "crewai.llms.providers.openai.completion.OpenAICompletion._handle_completion is gone; "
        "mastif overrides it" in text
    )

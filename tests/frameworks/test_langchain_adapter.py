"""What the LangChain adapter does beyond the shared workflow contract (tests/frameworks/test_workflow.py).

Scripted model server, real gateway, real ``create_agent`` runtime, real tools.
"""

from __future__ import annotations

from langchain_core.tracers.context import collect_runs
from langgraph.graph.state import CompiledStateGraph

from mastif.frameworks import langchain as langchain_adapter
from mastif.frameworks import plan as workflow
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.stackrun import run_stack
from tests.support.workflows import EARLY_STOP_VISITS, hierarchical_workflow


def interacting(payload):
    return "interaction round" in last_user_text(payload)


def assistant_turns(payload):
    return sum(1 for m in payload["messages"] if m["role"] == "assistant")


def node_runs(run, names):
    """The runs named after workflow nodes under ``run``, in the order they started."""
    found = [run] if run.name in names else []
    for child in sorted(run.child_runs, key=lambda r: r.dotted_order or ""):
        found += node_runs(child, names)
    return found


def descendants(run):
    for child in run.child_runs:
        yield child
        yield from descendants(child)


def test_lcel_runnable_and_agents_drive_the_loop(tmp_path, fake_model_config, monkeypatch):
    """The workflow is one LCEL runnable (node runnables, a recursive loop runnable) whose
    nodes invoke create_agent agents, built once per run; mastif's driver is not used."""

    def no_driver(*args, **kwargs):
        raise AssertionError("mastif's drive_workflow was used")

    monkeypatch.setattr(workflow, "drive_workflow", no_driver)
    monkeypatch.setattr(langchain_adapter, "drive_workflow", no_driver, raising=False)
    created = []

    def spy_create_agent(*args, **kwargs):
        created.append(real_create_agent(*args, **kwargs))
        return created[-1]

    real_create_agent = langchain_adapter.create_agent
    monkeypatch.setattr(langchain_adapter, "create_agent", spy_create_agent)

    def respond(payload):
        text = last_user_text(payload)
        if interacting(payload) and assistant_turns(payload) == 0:
            return {"tool_calls": [("datetime", {})]}
        if "observation round 3" in text:
            return {"content": "The cart holds the item.\nTASK COMPLETE"}
        return {"content": "Looking around. CONTINUE"}

    with ScriptedChatServer(respond) as srv, collect_runs() as collector:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=4), tmp_path, framework="langchain"
        )
    assert trace.status == "ok", trace.error_message
    expected = EARLY_STOP_VISITS
    assert [(n.node, n.step) for n in trace.node_outputs] == expected
    assert [c.name for c in trace.tool_calls] == ["datetime", "datetime"]
    # one agent per workflow node, built once for the run's seven visits
    assert len(created) == 4 and all(isinstance(a, CompiledStateGraph) for a in created)
    # LangChain's own tracing: one root runnable, the node runnables in the workflow's
    # order, each running its agent; the loop is LCEL recursion (a loop run per round)
    (root,) = [r for r in collector.traced_runs if r.name == "mastif-workflow"]
    visits = node_runs(root, {"navigate", "observe", "interact", "report"})
    assert [v.name for v in visits] == [name for name, _ in expected]
    assert all(any(d.name == "LangGraph" for d in descendants(v)) for v in visits)
    loops = [d for d in descendants(root) if d.name == "loop"]
    assert len(loops) == 4  # rounds 1-3, and the call that ends the loop after the stop
    assert not [d for d in descendants(root) if d.error]


def test_node_prompts_are_those_of_langgraph(tmp_path, fake_model_config):
    """The node prompts are render_prompt's, as for every framework, and no system prompt
    is added; the tool calls and refusals are recorded as LangGraph's are."""

    def respond(payload):
        if interacting(payload):
            turn = assistant_turns(payload)
            if turn == 0:
                return {"tool_calls": [("json_parser", {"json_string": "[1, 2]", "query": "[0]"})]}
            if turn == 1:
                return {"tool_calls": [("no_such_tool", {})]}
            return {"tool_calls": [("datetime", {})]}  # asked for although no tools offered
        return {"content": "CONTINUE"}

    cfg = fake_model_config("http://unused", max_steps=1, max_tool_rounds=2)
    prompts, traces = {}, {}
    for framework in ("langgraph", "langchain"):
        with ScriptedChatServer(respond) as srv:
            cfg["models"]["fake"]["base_url"] = srv.base_url
            (traces[framework],) = run_stack(cfg, tmp_path / framework, framework=framework)
        # each node visit's first request: the node prompt as the only message
        prompts[framework] = [r["messages"] for r in srv.requests if len(r["messages"]) == 1]
        assert not any(m["role"] == "system" for r in srv.requests for m in r["messages"])
    assert prompts["langchain"] == prompts["langgraph"]
    assert [m[0]["role"] for m in prompts["langchain"]] == ["user"] * 4
    lc = traces["langchain"]
    assert lc.status == "ok", lc.error_message
    assert [(c.name, c.ok) for c in lc.tool_calls] == [
        ("json_parser", True),
        ("no_such_tool", False),
    ]
    assert [(c.name, c.ok) for c in lc.tool_calls] == [
        (c.name, c.ok) for c in traces["langgraph"].tool_calls
    ]


def test_capped_turn_ends_the_node_without_running_tools(tmp_path, fake_model_config):
    def respond(payload):
        if interacting(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=1),
            tmp_path,
            framework="langchain",
        )
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == ["datetime"]
    interact = [r for r in srv.requests if interacting(r)]
    assert len(interact) == 2  # one tool round, then one turn without tools
    assert "tools" in interact[0] and "tools" not in interact[1]
    assert [(n.node, n.text) for n in trace.node_outputs if n.node == "interact"] == [
        ("interact", "")
    ]
    assert trace.node_outputs[-1].node == "report"


def test_tool_choice_applies_to_the_first_turn(tmp_path, fake_model_config):
    def respond(payload):
        if interacting(payload) and assistant_turns(payload) == 0:
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    cfg = fake_model_config("http://unused", max_steps=1)
    cfg["workflow"]["nodes"][2]["tool_choice"] = "required"
    with ScriptedChatServer(respond) as srv:
        cfg["models"]["fake"]["base_url"] = srv.base_url
        (trace,) = run_stack(cfg, tmp_path, framework="langchain")
    assert trace.status == "ok", trace.error_message
    interact = [r for r in srv.requests if interacting(r)]
    assert [r["tool_choice"] for r in interact] == ["required", "auto"]
    assert [n.text for n in trace.node_outputs if n.node == "interact"] == ["done."]


def test_malformed_call_beside_a_valid_one_is_recorded_once(tmp_path, fake_model_config):
    """create_agent answers a malformed call itself; it is recorded once, never run."""

    def respond(payload):
        if interacting(payload) and assistant_turns(payload) == 0:
            return {
                "tool_calls": [
                    ("json_parser", {"json_string": '{"a": 7}', "query": "a"}),
                    ("python_repl", '{"code": "1+'),
                ]
            }
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), tmp_path, framework="langchain"
        )
    assert trace.status == "ok", trace.error_message
    calls = sorted((c.name, c.ok) for c in trace.tool_calls)
    assert calls == [("json_parser", True), ("python_repl", False)]
    bad = next(c for c in trace.tool_calls if c.name == "python_repl")
    assert "not valid JSON" in bad.error and bad.arguments == '{"code": "1+'
    follow_up = next(r for r in srv.requests if interacting(r) and assistant_turns(r) == 1)
    tool_msgs = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert "7" in tool_msgs
    assert any("malformed" in t for t in tool_msgs)  # the agent's own answer


def test_a2a_node_visits_reuse_the_runs_agents(tmp_path, fake_model_config, monkeypatch):
    """Under A2A every node visit is a run_node call; the agents are built once per run."""
    created = []
    real_create_agent = langchain_adapter.create_agent

    def spy_create_agent(*args, **kwargs):
        created.append(real_create_agent(*args, **kwargs))
        return created[-1]

    monkeypatch.setattr(langchain_adapter, "create_agent", spy_create_agent)
    with ScriptedChatServer(lambda payload: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["a2a"]
        (trace,) = run_stack(cfg, tmp_path, framework="langchain")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6
    assert len(created) == 4  # one per workflow node, not one per visit


def test_hierarchical_shape_runs_on_the_agents(tmp_path, fake_model_config):
    """The decomposer, each worker visit and the synthesiser are run_node calls."""

    def respond(payload):
        text = last_user_text(payload)
        if "Split the task" in text:
            return {"content": "1. Find the flights page.\n2. Compare the prices."}
        if "Your subtask:" in text:
            return {"content": "Did: " + text.split("Your subtask:")[1].split("\n")[0].strip()}
        return {"content": "Final report."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url)
        cfg["workflow"] = hierarchical_workflow()
        (trace,) = run_stack(cfg, tmp_path, framework="langchain")
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.text) for n in trace.node_outputs] == [
        ("decompose", "1. Find the flights page.\n2. Compare the prices."),
        ("worker", "Did: Find the flights page."), ("worker", "Did: Compare the prices."),
        ("synthesise", "Final report."),
    ]  # fmt: skip

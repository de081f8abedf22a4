"""What is particular to the smolagents adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py``; these tests pin down that smolagents' own
``ToolCallingAgent`` runs every node visit (built once per run), how its runtime shows
through (its system prompt, its ``New task:`` turn, its refusal texts), and that a
cancelled run stops its worker thread.
"""

from __future__ import annotations

import json
import time

import pytest

from mastif.execution.experiment import parse_config
from mastif.frameworks.plan import plan_workflow, render_prompt
from mastif.tasks import load_tasks
from tests.support.adapter_checks import (
    check_an_unreachable_endpoint_is_classified_as_such,
    check_required_tool_choice_holds_for_the_first_turn,
)
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.paths import REPO
from tests.support.stackrun import SLOW_CODE, SLOW_OUTPUT, run_stack, run_with_one_reply_of_calls
from tests.support.workflows import EARLY_STOP_VISITS, hierarchical_workflow

smol = pytest.importorskip("mastif.frameworks.smolagents")


def test_smolagents_agents_drive_every_node_visit(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: each visit is one ToolCallingAgent.run of the
    node's agent (one agent per node, built once per run); drive_workflow is not used."""

    def no_driver(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the smolagents workflow")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_driver)
    runs: list[tuple[str, int]] = []  # (agent, step_number after the run)
    built: list[str] = []
    real_run, real_init = smol.SmolAgent.run, smol.SmolAgent.__init__

    def spy_run(self, task, *args, **kwargs):
        out = real_run(self, task, *args, **kwargs)
        runs.append((self.model.model_id + "@" + self.model.client_kwargs["base_url"], out))
        return out

    def spy_init(self, *args, **kwargs):
        built.append(kwargs["model"].client_kwargs["base_url"].rsplit("/", 2)[-2])
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(smol.SmolAgent, "run", spy_run)
    monkeypatch.setattr(smol.SmolAgent, "__init__", spy_init)
    observed = []

    def respond(payload):
        text = last_user_text(payload)
        if "observation round" in text:
            observed.append(text)
            return {"content": "TASK COMPLETE" if len(observed) == 3 else "CONTINUE"}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=5), tmp_path,
                             framework="smolagents")  # fmt: skip
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert built == ["navigate", "observe", "interact", "report"]  # once per run
    # every visit was one run of its node's agent, which returned the node's output
    assert [out for _, out in runs] == [n.text for n in trace.node_outputs]
    assert [url.rsplit("/", 2)[-2] for url, _ in runs] == [n.node for n in trace.node_outputs]
    assert trace.n_llm_calls == 7


def test_smolagents_system_prompt_and_task_turn(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework="smolagents")
    assert trace.status == "ok", trace.error_message
    plan = plan_workflow(parse_config(cfg).workflow, parse_config(cfg).generation, REPO)
    ours = render_prompt(plan.nodes[0], load_tasks("builtin")[0], [], 1, 1, [])
    first = srv.requests[0]
    system, user = first["messages"]
    assert system["role"] == "system"
    assert system["content"].startswith("You are an expert assistant who can solve any task")
    assert user == {"role": "user", "content": "New task:\n" + ours}
    assert first["stop"] == ["Observation:", "Calling tools:"]
    assert first["max_tokens"] == 77 and "tools" not in first and "stream" not in first
    # on a tool node: the protocol's tools in smolagents' schema, not its final_answer tool
    (req,) = [r for r in srv.requests if "tools" in r]
    offered = {t["function"]["name"]: t["function"] for t in req["tools"]}
    assert set(offered) == {"python_repl", "sympy", "datetime", "json_parser"}
    params = offered["json_parser"]["parameters"]
    assert params["required"] == ["json_string"] and params["properties"]["query"]["nullable"]
    assert req["tool_choice"] == "auto"


def test_refused_calls_are_recorded_in_the_models_order(tmp_path, fake_model_config):
    """smolagents' own handling of one reply's calls: all of them run (its thread pool), the
    ones it refuses are recorded as failed, text that is not JSON is handed to the one-input
    tool as its argument, and an error ends the step: the model reads it in its user turn."""
    good = {"json_string": '{"price": 95}', "query": "price"}
    calls = [("no_such_tool", {"x": 1}), ("json_parser", good), ("python_repl", '{"code": "1+'),
             ("sympy", {"expression": 3})]  # fmt: skip

    trace, requests = run_with_one_reply_of_calls(calls, "smolagents", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == [n for n, _ in calls]
    unknown, ok, raw_text, bad_type = trace.tool_calls
    assert not unknown.ok and "unknown tool 'no_such_tool'" in unknown.error
    assert json.loads(unknown.arguments) == {"x": 1}
    assert ok.ok and ok.output == "95" and json.loads(ok.arguments) == good
    # the unparseable text ran as python_repl's code (its only input), and failed there
    assert json.loads(raw_text.arguments) == {"code": '{"code": "1+'}
    assert not raw_text.ok and raw_text.error.startswith("SyntaxError")
    assert not bad_type.ok and bad_type.error.startswith("arguments are not accepted")
    # what the model read back: no tool messages; the step's error in its user turn
    follow_up = requests[requests.index(next(r for r in requests if "tools" in r)) + 1]
    assert all(m["role"] in ("system", "user", "assistant") for m in follow_up["messages"])
    said = last_user_text(follow_up)
    assert "\nError:\n" in said and "Now let's retry" in said
    errors = ("Unknown tool no_such_tool, should be one of",
              "Error executing tool 'python_repl'",
              "Argument expression has type 'integer' but should be 'string'")  # fmt: skip
    assert sum(e in said for e in errors) == 1  # the first to fail ended the step


def test_calls_of_one_reply_run_concurrently_and_read_back_as_text(tmp_path, fake_model_config):
    """smolagents' thread pool: the quick datetime call starts while the slow python_repl
    call runs, the record keeps the model's order, and the model reads smolagents' own text:
    a ``Calling tools:`` assistant turn and an ``Observation:`` user turn."""
    calls = [("python_repl", {"code": SLOW_CODE}), ("datetime", {})]

    trace, requests = run_with_one_reply_of_calls(calls, "smolagents", tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    slow, quick = trace.tool_calls
    assert (slow.name, slow.ok, slow.output.strip()) == ("python_repl", True, SLOW_OUTPUT)
    assert quick.name == "datetime" and quick.ok
    assert quick.started_s < slow.started_s + slow.duration_s  # ran while the slow one did
    follow_up = requests[requests.index(next(r for r in requests if "tools" in r)) + 1]
    *_, asked, observed = follow_up["messages"]
    assert asked["role"] == "assistant" and asked["content"].startswith("Calling tools:\n[")
    assert "'name': 'python_repl'" in asked["content"] and "'name': 'datetime'" in asked["content"]
    assert observed["role"] == "user" and observed["content"].startswith("Observation:\n")
    assert slow.output.strip() in observed["content"] and quick.output in observed["content"]


def test_tool_rounds_are_capped(tmp_path, fake_model_config):
    """max_tool_rounds replies with tool calls, then one request without tools."""

    def respond(payload):
        return {"tool_calls": [("datetime", {})]} if "tools" in payload else {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=2), tmp_path,
            framework="smolagents",
        )  # fmt: skip
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [("datetime", True)] * 2
    interact = [r for r in srv.requests if "interaction round" in r["messages"][1]["content"]]
    assert ["tools" in r for r in interact] == [True, True, False]


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("smolagents", tmp_path, fake_model_config)


@pytest.mark.slow
def test_a_timed_out_run_stops_its_agent(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="smolagents"
        )
        time.sleep(2.5)
        # the abandoned agent made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("smolagents", fake_model_config)


class _Spies:
    """Counts what the adapter builds for a run and checks that it was closed."""

    def __init__(self, monkeypatch):
        self.agents, self.models, self.bridges, self.workers, self.mcps = [], [], [], [], []
        self.shut, self.disconnected = [], []
        spies = self
        real_agent_init, real_model_init = smol.SmolAgent.__init__, smol.GatewayModel.__init__
        real_bridge = smol._Bridge

        def agent_init(agent, *args, **kwargs):
            spies.agents.append(agent)
            real_agent_init(agent, *args, **kwargs)

        def model_init(model, *args, **kwargs):
            spies.models.append(model)
            real_model_init(model, *args, **kwargs)

        def bridge(*args, **kwargs):
            spies.bridges.append(real_bridge(*args, **kwargs))
            return spies.bridges[-1]

        class Worker(smol.ThreadPoolExecutor):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                spies.workers.append(self)

            def shutdown(self, *args, **kwargs):
                spies.shut.append(self)
                super().shutdown(*args, **kwargs)

        class Client(smol.MCPClient):
            def __init__(self, *args, **kwargs):
                spies.mcps.append(self)
                super().__init__(*args, **kwargs)

            def disconnect(self, *args, **kwargs):
                spies.disconnected.append(self)
                super().disconnect(*args, **kwargs)

        monkeypatch.setattr(smol.SmolAgent, "__init__", agent_init)
        monkeypatch.setattr(smol.GatewayModel, "__init__", model_init)
        monkeypatch.setattr(smol, "_Bridge", bridge)
        monkeypatch.setattr(smol, "ThreadPoolExecutor", Worker)
        monkeypatch.setattr(smol, "MCPClient", Client)

    def assert_closed(self):
        assert self.shut == self.workers  # every worker thread shut down
        assert self.disconnected == self.mcps  # every MCP client disconnected
        for bridge in self.bridges:
            assert bridge.cancelled.is_set()  # its agents interrupted
            assert bridge.clients and all(c.is_closed for c in bridge.clients)


def test_a2a_node_visits_reuse_the_runs_agents(tmp_path, fake_model_config, monkeypatch):
    """Under A2A every node visit is a run_node call: the agents, their models and the
    worker thread are built once per run, and closed (ctx.resources) when the run ends."""
    spies = _Spies(monkeypatch)
    with ScriptedChatServer(lambda payload: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["a2a"]
        (trace,) = run_stack(cfg, tmp_path, framework="smolagents")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6  # six visits
    assert len(spies.bridges) == len(spies.workers) == 1  # one per run, not per visit
    assert len(spies.agents) == len(spies.models) == 4  # one per workflow node
    assert spies.mcps == []
    spies.assert_closed()


def test_hierarchical_visits_under_mcp_share_one_mcp_client(
    tmp_path, fake_model_config, monkeypatch
):
    """The hierarchical shape under MCP: decomposer, two worker visits and synthesiser are
    run_node calls on one set of agents and one MCP client, disconnected at the run's end."""
    spies = _Spies(monkeypatch)

    def respond(payload):
        text = last_user_text(payload)
        if "Split the task" in text:
            return {"content": "1. Find the flights page.\n2. Compare the prices."}
        if "Your subtask:" in text and payload["messages"][-1]["role"] == "user":
            # (smolagents with its MCP client requires every input, optional ones too)
            return {"tool_calls": [("python_repl", {"code": "print(6 * 7)"})]}
        return {"content": "Final report."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url)
        cfg["protocols"] = ["mcp"]
        cfg["workflow"] = hierarchical_workflow()
        (trace,) = run_stack(cfg, tmp_path, framework="smolagents")
    assert trace.status == "ok", trace.error_message
    assert [n.node for n in trace.node_outputs] == ["decompose", "worker", "worker", "synthesise"]
    assert [(c.name, c.ok, c.output.strip()) for c in trace.tool_calls] == [
        ("python_repl", True, "42")
    ] * 2
    assert len(spies.bridges) == len(spies.workers) == len(spies.mcps) == 1
    assert len(spies.agents) == len(spies.models) == 3
    spies.assert_closed()

"""What is particular to the OpenAI Agents SDK adapter, against a scripted model behind the
real gateway.

The shared contract is in ``test_workflow.py``; these tests pin down that the SDK's own
``Agent`` / ``Runner.run`` makes every node visit (one agent per node, built once per run),
what the SDK puts on the wire, how its refusals are answered and recorded, that its tracing
exports nothing, and that a cancelled run stops.
"""

from __future__ import annotations

import json
import time

import pytest

from mastif.execution.experiment import parse_config
from mastif.frameworks.plan import plan_workflow, render_prompt
from mastif.tasks import load_tasks
from mastif.tools import get_tools
from tests.support.adapter_checks import (
    check_an_unreachable_endpoint_is_classified_as_such,
    check_required_tool_choice_holds_for_the_first_turn,
)
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.paths import REPO
from tests.support.stackrun import run_stack, run_with_one_reply_of_calls
from tests.support.workflows import EARLY_STOP_VISITS, hierarchical_workflow

oa = pytest.importorskip("mastif.frameworks.openai_agents")
agents = pytest.importorskip("agents")

FRAMEWORK = "openai_agents"


class _Spies:
    """Counts the SDK objects the adapter builds and runs, and the MCP connections."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.agents: list[str] = []  # agent names, as built
        self.runs: list[tuple[str, str]] = []  # (agent, its final output)
        self.connected: list[object] = []
        self.cleaned: list[object] = []
        spies = self
        real_init, real_run = oa.Agent.__init__, oa.Runner.run
        server = oa.StreamableHttpServer
        real_connect, real_cleanup = server.connect, server.cleanup

        def agent_init(agent, *args, **kwargs):  # type: ignore[no-untyped-def]
            spies.agents.append(kwargs["name"])
            real_init(agent, *args, **kwargs)

        async def run(agent, prompt, **kwargs):  # type: ignore[no-untyped-def]
            result = await real_run(agent, prompt, **kwargs)
            spies.runs.append((agent.name, result.final_output))
            return result

        async def connect(self):  # type: ignore[no-untyped-def]
            spies.connected.append(self)
            await real_connect(self)

        async def cleanup(self):  # type: ignore[no-untyped-def]
            spies.cleaned.append(self)
            await real_cleanup(self)

        monkeypatch.setattr(oa.Agent, "__init__", agent_init)
        monkeypatch.setattr(oa.Runner, "run", staticmethod(run))
        monkeypatch.setattr(server, "connect", connect)
        monkeypatch.setattr(server, "cleanup", cleanup)


def test_sdk_agents_drive_every_node_visit(tmp_path, fake_model_config, monkeypatch):
    """CONTINUE twice, then TASK COMPLETE: each visit is one Runner.run of the node's agent
    (one Agent per node, built once per run); drive_workflow is not used."""

    def no_driver(*args, **kwargs):
        raise AssertionError("drive_workflow must not run the openai_agents workflow")

    monkeypatch.setattr("mastif.frameworks.plan.drive_workflow", no_driver)
    spies = _Spies(monkeypatch)
    observed = []

    def respond(payload):
        text = last_user_text(payload)
        if "observation round" in text:
            observed.append(text)
            return {"content": "TASK COMPLETE" if len(observed) == 3 else "CONTINUE"}
        return {"content": "CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=5), tmp_path,
                             framework=FRAMEWORK)  # fmt: skip
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert spies.agents == ["navigate", "observe", "interact", "report"]  # once per run
    # every visit was one run of its node's agent, which returned the node's output
    assert spies.runs == [(n.node, n.text) for n in trace.node_outputs]
    assert trace.n_llm_calls == 7


def test_what_the_sdk_puts_on_the_wire(tmp_path, fake_model_config):
    """No system prompt, the rendered prompt as the user turn, the sampling settings (the
    seed through extra_args), and the protocol's tools with their own schemas, not strict."""
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tokens=77)
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    config = parse_config(cfg)
    plan = plan_workflow(config.workflow, config.generation, REPO)
    ours = render_prompt(plan.nodes[0], load_tasks("builtin")[0], [], 1, 1, [])
    first = srv.requests[0]
    assert first["messages"] == [{"role": "user", "content": ours}]
    assert first["max_tokens"] == 77 and first["temperature"] == config.generation.temperature
    assert first["seed"] == config.generation.seed
    assert "tools" not in first and "tool_choice" not in first and "stream" not in first
    (req,) = [r for r in srv.requests if "tools" in r]
    assert req["tool_choice"] == "auto"
    specs = {t.name: t for t in get_tools(list(config.tools))}
    offered = {t["function"]["name"]: t["function"] for t in req["tools"]}
    assert set(offered) == set(specs)
    for name, function in offered.items():
        assert function["parameters"] == specs[name].parameters  # the protocol's own schema
        assert function["description"] == specs[name].description
        assert function["strict"] is False


def test_refused_calls_are_recorded_in_the_models_order(tmp_path, fake_model_config):
    """An unknown tool and arguments that are not JSON are answered with the SDK's own texts
    and recorded as failed; the reply's calls keep the model's order in the record."""
    good = {"json_string": '{"price": 95}', "query": "price"}
    calls = [("no_such_tool", {"x": 1}), ("json_parser", good), ("python_repl", '{"code": "1+'),
             ("datetime", {})]  # fmt: skip

    trace, requests = run_with_one_reply_of_calls(calls, FRAMEWORK, tmp_path, fake_model_config)
    assert trace.status == "ok", trace.error_message
    assert [c.name for c in trace.tool_calls] == [n for n, _ in calls]
    unknown, ok, raw_text, clock = trace.tool_calls
    assert not unknown.ok and "unknown tool 'no_such_tool'" in unknown.error
    assert "Tool 'no_such_tool' not found." in unknown.error
    assert json.loads(unknown.arguments) == {"x": 1}
    assert ok.ok and ok.output == "95" and json.loads(ok.arguments) == good
    assert not raw_text.ok and raw_text.arguments == '{"code": "1+'
    assert raw_text.error == 'Invalid JSON input for tool python_repl: {"code": "1+'
    assert clock.ok
    # what the model read back: one tool message per call, the SDK's own texts
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    assistant = [m for m in follow_up["messages"] if m["role"] == "assistant"][-1]
    said = {m["tool_call_id"]: m["content"] for m in follow_up["messages"] if m["role"] == "tool"}
    by_name = {tc["function"]["name"]: said[tc["id"]] for tc in assistant["tool_calls"]}
    assert by_name["no_such_tool"] == "Tool 'no_such_tool' not found."
    assert by_name["json_parser"] == "95"
    # the SDK's default_tool_error_function (0.24): one fixed text, the error itself withheld
    assert by_name["python_repl"] == "An error occurred while running the tool. Please try again."


def test_tool_rounds_are_capped(tmp_path, fake_model_config):
    """max_tool_rounds replies with tool calls, then one request without tools; a call in
    the reply to it is not run."""

    def respond(payload):
        return {"tool_calls": [("datetime", {})]}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=2), tmp_path,
            framework=FRAMEWORK,
        )  # fmt: skip
    assert trace.status == "ok", trace.error_message
    assert [(c.name, c.ok) for c in trace.tool_calls] == [("datetime", True)] * 2
    interact = [r for r in srv.requests if "interaction round" in r["messages"][0]["content"]]
    assert ["tools" in r for r in interact] == [True, True, False]
    assert "tool_choice" not in interact[-1]


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn(FRAMEWORK, tmp_path, fake_model_config)


def test_tracing_exports_nothing(tmp_path, fake_model_config, monkeypatch):
    """The SDK's tracing is off: no processor on the global provider, no exporter call,
    no exporter thread started."""
    exported: list[object] = []
    monkeypatch.setattr(
        agents.tracing.processors.BackendSpanExporter, "export",
        lambda self, items: exported.append(items),
    )  # fmt: skip
    with ScriptedChatServer(lambda p: {"content": "CONTINUE"}) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path,
                             framework=FRAMEWORK)  # fmt: skip
    assert trace.status == "ok", trace.error_message
    provider = agents.tracing.get_trace_provider()
    assert provider._disabled is True
    assert provider._multi_processor._processors == ()
    assert agents.tracing.processors.default_processor()._worker_thread is None
    assert exported == []


@pytest.mark.slow
def test_a_timed_out_run_stops_its_agent(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework=FRAMEWORK
        )
        time.sleep(2.5)
        # the cancelled visit made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such(FRAMEWORK, fake_model_config)


def test_a2a_node_visits_reuse_the_runs_agents(tmp_path, fake_model_config, monkeypatch):
    """Under A2A every node visit is a run_node call: the agents are built once per run."""
    spies = _Spies(monkeypatch)
    with ScriptedChatServer(lambda payload: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["a2a"]
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == 6  # six visits
    assert spies.agents == ["navigate", "observe", "interact", "report"]  # once per run
    assert [name for name, _ in spies.runs] == [n.node for n in trace.node_outputs]
    assert spies.connected == []


def test_hierarchical_visits_under_mcp_share_one_mcp_connection(
    tmp_path, fake_model_config, monkeypatch
):
    """The hierarchical shape under MCP: decomposer, two worker visits and synthesiser are
    run_node calls on one set of agents and one SDK MCP connection, closed at the run's end."""
    spies = _Spies(monkeypatch)

    def respond(payload):
        text = last_user_text(payload)
        if "Split the task" in text:
            return {"content": "1. Find the flights page.\n2. Compare the prices."}
        if "Your subtask:" in text and payload["messages"][-1]["role"] == "user":
            return {"tool_calls": [("python_repl", {"code": "print(6 * 7)"})]}
        return {"content": "Final report."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url)
        cfg["protocols"] = ["mcp"]
        cfg["workflow"] = hierarchical_workflow()
        (trace,) = run_stack(cfg, tmp_path, framework=FRAMEWORK)
    assert trace.status == "ok", trace.error_message
    assert [n.node for n in trace.node_outputs] == ["decompose", "worker", "worker", "synthesise"]
    assert [(c.name, c.ok, c.output.strip()) for c in trace.tool_calls] == [
        ("python_repl", True, "42")
    ] * 2
    assert trace.protocol_calls == 2  # recorded by the MCP server
    assert len(spies.agents) == 3
    assert len(spies.connected) == 1 and spies.cleaned == spies.connected

"""What is particular to the CAMEL adapter, against a scripted model behind the real gateway.

The shared contract is in ``test_workflow.py`` and ``test_protocols_contract.py``; these tests
pin down that each node visit is one ``ChatAgent.astep`` of the node's agent (built once per
run) chained in plain code, what CAMEL puts on the wire, its refusal and error texts, the
turn policy, its MCP toolkit under ``mcp``, that no telemetry switch is left on, and that a
timed-out run stops.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from mastif.frameworks import orchestration
from tests.support.adapter_checks import (
    check_an_unreachable_endpoint_is_classified_as_such,
    check_required_tool_choice_holds_for_the_first_turn,
    first_interact_turn,
)
from tests.support.fakes import ScriptedChatServer, in_interaction_round, last_user_text
from tests.support.paths import REPO
from tests.support.stackrun import SLOW_CODE, SLOW_OUTPUT, run_stack, run_with_one_reply_of_calls
from tests.support.workflows import EARLY_STOP_VISITS, hierarchical_workflow

cam = pytest.importorskip("mastif.frameworks.camel")


class _Spies:
    """Record the run objects, agents and steps the adapter makes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.objects: list[cam.RunObjects] = []
        self.agents: list[cam.NodeAgent] = []
        self.steps: list[str] = []
        spies = self
        open_ = cam.RunObjects.open.__func__
        agent_init = cam.NodeAgent.__init__
        astep = cam.ChatAgent.astep

        async def spy_open(cls, ctx, stack):
            objects = await open_(cls, ctx, stack)
            spies.objects.append(objects)
            return objects

        def spy_init(self, *args, **kwargs):
            spies.agents.append(self)
            agent_init(self, *args, **kwargs)

        async def spy_astep(self, *args, **kwargs):
            spies.steps.append(self.node.name)
            return await astep(self, *args, **kwargs)

        monkeypatch.setattr(cam.RunObjects, "open", classmethod(spy_open))
        monkeypatch.setattr(cam.NodeAgent, "__init__", spy_init)
        monkeypatch.setattr(cam.ChatAgent, "astep", spy_astep)


def test_chat_agents_chained_in_plain_code_make_every_visit(
    tmp_path, fake_model_config, monkeypatch
):
    """CONTINUE twice, then TASK COMPLETE: run_linear chained the visits once for the run,
    every visit was one astep of its node's ChatAgent, and the four agents were built once."""
    spies = _Spies(monkeypatch)
    chains = []
    run_linear = orchestration.run_linear

    async def spy_chain(ctx, dispatch):
        chains.append(ctx.run_id)
        return await run_linear(ctx, dispatch)

    monkeypatch.setattr(cam, "run_linear", spy_chain)

    def respond(payload):
        if "observation round 3" in last_user_text(payload):
            return {"content": "All done.\nTASK COMPLETE"}
        return {"content": "Still going. CONTINUE"}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=5), tmp_path, framework="camel"
        )
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert spies.steps == [node for node, _ in EARLY_STOP_VISITS]
    assert len(chains) == 1 and len(spies.objects) == 1
    assert [a.node.name for a in spies.agents] == ["navigate", "observe", "interact", "report"]
    assert all(isinstance(a, cam.ChatAgent) for a in spies.agents)
    assert trace.final_answer == "Still going. CONTINUE"
    # each visit is a fresh conversation: one user turn, the node prompt, no system prompt
    assert all([m["role"] for m in r["messages"]] == ["user"] for r in srv.requests)


def test_no_system_prompt_and_the_tools_as_given(tmp_path, fake_model_config):
    """CAMEL sends the node prompt as the only turn, the protocol's tool schemas as they are
    (no strict rewrite in-process), tools and tool_choice only on the interact node, and
    writes results back as tool messages after an assistant turn with content ""."""
    from mastif.tools import get_tools

    trace, requests = run_with_one_reply_of_calls(
        [("json_parser", {"json_string": '{"a": 7}', "query": "a"})], "camel", tmp_path,
        fake_model_config,
    )  # fmt: skip
    assert trace.status == "ok", trace.error_message
    navigate = requests[0]
    assert "tools" not in navigate and "tool_choice" not in navigate
    assert navigate["temperature"] == 0.7 and navigate["seed"] == 20260504
    interact = [r for r in requests if in_interaction_round(r)]
    first, follow_up = interact
    specs = get_tools(["python_repl", "sympy", "datetime", "json_parser"])
    assert first["tools"] == [
        {"type": "function", "function": {"name": t.name, "description": t.description,
                                          "parameters": t.parameters}}
        for t in specs
    ]  # fmt: skip
    assert first["tool_choice"] == "auto" and follow_up["tool_choice"] == "auto"
    assistant, result = follow_up["messages"][1:]
    assert assistant["role"] == "assistant" and assistant["content"] == ""
    assert result == {
        "role": "tool",
        "content": "7",
        "tool_call_id": assistant["tool_calls"][0]["id"],
    }
    assert [(c.name, c.ok, c.output) for c in trace.tool_calls] == [("json_parser", True, "7")]


def test_calls_of_one_reply_run_one_after_another_in_the_models_order(tmp_path, fake_model_config):
    """CAMEL's astep awaits the calls of a reply one by one: the slow first call ended
    before the second began, and the record keeps the model's order."""
    trace, requests = run_with_one_reply_of_calls(
        [("python_repl", {"code": SLOW_CODE}), ("datetime", {})], "camel", tmp_path,
        fake_model_config,
    )  # fmt: skip
    assert trace.status == "ok", trace.error_message
    slow, quick = trace.tool_calls
    assert (slow.name, slow.output.strip(), quick.name) == ("python_repl", SLOW_OUTPUT, "datetime")
    assert quick.started_s >= slow.started_s + slow.duration_s - 1e-3


def test_refusals_and_tool_errors_are_camels_own_texts(tmp_path, fake_model_config):
    """An unknown tool: CAMEL's "not found" text to the model, a failed call in the record
    (with that text); a tool that fails: CAMEL's "Tool execution failed" text, recorded once
    with the tool's own error."""
    trace, requests = run_with_one_reply_of_calls(
        [("no_such_tool", {"x": 1}), ("python_repl", {"code": "1/0"})], "camel", tmp_path,
        fake_model_config,
    )  # fmt: skip
    assert trace.status == "ok", trace.error_message
    refused, failed = trace.tool_calls
    assert refused.name == "no_such_tool" and not refused.ok
    assert "unknown tool 'no_such_tool'" in refused.error
    assert "Tool 'no_such_tool' not found in registered tools" in refused.error
    assert failed.name == "python_repl" and not failed.ok and "ZeroDivisionError" in failed.error
    follow_up = next(r for r in requests if any(m["role"] == "tool" for m in r["messages"]))
    said = [m["content"] for m in follow_up["messages"] if m["role"] == "tool"]
    assert said[0] == "Tool execution failed: Tool 'no_such_tool' not found in registered tools"
    assert said[1].startswith("Tool execution failed: Error executing async tool 'python_repl': ")
    assert "ZeroDivisionError" in said[1]


def test_arguments_that_are_not_json_fail_camels_step(tmp_path, fake_model_config):
    """CAMEL parses arguments with json.loads and its step raises: the call is recorded as
    refused (nothing ran), and the run ends with CAMEL's error."""
    trace, requests = run_with_one_reply_of_calls(
        [("datetime", {}), ("python_repl", '{"code": "1+')], "camel", tmp_path, fake_model_config
    )
    assert trace.status == "error" and "JSONDecodeError" in (trace.error_message or "")
    (call,) = trace.tool_calls
    assert (call.name, call.arguments, call.ok) == ("python_repl", '{"code": "1+', False)
    assert "not valid JSON" in call.error
    assert not any(m["role"] == "tool" for r in requests for m in r["messages"])


def test_tool_rounds_are_capped_and_unasked_calls_not_run(tmp_path, fake_model_config):
    """max_tool_rounds 2: two requests with tools, then one without; the model's calls in
    the reply to the request without tools are not run, and the visit ends there."""

    def respond(payload):
        return {"tool_calls": [("datetime", {})]} if in_interaction_round(payload) else {
            "content": "CONTINUE"
        }  # fmt: skip

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=2)
        (trace,) = run_stack(cfg, tmp_path, framework="camel")
    assert trace.status == "ok", trace.error_message
    interact = [r for r in srv.requests if in_interaction_round(r)]
    assert ["tools" in r for r in interact] == [True, True, False]
    assert "tool_choice" not in interact[-1]
    assert [c.name for c in trace.tool_calls] == ["datetime", "datetime"]
    assert [n.node for n in trace.node_outputs] == ["navigate", "observe", "interact", "report"]
    assert trace.node_outputs[2].text == ""


def test_a_model_named_stub_is_the_endpoints(tmp_path, fake_model_config):
    """CAMEL's ModelFactory swaps in its own StubModel for a model named "stub" (its
    ModelType.STUB) on any platform; the adapter's model is the OpenAI-compatible one
    whatever the endpoint calls its model, so the run reaches the endpoint."""
    with ScriptedChatServer(lambda payload: {"content": "done."}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        cfg["models"]["fake"]["model"] = "stub"
        (trace,) = run_stack(cfg, tmp_path, framework="camel")
    assert trace.status == "ok", trace.error_message
    assert srv.requests and all(r["model"] == "stub" for r in srv.requests)


def test_required_tool_choice_holds_for_the_first_turn(tmp_path, fake_model_config):
    check_required_tool_choice_holds_for_the_first_turn("camel", tmp_path, fake_model_config)


def test_an_unreachable_endpoint_is_classified_as_such(fake_model_config):
    check_an_unreachable_endpoint_is_classified_as_such("camel", fake_model_config)


def test_under_mcp_camels_toolkit_calls_the_server(tmp_path, fake_model_config, monkeypatch):
    """Under mcp the tools come from CAMEL's MCPToolkit (its client on the run's HTTP client
    factory), with CAMEL's strict schemas; the valid call reaches the server, a call CAMEL's
    MCP tool answers itself (a required argument missing) is recorded as refused."""
    spies = _Spies(monkeypatch)

    def respond(payload):
        if first_interact_turn(payload):
            return {"tool_calls": [("json_parser", {"json_string": "[5]", "query": "0"}),
                                   ("python_repl", {})]}  # fmt: skip
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        cfg["protocols"] = ["mcp"]
        (trace,) = run_stack(cfg, tmp_path, framework="camel")
    assert trace.status == "ok", trace.error_message
    (objects,) = spies.objects
    assert isinstance(objects.mcp, cam.MCPToolkit)
    (client,) = objects.mcp.clients
    assert isinstance(client, cam.GatewayMCPClient) and not client.is_connected()  # closed
    assert trace.protocol_calls == 1
    ok, refused = trace.tool_calls
    assert (ok.name, ok.ok, ok.output) == ("json_parser", True, "5")
    assert refused.name == "python_repl" and not refused.ok
    assert "Missing required parameters." in refused.error
    offered = next(r for r in srv.requests if "tools" in r)["tools"]
    assert all(t["function"]["strict"] is True for t in offered)


def test_a2a_node_visits_reuse_the_runs_agents(tmp_path, fake_model_config, monkeypatch):
    """Under A2A every node visit is a run_node call on the run's agents, built once."""
    spies = _Spies(monkeypatch)
    with ScriptedChatServer(lambda payload: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["a2a"]
        (trace,) = run_stack(cfg, tmp_path, framework="camel")
    assert trace.status == "ok", trace.error_message
    assert len(trace.node_outputs) == len(spies.steps) == 6
    assert len(spies.objects) == 1 and len(spies.agents) == 4


def test_hierarchical_visits_share_the_runs_agents(tmp_path, fake_model_config, monkeypatch):
    spies = _Spies(monkeypatch)

    def respond(payload):
        text = last_user_text(payload)
        if "Split the task" in text:
            return {"content": "1. Find the flights page.\n2. Compare the prices."}
        return {"content": "Final report."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url)
        cfg["workflow"] = hierarchical_workflow()
        (trace,) = run_stack(cfg, tmp_path, framework="camel")
    assert trace.status == "ok", trace.error_message
    assert [n.node for n in trace.node_outputs] == ["decompose", "worker", "worker", "synthesise"]
    assert len(spies.objects) == 1 and len(spies.agents) == 3


def test_no_tokenizer_download(tmp_path, fake_model_config, monkeypatch):
    """CAMEL's default token counter would load tiktoken's encoding (downloaded on first use):
    the agents count with the estimating counter, and tiktoken is never asked."""
    import tiktoken

    def refuse(*args, **kwargs):
        raise AssertionError("tiktoken was asked for an encoding")

    monkeypatch.setattr(tiktoken, "get_encoding", refuse)
    monkeypatch.setattr(tiktoken, "encoding_for_model", refuse)
    trace, _ = run_with_one_reply_of_calls(
        [("python_repl", {"code": "print('x' * 5000)"})], "camel", tmp_path, fake_model_config
    )
    assert trace.status == "ok", trace.error_message
    assert trace.tool_calls[0].ok


def test_telemetry_switches_are_off_before_camel_is_imported():
    """With the environment inviting CAMEL's tracing integrations, importing the adapter
    leaves them off: no AgentOps, Langfuse or TraceRoot package, CAMEL's own no-op
    decorators in place, and CAMEL has not configured the process's logging."""
    code = """
import importlib.util, json, logging, os
import mastif.frameworks.camel
from camel.agents import chat_agent
from camel.utils import commons
print(json.dumps({
    "env": {v: os.environ[v] for v in ("LANGFUSE_ENABLED", "TRACEROOT_ENABLED",
                                       "CAMEL_LOGGING_DISABLED", "CAMEL_MODEL_LOG_ENABLED")},
    "installed": [m for m in ("agentops", "langfuse", "traceroot")
                  if importlib.util.find_spec(m)],
    "tool_event": commons.ToolEvent is None,
    "track_agent": chat_agent.track_agent.__module__,
    "observe": chat_agent.observe.__module__,
    "root_handlers": len(logging.getLogger().handlers),
}))
"""
    invite = {"AGENTOPS_API_KEY": "probe", "LANGFUSE_ENABLED": "true",
              "TRACEROOT_ENABLED": "true", "CAMEL_MODEL_LOG_ENABLED": "true",
              "PATH": "/usr/bin:/bin"}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=invite,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["env"] == {"LANGFUSE_ENABLED": "false", "TRACEROOT_ENABLED": "false",
                           "CAMEL_LOGGING_DISABLED": "true", "CAMEL_MODEL_LOG_ENABLED": "false"}  # fmt: skip
    assert seen["installed"] == []
    assert seen["tool_event"] is True
    assert seen["track_agent"].startswith("camel.") and seen["observe"].startswith("camel.")
    assert seen["root_handlers"] == 0


@pytest.mark.slow
def test_a_timed_out_run_stops(tmp_path, fake_model_config):
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 2}) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, timeout_s=1), tmp_path, framework="camel"
        )
        time.sleep(2.5)
        # the cancelled astep made no further call
        assert len(srv.requests) <= 1
    assert trace.status == "timeout"
    assert trace.node_outputs == []

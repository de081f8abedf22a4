"""Every built-in framework's own construct drives the linear workflow, under every
protocol (issues 19 and 40): a scripted model that says CONTINUE twice and then TASK
COMPLETE yields the expected node sequence, the framework's workflow object (graph,
runnable, Flow, SK process, LlamaIndex Workflow, Agent Framework workflow, pydantic-graph
Graph, Haystack Pipeline) is built once per run and is what ran it, and mastif's own
drivers (``drive_workflow``, ``run_linear``) are never used. smolagents and the OpenAI
Agents SDK have no workflow construct: their ``orchestrate`` (called once) chains the nodes
in plain code with ``run_linear`` (docs/frameworks.md). Under ``a2a`` that construct's node
steps are A2A requests to the node agents; building it is set-up time, apart from the
agents' work."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from mastif.frameworks import FRAMEWORKS, orchestration
from mastif.frameworks import plan as workflow
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.stackrun import run_stack
from tests.support.workflows import EARLY_STOP_VISITS

#: where each framework's workflow construct is built: (module, attribute path)
CONSTRUCTS: dict[str, tuple[str, str]] = {
    "langgraph": ("mastif.frameworks.langgraph", "LangGraphAdapter.build_graph"),
    "langchain": ("mastif.frameworks.langchain", "LangChainAdapter.build_workflow"),
    "crewai": ("mastif.frameworks.crewai", "build_flow"),
    "semantic_kernel": ("mastif.frameworks.semantic_kernel", "workflow_process"),
    "llamaindex": ("mastif.frameworks.llamaindex", "LinearWorkflow.visit"),
    "smolagents": ("mastif.frameworks.smolagents", "SmolagentsAdapter.orchestrate"),
    "agent_framework": ("mastif.frameworks.agent_framework", "build_workflow"),
    "pydantic_ai": ("mastif.frameworks.pydantic_ai", "build_graph"),
    "openai_agents": ("mastif.frameworks.openai_agents", "OpenAIAgentsAdapter.orchestrate"),
    "haystack": ("mastif.frameworks.haystack", "build_pipeline"),
    "upsonic": ("mastif.frameworks.upsonic", "build_graph"),
    "agno": ("mastif.frameworks.agno", "build_workflow"),
    "autogen": ("mastif.frameworks.autogen", "build_graph"),
    "google_adk": ("mastif.frameworks.google_adk", "build_workflow"),
    "camel": ("mastif.frameworks.camel", "CamelAdapter.orchestrate"),
    "strands": ("mastif.frameworks.strands", "build_graph"),
    "ag2": ("mastif.frameworks.ag2", "build_network"),
    "beeai": ("mastif.frameworks.beeai", "build_workflow"),
    "langroid": ("mastif.frameworks.langroid", "build_workflow"),
}


#: frameworks without a workflow construct: their adapter's ``orchestrate`` chains the nodes
#: in plain code, mastif's one chain (``orchestration.run_linear``), as their users would
PLAIN_CODE = frozenset({"smolagents", "openai_agents", "camel"})


def respond(payload: dict[str, Any]) -> dict[str, Any]:
    if "observation round 3" in last_user_text(payload):
        return {"content": "The cart holds the item.\nTASK COMPLETE"}
    return {"content": "Looking around.\nCONTINUE"}


def spy(monkeypatch: pytest.MonkeyPatch, module_name: str, path: str, calls: list[Any]) -> None:
    """Wrap ``module.path`` (a function or a class's method) so each call is recorded."""
    owner: Any = importlib.import_module(module_name)
    *parents, attr = path.split(".")
    for name in parents:
        owner = getattr(owner, name)
    real = getattr(owner, attr)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, attr, wrapper)


def refuse(name: str):  # type: ignore[no-untyped-def]
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"mastif's {name} was used")

    return fail


@pytest.mark.parametrize("protocol", ["standard", "a2a"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_frameworks_construct_drives_the_loop(
    tmp_path, fake_model_config, monkeypatch, framework, protocol
):
    if framework not in PLAIN_CODE:
        monkeypatch.setattr(workflow, "drive_workflow", refuse("drive_workflow"))
        monkeypatch.setattr(orchestration, "drive_workflow", refuse("drive_workflow"))
        monkeypatch.setattr(orchestration, "run_linear", refuse("run_linear"))
    module_name, path = CONSTRUCTS[framework]
    calls: list[Any] = []
    spy(monkeypatch, module_name, path, calls)

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=4)
        cfg["protocols"] = [protocol]
        (trace,) = run_stack(cfg, tmp_path, framework=framework)
    assert trace.status == "ok", trace.error_message
    assert [(n.node, n.step) for n in trace.node_outputs] == EARLY_STOP_VISITS
    assert trace.final_answer == trace.node_outputs[-1].text
    # LangGraph's node agents run one-node graphs of their own (run_node): not the workflow
    calls = [c for c in calls if not c[1].get("single")]
    if path.endswith(".visit"):  # the Workflow's steps made every visit
        assert len(calls) == len(EARLY_STOP_VISITS)
    else:  # the construct is built (or entered) once for the run, not per visit
        assert len(calls) == 1
    if protocol == "a2a":
        # the orchestrator agent's construct sent each visit to a node agent: one A2A
        # message per visit, plus the task to the orchestrator
        assert trace.protocol_messages is not None
        assert trace.protocol_messages >= 2 * (len(EARLY_STOP_VISITS) + 1)
    assert trace.wall_setup_s is not None and trace.wall_setup_s > 0
    parts = (trace.wall_model_s, trace.wall_queue_s, trace.wall_tools_s,
             trace.wall_protocol_s, trace.wall_setup_s, trace.wall_harness_s)  # fmt: skip
    assert sum(parts) == pytest.approx(trace.wall_seconds, abs=1e-9)

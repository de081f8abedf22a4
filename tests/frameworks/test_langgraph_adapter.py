"""LangGraph-specific behaviour of its adapter (the shared contract: tests/frameworks/test_workflow.py)."""

from __future__ import annotations

from mastif.frameworks.langgraph import LangGraphAdapter
from tests.support.fakes import ScriptedChatServer
from tests.support.stackrun import run_stack


def test_a2a_node_visits_reuse_the_runs_graphs(tmp_path, fake_model_config, monkeypatch):
    """Under A2A every node visit is a run_node call: its one-node graph is compiled once
    per node and run (with the run's tools loaded once), not once per visit; the
    orchestrator's graph (the whole workflow, its steps A2A requests) once per run."""
    built = []
    real_build_graph = LangGraphAdapter.build_graph

    def spy_build_graph(self, ctx, tools, plan=None, single=False, dispatch=None):
        built.append(plan.nodes[0].name if plan else "orchestrator" if dispatch else "whole")
        return real_build_graph(self, ctx, tools, plan, single=single, dispatch=dispatch)

    monkeypatch.setattr(LangGraphAdapter, "build_graph", spy_build_graph)
    with ScriptedChatServer(lambda payload: {"content": "CONTINUE"}) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=2)
        cfg["protocols"] = ["a2a"]
        (trace,) = run_stack(cfg, tmp_path, framework="langgraph")
    assert trace.status == "ok", trace.error_message
    visits = [(n.node, n.step) for n in trace.node_outputs]
    assert visits == [
        ("navigate", 1), ("observe", 1), ("interact", 1), ("observe", 2), ("interact", 2),
        ("report", 1),
    ]  # fmt: skip
    # one per node, and the orchestrator's
    assert sorted(built) == ["interact", "navigate", "observe", "orchestrator", "report"]
    assert trace.wall_setup_s > 0

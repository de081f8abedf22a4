"""LangGraph-specific behaviour of its adapter (the shared contract: tests/frameworks/test_workflow.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from mastif.frameworks.langgraph import LangGraphAdapter
from mastif.protocols.mcp import open_mcp_server
from mastif.tools import ToolResult, get_tools
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


# LangChain's MCP adapters against mastif's MCP server (in LangGraph's environment, which
# holds them)
TOOLS = get_tools(["sympy", "json_parser", "datetime"])
Call = tuple[str, str, str, Any, ToolResult]


def test_langchain_mcp_adapters_load_and_call_the_tools() -> None:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    calls: list[Call] = []

    async def main() -> tuple[list[Any], Any, int]:
        async with open_mcp_server(TOOLS, on_call=lambda *c: calls.append(c)) as server:
            client = MultiServerMCPClient(
                {
                    "m": {
                        "transport": "streamable_http",
                        "url": server.url_for("run-lc", "agent"),
                        # as the frameworks do: the server's factory (timing, the key)
                        "httpx_client_factory": server.http_client_factory,
                    }
                }
            )
            tools = await client.get_tools()
            parser = next(t for t in tools if t.name == "json_parser")
            output = await parser.ainvoke({"json_string": '{"a": [1, 2]}', "query": "a[1]"})
            return tools, output, server.calls_served("run-lc")

    tools, output, served = asyncio.run(main())
    assert [t.name for t in tools] == [t.name for t in TOOLS]
    for lc_tool, ours in zip(tools, TOOLS, strict=True):
        assert lc_tool.description == ours.description
        assert lc_tool.args_schema == ours.parameters
    assert [block["text"] for block in output] == ["2"]
    assert served == 1
    assert [(c[0], c[1], c[2], c[4].ok) for c in calls] == [
        ("run-lc", "agent", "json_parser", True)
    ]

"""Every tool call of a run's crews: the protocol's tools as CrewAI tools, the MCP server's
tools through CrewAI's own MCP client, and the executor that records the calls CrewAI refuses.

Each call takes its place in the trace in the model's order
(:class:`~mastif.frameworks.crewai.bridge.Turns`); a call to an in-process tool goes through
``ctx.call_tool`` on the run's event loop, a call over MCP is recorded by the MCP server.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from crewai.agents.agent_executor import AgentExecutor
from crewai.mcp.client import MCPClient
from crewai.mcp.tool_resolver import MCPToolResolver
from crewai.mcp.transports.http import HTTPTransport
from crewai.tools import BaseTool
from crewai.tools.mcp_native_tool import MCPNativeTool
from crewai.tools.tool_failure import ToolFailure, ToolFailureReason
from crewai.utilities.pydantic_schema_utils import create_model_from_schema
from pydantic import PrivateAttr

from mastif.frameworks.base import RunContext
from mastif.frameworks.crewai.bridge import CURRENT_TURN, Bridge, Turns
from mastif.frameworks.mcp_transport import streamable_http

# -- tools ----------------------------------------------------------------------------------


class GatewayTool(BaseTool):
    """A protocol tool as a CrewAI tool; every execution goes through ``ctx.call_tool``."""

    _bridge: Bridge | None = PrivateAttr(default=None)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        # BaseTool.run re-validates and re-dumps the arguments through the pydantic model;
        # the tool gets them as the model produced them and checks its JSON schema itself.
        limit = self._claim_usage()
        return limit if limit is not None else self._run(*args, **kwargs)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        bridge = self._bridge
        assert bridge is not None and bridge.visit is not None
        arguments: Any = kwargs if not args else (args[0] if len(args) == 1 else list(args))
        visit, turn = bridge.visit, CURRENT_TURN.get()
        if turn is None:  # not from the executor's tool calls (not expected)
            result = bridge.call_tool(visit.node.name, visit.step, self.name, arguments)
        else:
            turn.reached = True
            result = bridge.call_tool_in_turn(
                turn, visit.node.name, visit.step, self.name, arguments
            )
        if result.ok:
            return result.output
        # the error text as is, as CrewAI's MCP tools hand on an isError result
        return ToolFailure(message=result.error or "", reason=ToolFailureReason.TOOL_REPORTED)


def crewai_tools(ctx: RunContext, bridge: Bridge) -> list[GatewayTool]:
    """The protocol's tools as CrewAI tools (once per run; each call is made for the visit
    in progress)."""
    tools = []
    for spec in ctx.tools.tool_specs():
        schema = create_model_from_schema(spec.parameters, model_name=f"{spec.name}_arguments")
        tool = GatewayTool(name=spec.name, description=spec.description, args_schema=schema)
        tool._bridge = bridge
        tools.append(tool)
    return tools


# -- executor ----------------------------------------------------------------------------------


def raw_tool_call(tool_call: Any) -> tuple[str, Any]:
    """Name and arguments of a tool call as the model sent them (unparseable text verbatim)."""
    function = getattr(tool_call, "function", None)
    if function is not None:
        name, args = function.name, function.arguments
    elif isinstance(tool_call, dict):
        fn = tool_call.get("function") or {}
        name = fn.get("name") or tool_call.get("name") or "<unnamed>"
        args = fn.get("arguments", tool_call.get("arguments", ""))
    else:
        return "<unrecognised>", repr(tool_call)
    if isinstance(args, str):
        try:
            return name, json.loads(args)
        except json.JSONDecodeError:
            return name, args
    return name, args


class MastifAgentExecutor(AgentExecutor):
    """CrewAI's executor, recording the tool calls it refuses, in the model's order.

    CrewAI's own execution is unchanged: the calls of one reply run in its thread pool
    (more than one call, none ``result_as_answer`` or usage-limited) and their results go
    back to the model in the model's order. Each call takes its place in the trace in the
    model's order (:class:`~mastif.frameworks.crewai.bridge.Turns`).
    """

    _mastif_turns: Turns | None = PrivateAttr(default=None)

    @classmethod
    def flow_definition(cls) -> Any:
        # A Flow reads its steps from the class's own __dict__; this subclass adds none and
        # runs AgentExecutor's flow unchanged (with the two helpers below overridden).
        return AgentExecutor.flow_definition()

    def _should_parallelize_native_tool_calls(self, tool_calls: list[Any]) -> bool:
        # CrewAI's decision, unchanged; called with the reply's runnable calls in the
        # model's order just before it runs them: their places in the trace
        self._mastif_turns = Turns(tool_calls)
        return super()._should_parallelize_native_tool_calls(tool_calls)

    def _execute_single_native_tool_call(self, tool_call: Any) -> dict[str, Any]:
        bridge: Bridge | None = getattr(self.llm, "_bridge", None)
        visit = bridge.visit if bridge is not None else None
        turns = self._mastif_turns
        turn = turns.turn(tool_call) if turns is not None else None
        if bridge is None or visit is None or turn is None:
            return super()._execute_single_native_tool_call(tool_call)
        token = CURRENT_TURN.set(turn)
        try:
            bridge.check()
            outcome = super()._execute_single_native_tool_call(tool_call)
            if turn.reached or bridge.cancelled.is_set():
                return outcome  # recorded by ctx.call_tool, or by the MCP server
            # CrewAI answered this call itself and no tool ran: a failed call
            name, arguments = raw_tool_call(tool_call)
            reason = getattr(outcome.get("tool_failure"), "reason", None)
            said = str(outcome.get("result", ""))
            if reason == ToolFailureReason.UNKNOWN_TOOL:
                offered = sorted(bridge.ctx.tool_names())
                error = f"unknown tool {name!r}; offered: {offered} (CrewAI: {said})"
            elif reason == ToolFailureReason.INVALID_INPUT:
                error = f"arguments are not valid JSON: {said}"
            else:
                error = f"CrewAI did not run the tool: {said}"
            bridge.record_refused_in_turn(turn, visit.node.name, visit.step, name, arguments, error)
            return outcome
        finally:
            CURRENT_TURN.reset(token)
            turn.done()  # its place is taken (or it leaves none): the next call's turn


class McpTool(MCPNativeTool):
    """CrewAI's MCP tool, noting that a call reached it (the MCP server records the call)."""

    def _run(self, **kwargs: Any) -> Any:
        turn = CURRENT_TURN.get()
        if turn is not None:
            turn.reached = True
        return super()._run(**kwargs)


# -- MCP --------------------------------------------------------------------------------------


class SameTaskHTTPTransport(HTTPTransport):
    """CrewAI's streamable-HTTP MCP transport, entering the MCP SDK's client in the calling task.

    CrewAI 1.15 enters the MCP SDK's client through ``asyncio.wait_for``, which on
    Python 3.11 runs it in a task of its own; the anyio cancel scope inside is then exited
    from another task at disconnect, and every MCP tool call fails after its result came
    back ("Error during MCP client disconnect: no running event loop"). Python 3.12's
    ``wait_for`` no longer makes a task; here ``asyncio.timeout`` does the same on 3.11.
    The client is the SDK's current one (:func:`~mastif.frameworks.mcp_transport.streamable_http`).
    """

    #: the run's httpx client factory (RunContext.mcp_http): times the exchanges
    http_factory: Any = None

    async def connect(self) -> SameTaskHTTPTransport:
        if self._connected:
            return self
        extra = {"httpx_client_factory": self.http_factory} if self.http_factory else {}
        self._transport_context = streamable_http(
            self.url, headers=self.headers or None, terminate_on_close=True, **extra
        )
        try:
            async with asyncio.timeout(30):
                read, write, _ = await self._transport_context.__aenter__()
        except BaseException as exc:
            await self._close_transport_context(exc)
            raise
        self._set_streams(read=read, write=write)
        return self


def mcp_tools(url: str, http_factory: Any = None) -> list[BaseTool]:
    """The MCP server's tools through CrewAI's own MCP client (once per run, in its worker
    thread; ``Agent(mcps=...)`` would list them again for every task execution).

    What ``Agent(mcps=[MCPServerHTTP(url)])`` does, with two differences: the transport is
    :class:`SameTaskHTTPTransport`, and the tools keep the server's names (CrewAI would
    prefix them with the server URL -- here loopback address, port and run id), so the
    model is offered the same tool names under every framework and protocol. As in
    CrewAI: ``tools/list`` once, then ``MCPNativeTool`` s that open a fresh MCP client for
    every call; an ``isError`` result is a ``ToolFailure``.
    """

    def client() -> MCPClient:
        transport = SameTaskHTTPTransport(url=url)
        transport.http_factory = http_factory
        return MCPClient(transport=transport)

    async def discover() -> list[dict[str, Any]]:
        discovery = client()
        await discovery.connect()
        try:
            return await discovery.list_tools()
        finally:
            await discovery.disconnect()

    tools: list[BaseTool] = []
    for spec in asyncio.run(discover()):
        name = spec["name"]
        args_schema = MCPToolResolver._json_schema_to_pydantic(name, spec["inputSchema"])
        tool = McpTool(
            client_factory=client,
            tool_name=name,
            tool_schema={"description": spec.get("description", ""), "args_schema": args_schema},
            server_name="mastif",
            original_tool_name=name,
        )
        tool.name = name
        tools.append(tool)
    return tools

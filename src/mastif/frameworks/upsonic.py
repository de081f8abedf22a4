"""Upsonic: the workflow as an Upsonic ``StateGraph`` (graphv2); every node visit one agent task.

Orchestration. The linear workflow is an Upsonic graphv2 ``StateGraph`` (:func:`build_graph`,
once per run): one graph node per workflow node, unconditional edges through the nodes before
the loop, and from every loop node and the last node before it a conditional edge whose
condition reads the graph state's ``next`` -- the next loop node, the first loop node again
(the cycle: the next round), or the first node after the loop once ``max_steps`` rounds are
done or a ``stop_when`` match ends the loop at once. Upsonic's graph runner follows the edges;
mastif's ``drive_workflow`` is not used. Each graph node's work is ``visit_node`` (the prompt
rendered from the run's history, handed to a dispatch, its output recorded): in
:meth:`UpsonicAdapter.run` the dispatch is the node's ``Agent``; under ``a2a``
(:meth:`UpsonicAdapter.orchestrate`, the same graph) an A2A request to the node's agent, which
runs it with :meth:`UpsonicAdapter.run_node` on the run's agents (``ctx.built``).

A node visit is ``Agent.do_async(Task(prompt))``: Upsonic's own agent pipeline (its steps:
system prompt, model request, tool calls, model request, ... until text). What Upsonic does by
itself and keeps: its system prompt (built by its ``SystemPromptManager`` from the agent's
name and defaults; no role, goal or company fields are set), the node prompt as the user
turn, its tool definitions (the protocol's JSON schema as is, or the MCP server's; no
``strict``), its argument handling (a call missing a required argument is answered "Missing
required argument(s) ..." without running the tool; arguments that are not JSON fail in
``args_as_dict`` and are answered "Error executing tool: ..."; an unknown name is answered
"Error executing tool: Tool '...' not found ..."), concurrent execution of one reply's calls
(``asyncio.gather``; no tool is marked sequential), tool results as ``tool`` messages, and its
truncation rule (a reply cut at ``max_tokens`` with tool calls is answered with an error and
asked again, not run).

What the contract makes us change, through Upsonic's ``WrapperModel`` (its public base for a
model around a model; :class:`TurnPolicyModel`): the node's ``tool_choice`` on the visit's
first request and ``auto`` after (Upsonic's OpenAI model sends only ``auto``/``required``
itself, so the choice goes in the request body, ``extra_body``); no tools once
``max_tool_rounds`` replies with tool calls were answered, so that request ends the visit in
text; tool calls in a reply to a request without tools are dropped from the reply, so they
are not run; and the record: calls Upsonic answers without running a tool are recorded as
failed with its own text, in the model's order among the reply's other calls. Tool retries
are off (Upsonic's ``ToolConfig`` retries a failing tool 5 times with back-off by default, its
MCP tools twice): a second layer would hide calls; its per-tool 30 s time-out is off too (the
runner bounds the run).

Model: Upsonic's ``OpenAIChatModel`` with an ``OpenAIProvider`` around our ``AsyncOpenAI``
client at ``ctx.llm_base_url(node)`` (the gateway token as ``api_key``, ``max_retries=0``,
the job's shared async httpx client), one per node; temperature, max_tokens and seed as its
``ModelSettings``. Agents are built with ``retry=1`` (one attempt), ``print=False``, no
memory, storage, reflection, policies, culture or context management.

Tools: in-process, each a :class:`GatewayTool` (an Upsonic ``Tool`` with the protocol's JSON
schema) whose ``execute`` calls ``ctx.call_tool``; a failed call raises, and Upsonic's tool
manager answers the model with the error's text. Under ``mcp``: Upsonic's ``MCPHandler`` and ``MCPTool`` s on
an MCP SDK ``ClientSession`` over streamable HTTP at ``ctx.mcp_url`` (the handler's
``session=`` argument, its way to take a session it did not open: the run's HTTP client
factory, which times the exchanges and sends the MCP server's key, has no place in its
``StreamableHTTPClientParams``); one session per run, opened on the run's resources. Its
``initialize`` declares the MCP SDK's default ``clientInfo`` (``mcp``). The server records the
calls.

No telemetry: Upsonic's Sentry client is made only when a DSN is given (``UPSONIC_TELEMETRY``,
set to ``false`` here before Upsonic is imported); its OpenTelemetry spans go to
OpenTelemetry's API, a no-op without an SDK provider (none is installed or configured), and
its PromptLayer logging runs only with a PromptLayer key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, TypedDict

# before Upsonic is imported: it reads the variable when it sets its logging up
os.environ["UPSONIC_TELEMETRY"] = "false"

import openai  # noqa: E402
from mcp import ClientSession  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from upsonic import Agent, Task  # noqa: E402
from upsonic.graphv2 import END, START, StateGraph  # noqa: E402
from upsonic.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)
from upsonic.models import ModelRequestParameters  # noqa: E402
from upsonic.models.openai import OpenAIChatModel  # noqa: E402
from upsonic.models.settings import ModelSettings  # noqa: E402
from upsonic.models.wrapper import WrapperModel  # noqa: E402
from upsonic.providers.openai import OpenAIProvider  # noqa: E402
from upsonic.tools import Tool, ToolConfig, ToolMetadata  # noqa: E402
from upsonic.tools.mcp import MCPHandler, MCPTool  # noqa: E402
from upsonic.tools.schema import FunctionSchema  # noqa: E402

from mastif.frameworks.base import Dispatch, RunContext  # noqa: E402
from mastif.frameworks.mcp_transport import streamable_http  # noqa: E402
from mastif.frameworks.orchestration import visit_node  # noqa: E402
from mastif.frameworks.plan import PlannedNode  # noqa: E402
from mastif.tools import ToolResult  # noqa: E402

#: no retries and no per-call time-out of Upsonic's own around a tool (see the module)
TOOL_CONFIG = dict(max_retries=0, timeout=None, sequential=False)


# --------------------------------------------------------------------------- a node visit


def tool_rounds(messages: list[ModelMessage]) -> int:
    """Replies with tool calls so far in a visit (each one a tool round answered)."""
    return sum(
        1
        for m in messages
        if isinstance(m, ModelResponse) and any(isinstance(p, ToolCallPart) for p in m.parts)
    )


@dataclass
class Visit:
    """The node visit in progress and the record of its latest reply's calls."""

    node: PlannedNode
    step: int
    #: the tool calls of the latest reply that was offered tools, in the model's order
    reply: list[ToolCallPart] = field(default_factory=list)
    #: calls of that reply that reached a tool (by call id)
    started: set[str] = field(default_factory=set)
    #: refused calls' places in the run's record (call id -> ``RunRecorder.issue`` number)
    places: dict[str, int] = field(default_factory=dict)


@dataclass(init=False)
class TurnPolicyModel(WrapperModel):
    """mastif's turn policy around one node's Upsonic model (see the module)."""

    objects: RunObjects
    node: PlannedNode
    max_rounds: int

    def __init__(self, wrapped: Any, objects: RunObjects, node: PlannedNode, max_rounds: int):
        super().__init__(wrapped)
        self.objects, self.node, self.max_rounds = objects, node, max_rounds

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        visit = self.objects.visit_state
        if visit is not None:
            self.objects.record_refusals(visit, messages)
        rounds = tool_rounds(messages)
        params = model_request_parameters
        if rounds >= self.max_rounds and params.function_tools:
            params = dataclasses.replace(params, function_tools=[])  # that request ends in text
        settings = dict(model_settings or {})
        if params.function_tools:
            # the node's tool_choice on the visit's first request, auto after
            choice = self.node.spec.tool_choice if rounds == 0 else "auto"
            settings["extra_body"] = {**(settings.get("extra_body") or {}), "tool_choice": choice}
        response = await self.wrapped.request(messages, settings, params)  # type: ignore[arg-type]
        calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
        if calls and not params.function_tools:
            # tool calls in a reply to a request without tools are not run
            kept = [p for p in response.parts if not isinstance(p, ToolCallPart)]
            return dataclasses.replace(response, parts=kept)
        if calls and visit is not None:
            visit.reply, visit.started, visit.places = calls, set(), {}
        return response

    @property
    def model_name(self) -> str:
        return self.wrapped.model_name

    @property
    def system(self) -> str:
        return self.wrapped.system


class GatewayTool(Tool):
    """A protocol tool as an Upsonic ``Tool`` (its JSON schema as is) calling ``ctx.call_tool``."""

    def __init__(self, objects: RunObjects, spec: Any):
        schema = FunctionSchema(
            function=None,  # type: ignore[arg-type]
            description=spec.description,
            validator=None,  # type: ignore[arg-type]
            json_schema=spec.parameters,
            is_async=True,
        )
        metadata = ToolMetadata(
            name=spec.name, description=spec.description, kind="function", is_async=True
        )
        super().__init__(spec.name, spec.description, schema=schema, metadata=metadata)
        self.config = ToolConfig(**TOOL_CONFIG)
        self.objects = objects

    async def execute(self, **arguments: Any) -> Any:
        objects, ctx = self.objects, self.objects.ctx
        visit = objects.visit_state
        assert visit is not None
        objects.starts(visit, self.name, arguments)
        result = await ctx.call_tool(visit.node.name, visit.step, self.name, arguments)
        if not result.ok:  # Upsonic's way to show a tool's error: its tool manager sends its text
            raise RuntimeError(result.error or f"{self.name} failed")
        return result.output


class PlacedMCPTool(MCPTool):
    """Upsonic's MCP tool, marking its call as reaching a tool (the MCP server records it);
    no retries of its own (see the module)."""

    def __init__(self, objects: RunObjects, handler: MCPHandler, info: Any):
        super().__init__(handler, info)
        self.config = ToolConfig(**TOOL_CONFIG)
        self.objects = objects

    async def execute(self, **arguments: Any) -> Any:
        visit = self.objects.visit_state
        if visit is not None:
            self.objects.starts(visit, self.name, arguments)
        return await super().execute(**arguments)


def gateway_model(ctx: RunContext, node: str, stack: contextlib.AsyncExitStack) -> Any:
    """Upsonic's OpenAI chat model at the node's gateway URL, on our OpenAI client."""
    s = ctx.client_settings(node)
    client = AsyncOpenAI(
        base_url=s.base_url, api_key=s.api_key, http_client=s.http_async, **s.client_options()
    )
    if s.http_async is None:  # its own httpx client: closed with the run
        stack.push_async_callback(client.close)
    sampling = s.sampling()
    settings = ModelSettings(
        temperature=sampling["temperature"], max_tokens=sampling["max_tokens"],
        seed=sampling["seed"],
    )  # fmt: skip
    return OpenAIChatModel(
        s.model, provider=OpenAIProvider(openai_client=client), settings=settings
    )


@dataclass
class RunObjects:
    """What a run builds once: the tools (or the MCP handler) and one agent per node."""

    ctx: RunContext
    agents: dict[str, Agent] = field(default_factory=dict)
    mcp: MCPHandler | None = None
    #: the visit in progress (visits of a run are sequential)
    visit_state: Visit | None = None

    @classmethod
    async def open(cls, ctx: RunContext, stack: contextlib.AsyncExitStack) -> RunObjects:
        """Build the run's agents; what they hold open is closed with ``stack``."""
        objects = cls(ctx)
        nodes = ctx.plan.nodes
        specs = ctx.tools.tool_specs()
        tools: list[Any] = []
        if specs and any(n.spec.use_tools for n in nodes):
            if ctx.mcp_url is not None:
                tools = [await objects.open_mcp(stack)]
            else:
                tools = [GatewayTool(objects, s) for s in specs]
        max_rounds = ctx.generation.max_tool_rounds
        for node in nodes:
            use_tools = node.spec.use_tools and bool(specs)
            model = TurnPolicyModel(
                gateway_model(ctx, node.name, stack), objects, node,
                max_rounds if use_tools else 0,
            )  # fmt: skip
            objects.agents[node.name] = Agent(
                model, name=node.name, tools=tools if use_tools else None, retry=1,
                print=False, show_tool_calls=False,
            )  # fmt: skip
        return objects

    async def open_mcp(self, stack: contextlib.AsyncExitStack) -> MCPHandler:
        """Upsonic's MCP handler on one MCP session for the run, at ``ctx.mcp_url``."""
        ctx = self.ctx
        assert ctx.mcp_url is not None
        kwargs = {"httpx_client_factory": ctx.mcp_http} if ctx.mcp_http is not None else {}
        streams = await stack.enter_async_context(streamable_http(ctx.mcp_url, **kwargs))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        handler = MCPHandler(session=session, transport="streamable-http", url=ctx.mcp_url)
        await handler.connect()  # lists the server's tools on the run's session
        # the same tools, each telling the record when a call of the reply reaches it
        handler.tools = [PlacedMCPTool(self, handler, t.tool_info) for t in handler.tools]
        self.mcp = handler
        return handler

    def starts(self, visit: Visit, name: str, arguments: Any) -> None:
        """A call of the latest reply reaches a tool now: the reply's earlier calls that did
        not are refused ones, and take their places before it."""
        recorder = self.ctx.recorder
        for call in visit.reply:
            if call.tool_call_id in visit.started or call.tool_call_id in visit.places:
                continue
            if call.tool_name == name:
                visit.started.add(call.tool_call_id)
                return
            visit.places[call.tool_call_id] = recorder.issue()

    def record_refusals(self, visit: Visit, messages: list[ModelMessage]) -> None:
        """Record the latest reply's calls Upsonic answered without running a tool, with its
        own text, each at its place in the model's order."""
        if not visit.reply or not messages or not isinstance(messages[-1], ModelRequest):
            return
        said = {
            p.tool_call_id: str(p.content)
            for p in messages[-1].parts
            if isinstance(p, ToolReturnPart)
        }
        ctx = self.ctx
        offered = sorted(ctx.tool_names())
        for call in visit.reply:
            text = said.get(call.tool_call_id)
            if call.tool_call_id in visit.started or text is None:
                continue
            error = (
                f"unknown tool {call.tool_name!r}; offered: {offered} (Upsonic: {text})"
                if call.tool_name not in offered
                else f"refused by Upsonic: {text}"
            )
            place = visit.places.get(call.tool_call_id) or ctx.recorder.issue()
            arguments: Any = call.args if call.args is not None else {}
            result = ToolResult(False, "", error[:2000])
            ctx.recorder.tool_call(visit.node.name, visit.step, call.tool_name, arguments,
                                   result, place)  # fmt: skip
        visit.reply = []

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: one task of its agent (Upsonic's agent pipeline)."""
        self.ctx.at(node.name, step)
        self.visit_state = Visit(node, step)
        try:
            output = await self.agents[node.name].do_async(Task(prompt))
        except Exception as exc:
            # the OpenAI client's error as it was (Upsonic wraps it in its ModelHTTPError and
            # its retry handler's error), so the run's error is classified like others'
            cause = provider_error(exc)
            if cause is not None and cause is not exc:
                raise cause from exc
            raise
        finally:
            self.visit_state = None
        return "" if output is None else str(output)


def provider_error(exc: BaseException) -> openai.OpenAIError | None:
    """The OpenAI client's error behind ``exc`` (its cause or context chain), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, openai.OpenAIError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


# --------------------------------------------------------------------------- the workflow graph


class WorkflowState(TypedDict, total=False):
    """The graph's state: the loop round, the latest output and where to go next."""

    round: int
    answer: str
    next: str


def build_graph(ctx: RunContext, dispatch: Dispatch) -> Any:
    """The linear workflow as an Upsonic ``StateGraph`` whose node visits go to ``dispatch``
    (the node agents in :meth:`UpsonicAdapter.run`; under ``a2a`` A2A requests)."""
    plan = ctx.plan
    loop = plan.loop if plan.max_steps >= 1 else ()
    line = [*plan.before, *loop, *plan.after]
    graph = StateGraph(WorkflowState)
    after_loop = plan.after[0].name if plan.after else END

    def visit_of(node: PlannedNode, in_loop: bool) -> Any:
        async def work(state: WorkflowState) -> dict[str, Any]:
            step = state.get("round", 1) if in_loop else 1
            text = await visit_node(ctx, dispatch, node, step)
            if not in_loop:
                return {"answer": text}
            index = loop.index(node)
            if node.stops_loop(text):
                return {"answer": text, "next": after_loop}  # a stop_when match: out at once
            if index + 1 < len(loop):
                return {"answer": text, "next": loop[index + 1].name}
            if step < plan.max_steps:  # the cycle: the next round
                return {"answer": text, "next": loop[0].name, "round": step + 1}
            return {"answer": text, "next": after_loop}

        return work

    for node in line:
        graph.add_node(node.name, visit_of(node, node in loop))
    graph.add_edge(START, line[0].name)
    for i, node in enumerate(line):
        if node in loop:
            targets = sorted({n.name for n in loop} | {after_loop})
            graph.add_conditional_edges(node.name, lambda s: s["next"], targets)
        elif i + 1 < len(line):
            graph.add_edge(node.name, line[i + 1].name)
        else:
            graph.add_edge(node.name, END)
    return graph.compile()


# --------------------------------------------------------------------------- the adapter


class UpsonicAdapter:
    name = "upsonic"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("upsonic", "openai")
    mcp_packages = ("mcp",)
    #: no private member of Upsonic is overridden or called
    private_members = ()

    async def run(self, ctx: RunContext) -> str:
        """The workflow graph, each node visit a task of the node's agent."""
        async with contextlib.AsyncExitStack() as stack:
            with ctx.setting_up():
                objects = await RunObjects.open(ctx, stack)
            return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow graph, each node visit handed to ``dispatch`` (in :meth:`run` the
        node's agent; under ``a2a`` an A2A request to the node's agent)."""
        with ctx.setting_up():
            graph = build_graph(ctx, dispatch)
        plan = ctx.plan
        visits = len(plan.before) + len(plan.loop) * plan.max_steps + len(plan.after)
        final = await graph.ainvoke(
            {"round": 1, "answer": ""}, config={"recursion_limit": visits + 5}
        )
        return final.get("answer", "")

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's
        agents: built on the run's first visit, kept in ``ctx.built``, what they hold open
        closed with ``ctx.resources``."""
        objects = ctx.built.get(self.name)
        if objects is None:
            with ctx.setting_up():
                objects = await RunObjects.open(ctx, ctx.resources)
            ctx.built[self.name] = objects
        assert isinstance(objects, RunObjects)
        return await objects.visit(node, step, prompt)

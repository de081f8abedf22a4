"""Pydantic AI: the workflow as a pydantic-graph ``Graph``; every node visit one ``Agent.run``.

Orchestration. The linear workflow is a pydantic-graph ``Graph`` (built with pydantic-graph's
``GraphBuilder`` from ``BaseNode`` subclasses, the node style Pydantic AI's own agent graph
uses; :func:`build_graph`, once per run): ``WorkflowStart`` → ``BeforeLoop`` (the nodes before
the loop, in a line) → ``LoopVisit`` (the loop nodes; the last one returns ``LoopVisit`` for
the first node of the next round, a cycle, or leaves after ``max_steps`` rounds, and a
``stop_when`` match leaves at once) → ``AfterLoop`` (the nodes after the loop) → ``End`` with
the last node output. pydantic-graph's runner follows the nodes' return values; mastif's
``drive_workflow`` is not used. Each graph node's visit is ``visit_node`` (the prompt rendered
from the run's history, handed to a dispatch, its output recorded): in :meth:`PydanticAIAdapter.
run` the dispatch is the node's ``Agent``, under ``a2a`` (:meth:`PydanticAIAdapter.orchestrate`,
the same graph) an A2A request to the node's agent, which runs it with
:meth:`PydanticAIAdapter.run_node` on the run's agents (built once per run, ``ctx.built``).

A node visit is ``Agent.run(prompt)``: Pydantic AI's own agent loop (its agent graph: model
request, tool calls, model request, ... until text). What Pydantic AI does by itself and keeps:
no system prompt (none is configured; the node prompt is the user turn), its tool definitions
(``Tool.from_schema`` with the protocol's JSON schema as is, or the MCP server's; no
``strict``), its argument handling (the arguments are parsed as JSON and, the schema being the
tools' own, passed on unvalidated; text that is not JSON is refused: "Invalid JSON: ..."),
concurrent execution of one reply's calls (its default ``parallel`` mode), tool results as
``tool`` messages, its retries (a refused call, an unknown tool or a failed tool is
answered with the call's ``tool`` message, ``{"error": ...}``, marked retried); its default retry
budget of 1 per tool applies, and a run that exceeds it fails with its
``UnexpectedModelBehavior``), and its request for text after an empty answer ("Please return
text.").

What the contract makes us change, with one Pydantic AI *capability* per node agent
(:class:`TurnPolicy`, its public extension point): the node's ``tool_choice`` on the visit's
first request and ``auto`` after (per-step model settings); no tools once ``max_tool_rounds``
replies with tool calls were answered (``prepare_tools``), so that request ends the visit in
text; tool calls in a reply to a request without tools are dropped from the reply
(``after_model_request``): they are not run; and the record: calls Pydantic AI refuses before
any tool runs (unknown name, arguments that are not JSON) are recorded as failed with its own
retry text, in the model's order among the reply's other calls (``RunRecorder.issue``).

Model: ``OpenAIChatModel`` with an ``OpenAIProvider`` around our ``AsyncOpenAI`` client at
``ctx.llm_base_url(node)`` (the gateway token as ``api_key``, the client timeout,
``max_retries=0``, the job's shared async httpx client), one per workflow node; temperature,
max_tokens and seed as the model's ``ModelSettings``. An OpenAI error surfaces as itself
(Pydantic AI wraps it in ``ModelHTTPError``/``ModelAPIError``; the visit re-raises the cause).

Tools: in-process, each a ``Tool.from_schema`` whose function calls ``ctx.call_tool`` (a
failed call raises Pydantic AI's ``ModelRetry`` with the tool's error, as its MCP toolset does
for an ``isError`` result). Under ``mcp``: Pydantic AI's own ``MCPToolset`` (built on
FastMCP's ``Client`` and ``StreamableHttpTransport``) at ``ctx.mcp_url``, given
``http_client=ctx.mcp_http()`` (its sanctioned way to supply the httpx client: the run's timed
client that sends the MCP server's key); it is entered once per run, so the run has one MCP
session, which every visit's agent re-enters. Its ``initialize`` declares the MCP SDK's default
``clientInfo`` (``mcp`` 0.1.0: FastMCP passes no identity of its own). The server records the
calls.

Threads and async: Pydantic AI and pydantic-graph are asyncio-native; nothing runs in a thread.
A cancelled run (timeout) cancels the graph's task, the agent run and its HTTP request.

No telemetry: every agent is built with ``instrument = False`` (Pydantic AI's OpenTelemetry /
logfire instrumentation, whatever ``Agent.instrument_all`` says), the workflow graph with
``auto_instrument=False`` (no pydantic-graph spans); logfire itself is not installed (only
``logfire-api``, whose calls are no-ops), FastMCP's client spans go to OpenTelemetry's API,
a no-op without an SDK provider, and genai-prices' price updater is never started.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncOpenAI
from pydantic_ai import Agent, ModelRetry, Tool
from pydantic_ai import RunContext as AgentRunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelAPIError, UnexpectedModelBehavior
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_graph import BaseNode, End, Graph, GraphBuilder, GraphRunContext

from mastif.core.trace import NodeOutput
from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode, WorkflowPlan
from mastif.tools import ToolResult

# --------------------------------------------------------------------------- a node visit


def tool_rounds(messages: list[ModelMessage]) -> int:
    """Replies with tool calls so far in a visit (each one a tool round answered)."""
    return sum(
        1
        for m in messages
        if isinstance(m, ModelResponse) and any(isinstance(p, ToolCallPart) for p in m.parts)
    )


@dataclass
class TurnPolicy(AbstractCapability[Any]):
    """mastif's turn policy for one node's agent, as a Pydantic AI capability; a fresh copy
    per visit (:meth:`for_run`) keeps the visit's record of refused calls."""

    objects: RunObjects
    node: PlannedNode
    offers_tools: bool
    max_rounds: int
    step: int = 0
    #: the tool calls of the visit's latest reply that was offered tools, in the model's order
    reply: list[ToolCallPart] = field(default_factory=list)
    #: calls of that reply that reached a tool (by call id)
    started: set[str] = field(default_factory=set)
    #: refused calls' places in the run's record (call id -> ``RunRecorder.issue`` number)
    places: dict[str, int] = field(default_factory=dict)

    async def for_run(self, ctx: AgentRunContext[Any]) -> TurnPolicy:
        fresh = TurnPolicy(self.objects, self.node, self.offers_tools, self.max_rounds,
                           step=self.objects.ctx.step)  # fmt: skip
        self.objects.policy = fresh
        return fresh

    def get_model_settings(self) -> Any:
        def settings(ctx: AgentRunContext[Any]) -> ModelSettings:
            # the node's tool_choice on the visit's first request, auto after
            rounds = tool_rounds(ctx.messages)
            first = self.offers_tools and rounds == 0 and rounds < self.max_rounds
            return ModelSettings(tool_choice=self.node.spec.tool_choice if first else "auto")

        return settings

    async def prepare_tools(
        self, ctx: AgentRunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        """No tools once ``max_tool_rounds`` rounds were made: that request ends in text."""
        return tool_defs if tool_rounds(ctx.messages) < self.max_rounds else []

    async def before_model_request(
        self, ctx: AgentRunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self.record_refusals(request_context.messages)
        return request_context

    async def after_model_request(
        self,
        ctx: AgentRunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
        if not calls:
            return response
        if not request_context.model_request_parameters.function_tools:
            # tool calls in a reply to a request without tools are not run
            kept = [p for p in response.parts if not isinstance(p, ToolCallPart)]
            return dataclasses.replace(response, parts=kept)
        self.reply, self.started, self.places = calls, set(), {}
        return response

    async def before_tool_execute(
        self, ctx: AgentRunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        if self.objects.mcp is not None:  # in-process tools place themselves (GatewayTool)
            self.starts(call.tool_call_id)
        return args

    async def after_run(self, ctx: AgentRunContext[Any], *, result: Any) -> Any:
        self.record_refusals(ctx.messages)
        return result

    async def on_run_error(self, ctx: AgentRunContext[Any], *, error: BaseException) -> Any:
        """A call that exhausted Pydantic AI's retry budget ends the run (its
        ``UnexpectedModelBehavior``): recorded as refused, with that error."""
        found = re.match(r"Tool '(.+?)' exceeded max retries", str(error))
        if isinstance(error, UnexpectedModelBehavior) and found:
            for call in self.reply:
                if call.tool_name == found.group(1) and call.tool_call_id not in self.started:
                    self.record(call, str(error))
                    break
        raise error

    def starts(self, call_id: str) -> None:
        """The call ``call_id`` of the reply reaches a tool now: the reply's earlier calls
        that did not are refused ones, and take their places before it."""
        recorder = self.objects.ctx.recorder
        for call in self.reply:
            if call.tool_call_id == call_id:
                break
            if call.tool_call_id not in self.started and call.tool_call_id not in self.places:
                self.places[call.tool_call_id] = recorder.issue()
        self.started.add(call_id)

    def record_refusals(self, messages: list[ModelMessage]) -> None:
        """Record the latest reply's calls Pydantic AI answered without running a tool, with
        its retry text (its refusal), each at its place in the model's order."""
        if not self.reply or not messages or not isinstance(messages[-1], ModelRequest):
            return
        # in the release locked here (2.78) a refusal is the call's own return part marked "retried" (RetryPromptPart
        # is deprecated), in the text the model reads
        said = {
            p.tool_call_id: p.model_response_str()
            for p in messages[-1].parts
            if isinstance(p, ToolReturnPart) and p.outcome == "retried"
        }
        for call in self.reply:
            text = said.get(call.tool_call_id)
            if call.tool_call_id in self.started or text is None:
                continue
            self.record(call, text)
        self.reply = []

    def record(self, call: ToolCallPart, said: str) -> None:
        """Record ``call`` as refused by Pydantic AI (it ``said`` so), at its place."""
        ctx = self.objects.ctx
        offered = sorted(ctx.tool_names())
        error = (
            f"unknown tool {call.tool_name!r}; offered: {offered} (Pydantic AI: {said})"
            if call.tool_name not in offered
            else f"arguments refused by Pydantic AI: {said}"
        )
        place = self.places.get(call.tool_call_id) or ctx.recorder.issue()
        arguments = call.args if call.args is not None else {}
        result = ToolResult(False, "", error)
        ctx.recorder.tool_call(self.node.name, self.step, call.tool_name, arguments, result, place)


def gateway_model(ctx: RunContext, node: str, stack: contextlib.AsyncExitStack) -> Any:
    """Pydantic AI's OpenAI chat model at the node's gateway URL, on our OpenAI client."""
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


def gateway_tool(objects: RunObjects, spec: Any) -> Tool[Any]:
    """A protocol tool as a Pydantic AI tool (its JSON schema as is) calling ``ctx.call_tool``."""
    ctx = objects.ctx

    async def call(run: AgentRunContext[Any], **arguments: Any) -> str:
        policy = objects.policy
        if policy is not None and run.tool_call_id is not None:
            policy.starts(run.tool_call_id)  # its place in the record: at once, as it starts
        result = await ctx.call_tool(ctx.node, ctx.step, spec.name, arguments)
        if not result.ok:  # Pydantic AI's way to show a tool's error to the model
            raise ModelRetry(result.error or f"{spec.name} failed")
        return result.output

    return Tool.from_schema(
        call, name=spec.name, description=spec.description, json_schema=spec.parameters,
        takes_ctx=True,
    )  # fmt: skip


@dataclass
class RunObjects:
    """What a run builds once: the tools (or the MCP toolset) and one agent per node."""

    ctx: RunContext
    agents: dict[str, Agent[None, str]] = field(default_factory=dict)
    mcp: MCPToolset[Any] | None = None
    #: the turn policy of the visit in progress (visits of a run are sequential)
    policy: TurnPolicy | None = None

    @classmethod
    async def open(cls, ctx: RunContext, stack: contextlib.AsyncExitStack) -> RunObjects:
        """Build the run's agents; what they hold open is closed with ``stack``."""
        objects = cls(ctx)
        nodes = ctx.plan.nodes
        specs = ctx.tools.tool_specs()
        tools: list[Tool[Any]] = []
        if specs and any(n.spec.use_tools for n in nodes):
            if ctx.mcp_url is not None:
                http = ctx.mcp_http() if ctx.mcp_http is not None else None
                objects.mcp = MCPToolset(ctx.mcp_url, http_client=http)
                # one MCP session for the run, which each visit's agent run re-enters
                await stack.enter_async_context(objects.mcp)
            else:
                tools = [gateway_tool(objects, s) for s in specs]
        max_rounds = ctx.generation.max_tool_rounds
        for node in nodes:
            use_tools = node.spec.use_tools and bool(specs)
            policy = TurnPolicy(objects, node, use_tools, max_rounds if use_tools else 0)
            agent: Agent[None, str] = Agent(
                gateway_model(ctx, node.name, stack),
                output_type=str,
                name=node.name,
                tools=tools if use_tools else (),
                toolsets=[objects.mcp] if use_tools and objects.mcp is not None else None,
                capabilities=[policy],
            )
            agent.instrument = False  # no OpenTelemetry/logfire, whatever instrument_all says
            objects.agents[node.name] = agent
        return objects

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: one run of its agent (Pydantic AI's agent loop)."""
        self.ctx.at(node.name, step)
        try:
            result = await self.agents[node.name].run(prompt)
        except ModelAPIError as exc:
            # the OpenAI client's error as it was, so the run's error is classified like others'
            if isinstance(exc.__cause__, openai.OpenAIError):
                raise exc.__cause__ from exc
            raise
        finally:
            self.policy = None
        return result.output


# --------------------------------------------------------------------------- the workflow graph


@dataclass
class WorkflowState:
    """The graph's state: the node outputs of this workflow run."""

    outputs: list[NodeOutput] = field(default_factory=list)


@dataclass
class WorkflowDeps:
    """The graph's dependencies: the run and who makes the node visits."""

    ctx: RunContext
    dispatch: Dispatch

    @property
    def plan(self) -> WorkflowPlan:
        return self.ctx.plan

    async def visit(self, state: WorkflowState, node: PlannedNode, step: int) -> str:
        # the prompt from the run's history, the visit, its output recorded
        text = await visit_node(self.ctx, self.dispatch, node, step)
        state.outputs.append(self.ctx.recorder.node_outputs[-1])
        return text


Ctx = GraphRunContext[WorkflowState, WorkflowDeps]


def enter_loop(ctx: Ctx) -> LoopVisit | AfterLoop | End[str]:
    plan = ctx.deps.plan
    if plan.loop and plan.max_steps >= 1:
        return LoopVisit(index=0, round=1)
    return enter_after(ctx)


def enter_after(ctx: Ctx) -> AfterLoop | End[str]:
    return AfterLoop(index=0) if ctx.deps.plan.after else finish(ctx)


def finish(ctx: Ctx) -> End[str]:
    outputs = ctx.state.outputs
    return End(outputs[-1].text if outputs else "")


@dataclass
class WorkflowStart(BaseNode[WorkflowState, WorkflowDeps, str]):
    """The graph's entry: on to the first node of the workflow."""

    async def run(self, ctx: Ctx) -> BeforeLoop | LoopVisit | AfterLoop | End[str]:
        return BeforeLoop(index=0) if ctx.deps.plan.before else enter_loop(ctx)


@dataclass
class BeforeLoop(BaseNode[WorkflowState, WorkflowDeps, str]):
    """Visit the ``index``-th node before the loop."""

    index: int

    async def run(self, ctx: Ctx) -> BeforeLoop | LoopVisit | AfterLoop | End[str]:
        before = ctx.deps.plan.before
        await ctx.deps.visit(ctx.state, before[self.index], 1)
        if self.index + 1 < len(before):
            return BeforeLoop(index=self.index + 1)
        return enter_loop(ctx)


@dataclass
class LoopVisit(BaseNode[WorkflowState, WorkflowDeps, str]):
    """Visit the ``index``-th loop node in round ``round``."""

    index: int
    round: int

    async def run(self, ctx: Ctx) -> LoopVisit | AfterLoop | End[str]:
        plan = ctx.deps.plan
        node = plan.loop[self.index]
        if node.stops_loop(await ctx.deps.visit(ctx.state, node, self.round)):
            return enter_after(ctx)  # a stop_when match ends the loop at once
        if self.index + 1 < len(plan.loop):
            return LoopVisit(index=self.index + 1, round=self.round)
        if self.round < plan.max_steps:
            return LoopVisit(index=0, round=self.round + 1)  # the cycle: the next round
        return enter_after(ctx)


@dataclass
class AfterLoop(BaseNode[WorkflowState, WorkflowDeps, str]):
    """Visit the ``index``-th node after the loop."""

    index: int

    async def run(self, ctx: Ctx) -> AfterLoop | End[str]:
        after = ctx.deps.plan.after
        await ctx.deps.visit(ctx.state, after[self.index], 1)
        if self.index + 1 < len(after):
            return AfterLoop(index=self.index + 1)
        return finish(ctx)


@dataclass
class WorkflowGraph:
    """The run's workflow graph and what its nodes run with."""

    graph: Graph[WorkflowState, WorkflowDeps, WorkflowStart, str]
    deps: WorkflowDeps

    async def run(self) -> str:
        return await self.graph.run(state=WorkflowState(), deps=self.deps, inputs=WorkflowStart())


def build_graph(ctx: RunContext, dispatch: Dispatch) -> WorkflowGraph:
    """The linear workflow as a pydantic-graph ``Graph`` whose node visits go to ``dispatch``
    (the node agents in :meth:`PydanticAIAdapter.run`; under ``a2a`` A2A requests)."""
    g: GraphBuilder[WorkflowState, WorkflowDeps, WorkflowStart, str] = GraphBuilder(
        name="mastif_workflow",
        state_type=WorkflowState,
        deps_type=WorkflowDeps,
        input_type=WorkflowStart,
        output_type=str,
        auto_instrument=False,  # no pydantic-graph spans
    )
    g.add(
        g.edge_from(g.start_node).to(WorkflowStart),
        g.node(WorkflowStart),
        g.node(BeforeLoop),
        g.node(LoopVisit),
        g.node(AfterLoop),
    )
    return WorkflowGraph(g.build(), WorkflowDeps(ctx, dispatch))


# --------------------------------------------------------------------------- the adapter


class PydanticAIAdapter:
    name = "pydantic_ai"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("pydantic-ai-slim", "pydantic-graph", "openai")
    mcp_packages = ("fastmcp-slim", "mcp")
    #: no private member of Pydantic AI or pydantic-graph is overridden or called
    private_members = ()

    async def run(self, ctx: RunContext) -> str:
        """The workflow graph, each node visit a run of the node's agent."""
        async with contextlib.AsyncExitStack() as stack:
            with ctx.setting_up():
                objects = await RunObjects.open(ctx, stack)
            return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow graph, each node visit handed to ``dispatch`` (in :meth:`run` the
        node's agent; under ``a2a`` an A2A request to the node's agent)."""
        with ctx.setting_up():
            workflow = build_graph(ctx, dispatch)
        return await workflow.run()

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

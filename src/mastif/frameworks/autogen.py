"""Microsoft AutoGen (AgentChat 0.7): the workflow as a ``GraphFlow`` team built with
``DiGraphBuilder``, each node visit an ``AssistantAgent`` with its own tool-call loop.

Orchestration. :func:`build_graph` builds one AgentChat ``GraphFlow`` per run: a participant
per workflow node (:class:`NodeAgent`, a custom AgentChat agent, ``BaseChatAgent``) and a
:class:`Finish` participant that ends the graph (a ``DiGraph`` needs a leaf node, which a
workflow ending in its loop does not have). The edges carry the rules: the nodes before the
loop in a line, then the loop nodes in a cycle -- the last loop node has a conditional edge
back to the first ("no ``stop_when`` match and fewer than ``max_steps`` rounds") and every
loop node a conditional exit edge to the nodes after the loop (the opposite) -- then the
nodes after the loop and ``Finish``. The conditions are callables on the message a node
produced, whose ``metadata`` carries its round and whether it stopped the loop. Every edge
activates its target on ``any`` parent (the loop's first node has two parents, navigate and
the loop's last node). GraphFlow's manager (in AutoGen's embedded ``SingleThreadedAgentRuntime``)
picks the speakers and runs them; mastif's ``drive_workflow`` is not used. Its ``max_turns``
is the plan's number of visits plus a margin (a cyclic graph needs one; it never cuts a run).
Under ``a2a`` the orchestrator agent runs the same graph (:meth:`AutoGenAdapter.orchestrate`),
each node's visit being one A2A request to the node's agent; the node agents serve their
visits with :meth:`AutoGenAdapter.run_node`.

Why a custom participant around an ``AssistantAgent``, not the ``AssistantAgent`` itself: a
GraphFlow participant receives the team's shared thread and answers from its own growing
model context, while every framework here starts each node visit as a fresh conversation
whose one user turn is the node prompt rendered by mastif (the history in it). The
``NodeAgent`` renders that prompt and hands it to the node's ``AssistantAgent`` (reset
first), or under ``a2a`` to the node's A2A agent. A selector team would not do: its model
picks the next speaker (extra calls, not the fixed order).

A node visit is ``AssistantAgent.on_messages`` (one agent per workflow node, AutoGen's own
default system message kept) on an ``OpenAIChatCompletionClient``: model call, the reply's
calls run concurrently (``asyncio.gather`` in ``_process_model_result``), results written back
as ``tool`` messages, next model call, for at most ``max_tool_iterations`` rounds; then, with
``reflect_on_tool_use=True``, AutoGen's reflection request (``tool_choice="none"``, so no tools
are sent) ends the visit in text. The turn policy of the contract:

- ``max_tool_iterations = max_tool_rounds`` and ``reflect_on_tool_use=True`` (AutoGen's
  default without an output type is False: the visit would end with the tool results'
  summary instead of a model answer); a node without tools, or ``max_tool_rounds`` 0, has
  no tools;
- AutoGen's agent always asks with ``tool_choice="auto"``: the model client
  (:class:`GatewayChatCompletionClient`) sends the node's ``tool_choice`` on a visit's first
  request with tools;
- tool calls in a reply to a request without tools (AutoGen would run them, or fail its
  reflection with "Reflect on tool use produced no valid text response") are not run: the
  client turns such a reply into text (its content, or "").

Tools: in-process, :class:`RunWorkbench` -- an AutoGen ``Workbench`` (its public tool-provider
API, what ``McpWorkbench`` is too) listing the protocol's tools with their JSON schemas as
given and calling them through ``ctx.call_tool``. Under ``mcp`` AutoGen's own ``McpWorkbench``
(``StreamableHttpServerParams(url=ctx.mcp_url)``), started once per run; its MCP session
declares the SDK's default ``clientInfo`` (``mcp``). AutoGen opens the streams with the MCP
SDK 1's deprecated ``streamablehttp_client(url, headers, timeouts, terminate_on_close)``,
which has no place for an httpx client factory: that one function of its session module is
replaced (:func:`_streams`) by the SDK's current client on the run's ``ctx.mcp_http`` factory
(timed exchanges, the server's key), with the same URL, headers and ``terminate_on_close``
(:mod:`mastif.frameworks.mcp_transport`); the session, tool listing and calls are AutoGen's.

Recording: a call reaches ``ctx.call_tool`` (in-process) or the MCP server (which records it)
through the workbench. The model client sees each reply's calls as it comes and gives each
its place in the run's record then, so the record keeps the model's order although AutoGen
runs them concurrently. The calls AutoGen answers itself before any tool runs -- arguments
that are not JSON ("Error: <JSONDecodeError>"), a name no workbench lists ("Error: tool 'x' not
found in any workbench") -- are recorded as failed, with the model's name and arguments and
AutoGen's own text, read from the tool results AutoGen wrote back (the next request's
messages, or the agent's ``model_context`` at the end of the visit).

Errors: an exception in a participant reaches the caller of ``GraphFlow.run`` as a
``RuntimeError`` holding only its text; the adapter keeps the exception and raises it
instead, so provider errors and timeouts are classified as for every framework. A
cancelled run (timeout) cancels the run's ``CancellationToken`` -- AutoGen links the model
request's future to it -- and the team; no further call is made.

Telemetry: AutoGen sends none of its own; its OpenTelemetry spans go to the process's tracer
provider (no OpenTelemetry SDK is installed in the environment, so nothing can export them),
and the runtime's tracing is switched off with AutoGen's own ``AUTOGEN_DISABLE_RUNTIME_TRACING``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

# before autogen_core builds a runtime: the runtime's OpenTelemetry tracing off
os.environ["AUTOGEN_DISABLE_RUNTIME_TRACING"] = "true"

from autogen_agentchat.agents import AssistantAgent, BaseChatAgent  # noqa: E402
from autogen_agentchat.base import Response  # noqa: E402
from autogen_agentchat.messages import BaseChatMessage, TextMessage  # noqa: E402
from autogen_agentchat.teams import DiGraphBuilder, GraphFlow  # noqa: E402
from autogen_core import CancellationToken, FunctionCall  # noqa: E402
from autogen_core.models import (  # noqa: E402
    CreateResult,
    FunctionExecutionResultMessage,
    ModelFamily,
    ModelInfo,
)
from autogen_core.tools import TextResultContent, ToolResult, ToolSchema, Workbench  # noqa: E402
from autogen_ext.models.openai import OpenAIChatCompletionClient  # noqa: E402
from autogen_ext.tools.mcp import McpWorkbench, StreamableHttpServerParams  # noqa: E402
from autogen_ext.tools.mcp import _session as mcp_session  # noqa: E402

from mastif.frameworks.base import Dispatch, RunContext  # noqa: E402
from mastif.frameworks.mcp_transport import streamable_http  # noqa: E402
from mastif.frameworks.orchestration import visit_node  # noqa: E402
from mastif.frameworks.plan import PlannedNode, WorkflowPlan  # noqa: E402
from mastif.tools import ToolResult as MastifToolResult  # noqa: E402

#: the name of the participant that ends the graph (no workflow node may have it)
FINISH = "mastif_finish"

#: what the model is to AutoGen: a name it does not know needs its capabilities spelled out
MODEL_INFO = ModelInfo(
    vision=False, function_calling=True, json_output=False, family=ModelFamily.UNKNOWN,
    structured_output=False,
)  # fmt: skip


# --------------------------------------------------------------------------- MCP streams

#: the run's ``ctx.mcp_http`` while its McpWorkbench starts (the session actor's task,
#: created in ``start()``, keeps a copy of this context)
MCP_HTTP: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "mastif_autogen_mcp_http", default=None
)

if not hasattr(mcp_session, "streamablehttp_client"):  # pragma: no cover - a changed AutoGen
    raise ImportError("autogen_ext.tools.mcp._session no longer opens streamablehttp_client")


def _streams(
    url: str,
    headers: dict[str, Any] | None = None,
    timeout: Any = None,
    sse_read_timeout: Any = None,
    terminate_on_close: bool = True,
    **_: Any,
) -> Any:
    """What AutoGen's MCP session opens in place of the SDK's deprecated
    ``streamablehttp_client``: the SDK's current client with the same URL, headers and
    ``terminate_on_close``, its httpx client from the run's factory (30 s, 300 s to read:
    ``StreamableHttpServerParams``' defaults, which the adapter keeps)."""
    factory = MCP_HTTP.get()
    extra = {"httpx_client_factory": factory} if factory is not None else {}
    return streamable_http(url, headers=headers, terminate_on_close=terminate_on_close, **extra)


mcp_session.streamablehttp_client = _streams  # type: ignore[assignment]


# --------------------------------------------------------------------------- a node visit


@dataclass
class Visit:
    """The node visit in progress on a run's objects (visits of a run are sequential)."""

    node: PlannedNode
    step: int
    #: model requests with tools made so far in this visit
    tool_turns: int = 0
    #: the calls of the last reply with tools: (call id, name, arguments as the model wrote
    #: them), each with the place in the run's record it took when the reply came
    pending: list[tuple[str, str, str]] = field(default_factory=list)
    issued: dict[str, int] = field(default_factory=dict)
    #: calls that reached a tool (in-process) or the MCP server
    reached: set[str] = field(default_factory=set)

    def take_reply(self, ctx: RunContext, calls: Sequence[FunctionCall]) -> None:
        """The calls of a reply AutoGen will run: each takes its place in the record now, in
        the model's order (AutoGen runs them concurrently)."""
        self.pending = [(c.id, c.name, c.arguments) for c in calls]
        self.issued = {c.id: ctx.recorder.issue() for c in calls}

    def flush(self, ctx: RunContext, messages: Sequence[Any], refusal: Callable[..., str]) -> None:
        """Record the last reply's calls that no tool got as failed, with the text AutoGen
        answered them with (the tool results it wrote into ``messages``)."""
        said = {
            r.call_id: r.content
            for m in messages if isinstance(m, FunctionExecutionResultMessage)
            for r in m.content
        }  # fmt: skip
        for call_id, name, raw in self.pending:
            if call_id not in self.reached and call_id in said:
                failed = MastifToolResult(False, "", refusal(name, raw, said[call_id]))
                ctx.recorder.tool_call(
                    self.node.name, self.step, name, raw, failed, self.issued[call_id]
                )
        self.pending = []


class GatewayChatCompletionClient(OpenAIChatCompletionClient):
    """AutoGen's OpenAI client with the contract's turn policy: the node's ``tool_choice``
    on a visit's first request with tools (AutoGen's agent always asks ``auto``), and a
    reply to a request without tools is text (its tool calls are not run). It also sees
    every reply's calls and, in the next request, AutoGen's answers to them."""

    def __init__(self, objects: RunObjects, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.objects = objects

    async def create(self, messages: Sequence[Any], *, tools: Sequence[Any] = (),
                     tool_choice: Any = "auto", **kwargs: Any) -> CreateResult:  # fmt: skip
        visit = self.objects.visit_now
        if visit is not None:
            visit.flush(self.objects.ctx, messages, self.objects.refusal)
            if tools:
                if visit.tool_turns == 0 and tool_choice == "auto":
                    tool_choice = visit.node.spec.tool_choice
                visit.tool_turns += 1
        result = await super().create(messages, tools=list(tools), tool_choice=tool_choice,
                                      **kwargs)  # fmt: skip
        if not isinstance(result.content, str):
            if not tools:
                # calls in a reply to a request that offered none: not run, the text stands
                return result.model_copy(
                    update={"content": result.thought or "", "thought": None,
                            "finish_reason": "stop"}
                )  # fmt: skip
            if visit is not None:
                visit.take_reply(self.objects.ctx, result.content)
        return result


class RunTools:
    """What both workbenches know of the run (mixed in)."""

    objects: RunObjects

    def reach(self, call_id: str | None) -> int | None:
        """Mark a call as handed to a tool; its place in the record, if AutoGen started it."""
        visit = self.objects.visit_now
        if visit is None or call_id is None:
            return None
        visit.reached.add(call_id)
        return visit.issued.get(call_id)


class RunWorkbench(RunTools, Workbench):
    """The protocol's tools as an AutoGen workbench: their names, descriptions and JSON
    schemas as given; each call goes through ``ctx.call_tool``."""

    def __init__(self, objects: RunObjects) -> None:
        self.objects = objects
        self.schemas = [
            ToolSchema(name=s.name, description=s.description, parameters=s.parameters)  # type: ignore[typeddict-item]
            for s in objects.ctx.tools.tool_specs()
        ]

    async def list_tools(self) -> list[ToolSchema]:
        return list(self.schemas)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        ctx, visit = self.objects.ctx, self.objects.visit_now
        node, step = (visit.node.name, visit.step) if visit else (ctx.node, ctx.step)
        issued = self.reach(call_id)
        args: Any = dict(arguments) if isinstance(arguments, Mapping) else arguments
        result = await ctx.call_tool(node, step, name, {} if args is None else args, issued)
        # a failure reads as the tool's error text, as an MCP server's isError result does
        text = result.output if result.ok else (result.error or "")
        return ToolResult(name=name, result=[TextResultContent(content=text)],
                          is_error=not result.ok)  # fmt: skip

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def reset(self) -> None:
        return None

    async def save_state(self) -> Mapping[str, Any]:
        return {}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        return None


class RunMcpWorkbench(RunTools, McpWorkbench):
    """AutoGen's ``McpWorkbench``; a call it sends to the server is marked as reached (the
    MCP server records it)."""

    def __init__(self, objects: RunObjects, server_params: StreamableHttpServerParams) -> None:
        McpWorkbench.__init__(self, server_params)
        self.objects = objects

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        if not arguments or isinstance(arguments, Mapping):  # what the session can send
            self.reach(call_id)
        return await super().call_tool(name, arguments, cancellation_token, call_id)


# --------------------------------------------------------------------------- the run's objects


def model_client(ctx: RunContext, node: str, objects: RunObjects) -> GatewayChatCompletionClient:
    """AutoGen's OpenAI client at the node's gateway URL: the gateway's token, the generation
    settings, the client timeout, no retries, the job's shared HTTP client when there is one
    (``http_client`` is passed on to ``AsyncOpenAI`` like the client's other keywords)."""
    s = ctx.client_settings(node)
    extra: dict[str, Any] = {"http_client": s.http_async} if s.http_async is not None else {}
    return GatewayChatCompletionClient(
        objects, model=s.model, base_url=s.base_url, api_key=s.api_key, model_info=MODEL_INFO,
        **s.client_options(), **s.sampling(), **extra,
    )  # fmt: skip


@dataclass
class RunObjects:
    """What a run is given once: one AssistantAgent per workflow node, the tools."""

    ctx: RunContext
    agents: dict[str, AssistantAgent] = field(default_factory=dict)
    offered: frozenset[str] = frozenset()
    visit_now: Visit | None = None
    #: the run's: cancelled when the run is (AutoGen links each model request to it)
    token: CancellationToken = field(default_factory=CancellationToken)

    @classmethod
    async def build(
        cls, ctx: RunContext, nodes: tuple[PlannedNode, ...], stack: AsyncExitStack
    ) -> RunObjects:
        objects = cls(ctx)
        rounds = ctx.generation.max_tool_rounds
        workbench: Workbench | None = None
        if rounds > 0 and any(n.spec.use_tools for n in nodes):
            workbench = (
                await mcp_workbench(ctx, objects, stack)
                if ctx.mcp_url is not None
                else RunWorkbench(objects)
            )
            objects.offered = frozenset(t["name"] for t in await workbench.list_tools())
        for n in nodes:
            client = model_client(ctx, n.name, objects)
            if ctx.http is None:  # its own HTTP client (a shared one is the job's to close)
                stack.push_async_callback(client.close)
            tools = workbench if (n.spec.use_tools and workbench is not None) else None
            objects.agents[n.name] = AssistantAgent(
                n.name, client, workbench=tools,
                max_tool_iterations=max(1, rounds), reflect_on_tool_use=True,
            )  # fmt: skip
        return objects

    def refusal(self, name: str, raw: str, said: str) -> str:
        """Why AutoGen answered a call itself (its own checks, in its order), and its text."""
        try:
            json.loads(raw)
        except ValueError:
            return f"arguments are not valid JSON: {raw!r}"[:300] + f" (AutoGen: {said})"
        if name not in self.offered:
            return f"unknown tool {name!r}; offered: {sorted(self.offered)} (AutoGen: {said})"
        return f"refused by AutoGen before the tool ran (AutoGen: {said})"

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One node visit: the node's AssistantAgent, reset, on the prompt as its one user turn."""
        self.ctx.at(node.name, step)
        agent = self.agents[node.name]
        await agent.on_reset(self.token)  # a fresh conversation per visit
        self.visit_now = visit = Visit(node, step)
        try:
            response = await agent.on_messages(
                [TextMessage(content=prompt, source="user")], self.token
            )
            # the last round's calls AutoGen answered itself (no request followed them)
            visit.flush(self.ctx, await agent.model_context.get_messages(), self.refusal)
        finally:
            self.visit_now = None
        return response.chat_message.to_text()


async def mcp_workbench(
    ctx: RunContext, objects: RunObjects, stack: AsyncExitStack
) -> RunMcpWorkbench:
    """AutoGen's McpWorkbench on the run's MCP server, started for the run (its session actor
    opens the streams on ``ctx.mcp_http``: :func:`_streams`) and stopped with it."""
    assert ctx.mcp_url is not None
    workbench = RunMcpWorkbench(objects, StreamableHttpServerParams(url=ctx.mcp_url))
    token = MCP_HTTP.set(ctx.mcp_http)
    try:
        await workbench.start()
    finally:
        MCP_HTTP.reset(token)
    stack.push_async_callback(workbench.stop)
    return workbench


# --------------------------------------------------------------------------- the graph


@dataclass
class GraphRun:
    """What the graph's participants share: the exception one raised, whether the run ended."""

    error: BaseException | None = None
    cancelled: bool = False


class NodeAgent(BaseChatAgent):
    """A workflow node as a GraphFlow participant: its visit (the run's AssistantAgent, or an
    A2A request), answered with the node's text; ``metadata`` carries the loop round after
    it and whether it stopped the loop, for the edges' conditions."""

    def __init__(self, node: PlannedNode, visit: Callable[[PlannedNode, int], Awaitable[str]],
                 state: GraphRun, rounds: list[int], last_in_loop: bool) -> None:  # fmt: skip
        super().__init__(node.name, f"The {node.name} step of a web task.")
        self.node, self.make_visit, self.state = node, visit, state
        self.rounds, self.last_in_loop = rounds, last_in_loop

    @property
    def produced_message_types(self) -> Sequence[type[BaseChatMessage]]:
        return (TextMessage,)

    async def on_messages(
        self, messages: Sequence[BaseChatMessage], cancellation_token: CancellationToken
    ) -> Response:
        if self.state.cancelled:
            raise asyncio.CancelledError("the run was cancelled")
        node = self.node
        step = self.rounds[0] if node.spec.loop else 1
        try:
            text = await self.make_visit(node, step)
        except BaseException as exc:
            self.state.error = exc  # the team passes on only its text
            raise
        stopped = node.spec.loop and node.stops_loop(text)
        if self.last_in_loop:
            self.rounds[0] += 1
        meta = {"round": str(self.rounds[0]), "stopped": "yes" if stopped else "no"}
        return Response(chat_message=TextMessage(content=text, source=node.name, metadata=meta))

    async def on_reset(self, cancellation_token: CancellationToken) -> None:
        return None


class Finish(BaseChatAgent):
    """The graph's leaf: repeats the last node's text (no model call)."""

    def __init__(self) -> None:
        super().__init__(FINISH, "The end of the workflow.")

    @property
    def produced_message_types(self) -> Sequence[type[BaseChatMessage]]:
        return (TextMessage,)

    async def on_messages(
        self, messages: Sequence[BaseChatMessage], cancellation_token: CancellationToken
    ) -> Response:
        text = messages[-1].to_text() if messages else ""
        return Response(chat_message=TextMessage(content=text, source=FINISH))

    async def on_reset(self, cancellation_token: CancellationToken) -> None:
        return None


def stopped(message: BaseChatMessage) -> bool:
    return message.metadata.get("stopped") == "yes"


def add_edges(builder: DiGraphBuilder, plan: WorkflowPlan, agents: dict[str, BaseChatAgent],
              finish: BaseChatAgent) -> None:  # fmt: skip
    """The line before the loop, the loop's cycle and exits, the line after it."""
    before = [agents[n.name] for n in plan.before]
    loop = [agents[n.name] for n in plan.loop] if plan.loop and plan.max_steps >= 1 else []
    after = [*(agents[n.name] for n in plan.after), finish]
    max_steps = plan.max_steps

    def edge(a: BaseChatAgent, b: BaseChatAgent, condition: Any = None) -> None:
        # any parent activates a node: the loop's first node is entered twice over
        builder.add_edge(a, b, condition=condition, activation_condition="any")

    line = [*before, loop[0] if loop else after[0]]
    for a, b in zip(line, line[1:], strict=False):
        edge(a, b)
    for a, b in zip(after, after[1:], strict=False):
        edge(a, b)
    exit_to = after[0]
    for i, node in enumerate(loop):
        if i + 1 < len(loop):
            edge(node, loop[i + 1], lambda m: not stopped(m))
            edge(node, exit_to, stopped)
        else:  # a round ended: the next one, unless stopped or max_steps rounds were made
            edge(node, loop[0], lambda m: not stopped(m) and int(m.metadata["round"]) <= max_steps)
            edge(node, exit_to, lambda m: stopped(m) or int(m.metadata["round"]) > max_steps)


def build_graph(ctx: RunContext, dispatch: Dispatch, state: GraphRun) -> GraphFlow:
    """The run's GraphFlow: a participant per node whose visit renders the node's prompt
    from the run's history, hands it to ``dispatch`` (the run's AssistantAgent, or under
    ``a2a`` the node's A2A agent) and records its output; the edges with the loop's
    conditions; ``Finish``."""
    plan = ctx.plan

    async def visit(node: PlannedNode, step: int) -> str:
        return await visit_node(ctx, dispatch, node, step)

    rounds = [1]
    loop_last = plan.loop[-1] if plan.loop else None
    agents: dict[str, BaseChatAgent] = {
        n.name: NodeAgent(n, visit, state, rounds, n is loop_last) for n in plan.nodes
    }
    finish = Finish()
    builder = DiGraphBuilder()
    for agent in [*agents.values(), finish]:
        builder.add_node(agent)
    loop_on = bool(plan.loop) and plan.max_steps >= 1
    first = (
        plan.before[0] if plan.before else plan.loop[0] if loop_on else
        plan.after[0] if plan.after else None
    )  # fmt: skip
    if first is not None:
        add_edges(builder, plan, agents, finish)
        builder.set_entry_point(agents[first.name])
    else:
        builder.set_entry_point(finish)
    visits = len(plan.before) + len(plan.loop) * max(plan.max_steps, 0) + len(plan.after)
    # a node no edge reaches (the loop, with max_steps 0) never speaks
    return GraphFlow(builder.get_participants(), graph=builder.build(), max_turns=visits + 2)


async def run_graph(
    team: GraphFlow, task: str, state: GraphRun, tokens: list[CancellationToken]
) -> str:
    """Run the team; the exception a participant raised, as itself; on cancellation stop
    the team and the model request in flight (``tokens``) at once."""
    team_token = CancellationToken()
    running = asyncio.ensure_future(team.run(task=task, cancellation_token=team_token))
    try:
        # shielded: a cancelled run must not wait, inside the team's own clean-up, for the
        # model request in flight to end before the tokens are cancelled
        result = await asyncio.shield(running)
    except asyncio.CancelledError:
        state.cancelled = True
        for token in [*tokens, team_token]:
            token.cancel()
        await asyncio.wait([running], timeout=5)
        if running.done() and not running.cancelled():
            running.exception()  # retrieved: the cancellation's own error
        raise
    except Exception as exc:
        if state.error is not None and state.error is not exc:
            raise state.error from exc
        raise
    texts = [
        m.to_text() for m in result.messages if isinstance(m, TextMessage) and m.source == FINISH
    ]
    return texts[-1] if texts else ""


# --------------------------------------------------------------------------- the adapter


class AutoGenAdapter:
    name = "autogen"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("autogen-agentchat", "autogen-core", "autogen-ext", "openai")
    mcp_packages = ("mcp",)
    #: no private member of AutoGen's classes is overridden or called (its MCP session
    #: module's stream opener is replaced: checked on import)
    private_members = ()

    @asynccontextmanager
    async def _session(self, ctx: RunContext) -> AsyncIterator[RunObjects]:
        """The run's agents and tools, closed on exit (clients, the MCP session)."""
        async with AsyncExitStack() as stack:
            with ctx.setting_up():
                objects = await RunObjects.build(ctx, ctx.plan.nodes, stack)
            yield objects

    async def run(self, ctx: RunContext) -> str:
        """The GraphFlow (:func:`build_graph`), each node visit the node's AssistantAgent."""
        async with self._session(ctx) as objects:
            return await self._orchestrate(ctx, objects.visit, [objects.token])

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The GraphFlow, each node visit handed to ``dispatch`` (under ``a2a`` an A2A
        request to the node's agent)."""
        return await self._orchestrate(ctx, dispatch, [])

    async def _orchestrate(
        self, ctx: RunContext, dispatch: Dispatch, tokens: list[CancellationToken]
    ) -> str:
        state = GraphRun()
        with ctx.setting_up():
            team = build_graph(ctx, dispatch, state)
        return await run_graph(team, ctx.task.confirmed_task, state, tokens)

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's
        agents and tools, built on the run's first visit and kept in ``ctx.built``."""
        objects = ctx.built.get(self.name)
        if objects is None:
            objects = await ctx.resources.enter_async_context(self._session(ctx))
            ctx.built[self.name] = objects
        assert isinstance(objects, RunObjects)
        return await objects.visit(node, step, prompt)


__all__ = ["AutoGenAdapter", "build_graph"]

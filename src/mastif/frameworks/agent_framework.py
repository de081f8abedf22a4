"""Microsoft Agent Framework: the workflow as a ``WorkflowBuilder`` workflow of node executors,
each node visit an ``Agent`` with the framework's own function-invocation loop.

Orchestration. :func:`build_workflow` builds one Agent Framework ``Workflow`` per run: an
``Executor`` per workflow node (its ``@handler`` makes the node's visit and sends a
:class:`Token` on) and one :class:`Finish` executor that yields the workflow's output. The
edges carry the rules: the nodes before the loop in a line, then the loop nodes in a cycle
(the last loop node has an edge back to the first, conditioned on "no ``stop_when`` match
and fewer than ``max_steps`` rounds", and every loop node an exit edge to the nodes after the
loop, conditioned on the opposite), then the nodes after the loop and ``Finish``. The
framework's workflow runner (Pregel-style supersteps) routes the messages and runs the
executors; mastif's ``drive_workflow`` is not used. The superstep limit
(``max_iterations``) is the plan's number of visits plus a margin, so it never cuts a run.
Under ``a2a`` the orchestrator agent runs the same workflow (:meth:`AgentFrameworkAdapter.
orchestrate`), each executor's visit being one A2A request to the node's agent
(``mastif.frameworks.orchestration.visit_node``); the node agents serve their visits with
:meth:`AgentFrameworkAdapter.run_node`.

A node visit is ``Agent.run(prompt)`` (the framework's ``Agent``, one per workflow node, no
instructions, no session: a fresh conversation per visit) on an
``OpenAIChatCompletionClient``, whose ``FunctionInvocationLayer`` is the tool loop: model
call, the reply's calls run concurrently (``allow_concurrent_invocation``, its default),
results written back as ``tool`` messages, next model call. What the framework does by
itself and keeps: its tool definitions (``FunctionTool.to_json_schema_spec``: the JSON schema
as given, no ``strict``), its argument handling (``Content.parse_arguments``: text that is
not a JSON object becomes ``{"raw": <text>}``, then the schema's top-level checks: a missing
required argument or an unexpected one refuses the call), its tool results and error texts
("Error: Argument parsing failed.", "Error: Function failed.", 'Error: Requested function
"X" not found.'), its stop after ``max_consecutive_errors_per_request`` failing rounds, its
fallback text when the reply to its last, tool-less request holds no text ("Function
invocation limit reached ..."), ``max_tokens`` sent as ``max_completion_tokens``, and the
``User-Agent`` it sends (``agent-framework-python/<version>``, to our loopback gateway,
which does not pass it on).

What the contract makes us change:

- ``max_tool_rounds`` is the loop's own ``max_iterations`` (``FunctionInvocationConfiguration``:
  model round trips with tools; when they are used up the loop itself makes one more
  request with ``tool_choice="none"`` and runs no call of its reply); with
  ``max_tool_rounds`` 0, or on a node without tools, the agent has no tools;
- a chat middleware (:class:`TurnPolicy`, the framework's ``ChatMiddleware`` API) makes
  that last request carry no tools at all (the loop would send them with
  ``tool_choice="none"``) and makes the turns after the first say ``auto`` (the loop drops
  a ``required`` choice after the first round instead of sending ``auto``);
- recording: the middleware records calls of names that are not offered (the loop answers
  them itself, no tool runs), and a function middleware (:class:`CallOrder`) records the
  calls the framework refuses on their arguments, with its text, and keeps the record in
  the model's order although a reply's calls run concurrently.

Model: ``OpenAIChatCompletionClient`` with an ``AsyncOpenAI`` client of ours (so no
``OPENAI_*`` environment lookup): ``ctx.llm_base_url(node)``, ``api_key=ctx.gateway_token``,
the client timeout, ``max_retries=0``, the job's shared async HTTP client; ``temperature``,
``max_tokens`` and ``seed`` as the agent's default options. An error of the OpenAI client
(wrapped by the framework in a ``ChatClientException``) is re-raised as itself.

Tools: in-process, ``FunctionTool`` s built from the protocol's specs (``input_model`` = the
JSON schema) whose function goes through ``ctx.call_tool``. Under ``mcp`` the tools are the
framework's own ``MCPStreamableHTTPTool`` on ``ctx.mcp_url``, its ``http_client`` an httpx
client from ``ctx.mcp_http`` (timed exchanges, the server's key), ``load_prompts=False`` (only
the server's tools are offered), connected once per run and closed with it; the MCP server
records the calls. Version: 1.22 is the last release whose MCP client is written for the
MCP SDK 1.x; 1.23+ needs the MCP SDK 2.x (``mcp.Client``; ``mcp>=2.2``), which the other
frameworks' MCP integrations do not accept yet, so the lock pins 1.22 (docs/frameworks.md).
The framework passes no ``clientInfo`` of its own: the SDK's default (``mcp`` 0.1.0) is sent.

Async: the framework is asyncio-native; everything runs on the run's loop. A cancelled run
cancels the workflow's runner task and with it the executor and its model request.

Telemetry: the framework's OpenTelemetry instrumentation (spans, metrics, log events on
every agent, chat and tool call) is switched off for the process with its own
``observability.disable_instrumentation()`` when this module is imported (sticky: later
``enable_instrumentation`` calls by other code are ignored); no OTLP exporter is
configured. The framework sends nothing else anywhere: its "user agent telemetry" is that
``User-Agent`` header on our own requests to the gateway.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Never

import openai
from agent_framework import (
    Agent,
    ChatContext,
    ChatMiddleware,
    Executor,
    FunctionInvocationContext,
    FunctionMiddleware,
    FunctionTool,
    MCPStreamableHTTPTool,
    WorkflowBuilder,
    WorkflowContext,
    handler,
)
from agent_framework.observability import disable_instrumentation
from agent_framework.openai import OpenAIChatCompletionClient

from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.mcp_transport import HTTPX, SSE_READ_TIMEOUT_S, TIMEOUT_S
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode, WorkflowPlan

disable_instrumentation()  # no spans, metrics or log events, whatever else enables them

#: the id of the executor that yields the workflow's output (no node may have it)
FINISH = "__finish__"


def openai_cause(exc: BaseException) -> openai.OpenAIError | None:
    """The OpenAI client's error behind the framework's wrapper, if any."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, openai.OpenAIError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or getattr(cur, "inner_exception", None) or cur.__context__
    return None


# --------------------------------------------------------------------------- recording


@dataclass
class Reply:
    """The tool calls of one model reply, in the model's order.

    The framework runs them concurrently, each in a task of its own; a call takes its place
    in the run's record only once the calls before it took theirs. Calls of names that are
    not offered never reach a tool: they are recorded as refused when the next call takes
    its place, or when the reply's round ends (:meth:`flush`)."""

    ids: list[str]
    names: list[str]
    raw: list[Any]
    known: list[bool]
    record_unknown: Callable[[str, Any], None]
    placed: list[bool] = field(init=False)
    events: list[asyncio.Event] = field(init=False)

    def __post_init__(self) -> None:
        self.placed = [False] * len(self.ids)
        self.events = [asyncio.Event() for _ in self.ids]

    def index(self, call_id: str) -> int | None:
        return self.ids.index(call_id) if call_id in self.ids else None

    async def turn(self, i: int) -> None:
        """Wait until every earlier offered call took its place."""
        for j in range(i):
            if self.known[j]:
                await self.events[j].wait()

    def place(self, i: int) -> None:
        """Call ``i`` takes its place now: unknown calls before it are recorded first."""
        if self.placed[i]:
            return
        self.flush(i)
        self.placed[i] = True
        self.events[i].set()

    def flush(self, upto: int | None = None) -> None:
        for j in range(len(self.ids) if upto is None else upto):
            if not self.known[j] and not self.placed[j]:
                self.placed[j] = True
                self.record_unknown(self.names[j], self.raw[j])


@dataclass
class Visit:
    """The node visit in progress on a run's objects (visits of a run are sequential)."""

    node: PlannedNode
    step: int
    offered: frozenset[str]
    reply: Reply | None = None

    def close_reply(self) -> None:
        if self.reply is not None:
            self.reply.flush()
            self.reply = None


#: the (reply, index) of the tool call the current task makes (each call runs in its own task)
CURRENT_CALL: contextvars.ContextVar[tuple[Reply, int] | None] = contextvars.ContextVar(
    "mastif_agent_framework_call", default=None
)


class TurnPolicy(ChatMiddleware):
    """The contract's turn policy around each model request of a visit, and the record of
    calls to names that are not offered."""

    def __init__(self, objects: RunObjects) -> None:
        self.objects = objects

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        visit = self.objects.visit_now
        if visit is not None:
            visit.close_reply()  # the previous round's calls have all run
        options = dict(context.options or {})
        offered = bool(options.get("tools"))
        if offered and options.get("tool_choice") == "none":
            # the loop's last request once max_iterations are used up: without tools
            options.pop("tools", None)
            options.pop("tool_choice", None)
            offered = False
        elif offered and options.get("tool_choice") is None:
            options["tool_choice"] = "auto"  # the loop dropped a first-turn `required`
        context.options = options
        await call_next()
        if visit is not None and offered and context.result is not None:
            self.register_reply(visit, context.result)

    def register_reply(self, visit: Visit, response: Any) -> None:
        calls = [
            c
            for m in getattr(response, "messages", [])
            for c in m.contents
            if c.type == "function_call" and c.call_id
        ]
        if not calls:
            return
        ctx = self.objects.ctx

        def record_unknown(name: str, raw: Any) -> None:
            error = f"unknown tool {name!r}; offered: {sorted(visit.offered)}"
            ctx.record_failed_tool_call(visit.node.name, visit.step, name, raw, error)

        visit.reply = Reply(
            ids=[c.call_id for c in calls],
            names=[c.name or "<unnamed>" for c in calls],
            raw=[c.arguments if c.arguments is not None else "" for c in calls],
            known=[c.name in visit.offered for c in calls],
            record_unknown=record_unknown,
        )


class CallOrder(FunctionMiddleware):
    """Each offered call takes its place in the record in the model's order; a call the
    framework refuses on its arguments is recorded as failed, with the framework's text."""

    def __init__(self, objects: RunObjects) -> None:
        self.objects = objects

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        visit = self.objects.visit_now
        reply = visit.reply if visit is not None else None
        i = reply.index(str(context.metadata.get("call_id"))) if reply is not None else None
        if visit is None or reply is None or i is None:
            await call_next()
            return
        ctx = self.objects.ctx
        served = ctx.mcp_url is not None  # the MCP server records calls, as they end
        if served:
            reply.place(i)
        else:
            await reply.turn(i)
        token = CURRENT_CALL.set((reply, i))
        try:
            await call_next()
        except TypeError as exc:  # the framework's argument checks refused it: no tool ran
            if served or not reply.placed[i]:
                reply.place(i)
                error = f"Error: Argument parsing failed. Exception: {exc}"
                ctx.record_failed_tool_call(
                    visit.node.name, visit.step, context.function.name, reply.raw[i], error
                )
            raise
        finally:
            reply.place(i)
            CURRENT_CALL.reset(token)


# --------------------------------------------------------------------------- the run's objects


def gateway_client(
    ctx: RunContext, node: str, objects: RunObjects, stack: AsyncExitStack
) -> OpenAIChatCompletionClient:
    """The framework's chat-completions client at the node's gateway URL, its tool loop
    capped at ``max_tool_rounds`` model round trips with tools."""
    s = ctx.client_settings(node)
    client = openai.AsyncOpenAI(
        base_url=s.base_url, api_key=s.api_key, http_client=s.http_async, **s.client_options()
    )
    if s.http_async is None:  # its own HTTP client: closed with the run
        stack.push_async_callback(client.close)
    return OpenAIChatCompletionClient(
        model=s.model,
        async_client=client,
        middleware=[TurnPolicy(objects), CallOrder(objects)],
        function_invocation_configuration={
            "max_iterations": max(1, ctx.generation.max_tool_rounds)
        },
    )


def local_tools(ctx: RunContext, objects: RunObjects) -> list[FunctionTool]:
    """The protocol's tools as FunctionTools (their JSON schemas as given); each call goes
    through ``ctx.call_tool``, recorded at its place in the reply's order."""

    def make(spec: Any) -> FunctionTool:
        async def call(**arguments: Any) -> str:
            visit = objects.visit_now
            node, step = (visit.node.name, visit.step) if visit else (ctx.node, ctx.step)
            current = CURRENT_CALL.get()
            if current is not None:
                current[0].place(current[1])  # ctx.call_tool takes its place at once
            result = await ctx.call_tool(node, step, spec.name, arguments)
            # a failure reads as the tool's error text, as an MCP server's isError result does
            return result.output if result.ok else (result.error or "")

        return FunctionTool(
            name=spec.name, description=spec.description, func=call, input_model=spec.parameters
        )

    return [make(s) for s in ctx.tools.tool_specs()]


async def mcp_tool(ctx: RunContext, stack: AsyncExitStack) -> MCPStreamableHTTPTool:
    """The framework's own MCP tool on the run's MCP server, connected for the run, on an
    httpx client from ``ctx.mcp_http`` (its ``http_client`` argument: timed exchanges, the
    server's key), without the server's prompts (only its tools are offered)."""
    assert ctx.mcp_url is not None
    http: Any = None  # an AsyncClient of the MCP SDK's HTTP library (httpx2 under SDK 2)
    if ctx.mcp_http is not None:
        http = ctx.mcp_http(
            headers=None, timeout=HTTPX.Timeout(TIMEOUT_S, read=SSE_READ_TIMEOUT_S), auth=None
        )
        stack.push_async_callback(http.aclose)
    tool = MCPStreamableHTTPTool(
        name="mastif",
        url=ctx.mcp_url,
        http_client=http,
        load_prompts=False,  # type: ignore[arg-type]
    )
    await stack.enter_async_context(tool)
    return tool


@dataclass
class RunObjects:
    """What a run is given once: one Agent per workflow node, the tools."""

    ctx: RunContext
    agents: dict[str, Agent] = field(default_factory=dict)
    offered: frozenset[str] = frozenset()
    visit_now: Visit | None = None

    @classmethod
    async def build(
        cls, ctx: RunContext, nodes: tuple[PlannedNode, ...], stack: AsyncExitStack
    ) -> RunObjects:
        """One Agent per node, the tools; what they hold open is closed by ``stack``."""
        objects = cls(ctx)
        rounds = ctx.generation.max_tool_rounds
        tools: list[Any] = []
        if rounds > 0 and any(n.spec.use_tools for n in nodes):
            tools = (
                [await mcp_tool(ctx, stack)]
                if ctx.mcp_url is not None
                else local_tools(ctx, objects)
            )
        objects.offered = frozenset(ctx.tool_names())
        for n in nodes:
            s = ctx.client_settings(n.name)
            objects.agents[n.name] = Agent(
                gateway_client(ctx, n.name, objects, stack),
                name=n.name,
                tools=tools if (n.spec.use_tools and tools) else None,
                default_options={**s.sampling(), "tool_choice": n.spec.tool_choice},  # type: ignore[typeddict-item]
            )
        return objects

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One node visit: the node's Agent and its function-invocation loop, ending in text."""
        self.ctx.at(node.name, step)
        self.visit_now = Visit(node, step, self.offered)
        try:
            response = await self.agents[node.name].run(prompt)
        except Exception as exc:
            cause = openai_cause(exc)
            if cause is not None and cause is not exc:
                raise cause from exc  # classified by the runner as the provider's error
            raise
        finally:
            self.visit_now.close_reply()
            self.visit_now = None
        return response.text or ""


# --------------------------------------------------------------------------- the workflow


@dataclass
class Token:
    """What an executor sends on: the loop round, the node's text, whether it stopped the loop."""

    round: int
    text: str
    stopped: bool = False


class NodeExecutor(Executor):
    """A workflow node: its visit (the run's agent, or an A2A request), then a token on."""

    def __init__(self, node: PlannedNode, visit: Callable[[PlannedNode, int], Awaitable[str]],
                 last_in_loop: bool) -> None:  # fmt: skip
        super().__init__(id=node.name)
        self.node, self.make_visit, self.last_in_loop = node, visit, last_in_loop

    @handler
    async def visit(self, token: Token, ctx: WorkflowContext[Token]) -> None:
        node = self.node
        step = token.round if node.spec.loop else 1
        text = await self.make_visit(node, step)
        stopped = node.spec.loop and node.stops_loop(text)
        round_ = token.round + 1 if self.last_in_loop else token.round
        await ctx.send_message(Token(round_, text, stopped))


class Finish(Executor):
    """The workflow's end: the last node's text is its output."""

    @handler
    async def finish(self, token: Token, ctx: WorkflowContext[Never, str]) -> None:
        await ctx.yield_output(token.text)


def add_edges(builder: WorkflowBuilder, plan: WorkflowPlan, ex: dict[str, Executor],
              finish: Executor) -> None:  # fmt: skip
    """The line before the loop, the loop's cycle and exits, the line after it."""
    before = [ex[n.name] for n in plan.before]
    loop = [ex[n.name] for n in plan.loop] if plan.loop and plan.max_steps >= 1 else []
    after = [*(ex[n.name] for n in plan.after), finish]
    line = [*before, loop[0] if loop else after[0]]
    for a, b in zip(line, line[1:], strict=False):
        builder.add_edge(a, b)
    for a, b in zip(after, after[1:], strict=False):
        builder.add_edge(a, b)
    exit_to, max_steps = after[0], plan.max_steps
    for i, node in enumerate(loop):
        if i + 1 < len(loop):
            builder.add_edge(node, loop[i + 1], condition=lambda t: not t.stopped)
            builder.add_edge(node, exit_to, condition=lambda t: t.stopped)
        else:  # a round ended: the next one, unless stopped or max_steps rounds were made
            builder.add_edge(
                node, loop[0], condition=lambda t: not t.stopped and t.round <= max_steps
            )
            builder.add_edge(node, exit_to, condition=lambda t: t.stopped or t.round > max_steps)


def build_workflow(ctx: RunContext, dispatch: Dispatch) -> Any:
    """The run's workflow: an executor per node whose visit renders the node's prompt from
    the run's history, hands it to ``dispatch`` (the run's agent, or under ``a2a`` the node's
    A2A agent) and records its output; edges with the loop's conditions; ``Finish``."""
    plan = ctx.plan

    async def visit(node: PlannedNode, step: int) -> str:
        return await visit_node(ctx, dispatch, node, step)

    loop_last = plan.loop[-1] if plan.loop else None
    ex: dict[str, Executor] = {n.name: NodeExecutor(n, visit, n is loop_last) for n in plan.nodes}
    finish = Finish(id=FINISH)
    loop_on = bool(plan.loop) and plan.max_steps >= 1
    first = (
        plan.before[0] if plan.before else plan.loop[0] if loop_on else
        plan.after[0] if plan.after else None
    )  # fmt: skip
    visits = len(plan.before) + len(plan.loop) * max(plan.max_steps, 0) + len(plan.after)
    builder = WorkflowBuilder(
        max_iterations=visits + 5,
        name="mastif-linear-workflow",
        start_executor=ex[first.name] if first is not None else finish,
    )
    if first is not None:
        add_edges(builder, plan, ex, finish)
    return builder.build()


# --------------------------------------------------------------------------- the adapter


class AgentFrameworkAdapter:
    name = "agent_framework"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("agent-framework-core", "agent-framework-openai", "openai")
    mcp_packages = ("mcp",)
    #: no private member of the Agent Framework is overridden or called
    private_members = ()

    @asynccontextmanager
    async def _session(self, ctx: RunContext) -> AsyncIterator[RunObjects]:
        """The run's agents and tools, closed on exit (clients, the MCP session): :meth:`run`
        holds them for the run, in its own task; :meth:`run_node` enters them once per run
        into ``ctx.resources``."""
        async with AsyncExitStack() as stack:
            with ctx.setting_up():
                objects = await RunObjects.build(ctx, ctx.plan.nodes, stack)
            yield objects

    async def run(self, ctx: RunContext) -> str:
        """The workflow (:func:`build_workflow`), each node visit the node's Agent."""
        async with self._session(ctx) as objects:
            return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow, each node visit handed to ``dispatch`` (in :meth:`run` the node's
        Agent; under ``a2a`` an A2A request to the node's agent)."""
        with ctx.setting_up():
            workflow = build_workflow(ctx, dispatch)
        result = await workflow.run(Token(1, ""))
        outputs = result.get_outputs()
        return str(outputs[-1]) if outputs else ""

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's
        agents and tools, built on the run's first visit and kept in ``ctx.built``."""
        objects = ctx.built.get(self.name)
        if objects is None:
            objects = await ctx.resources.enter_async_context(self._session(ctx))
            ctx.built[self.name] = objects
        assert isinstance(objects, RunObjects)
        return await objects.visit(node, step, prompt)

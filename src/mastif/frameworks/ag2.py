"""AG2 (1.x, ``import ag2``): an ag2 ``Agent`` per workflow node, the workflow an AG2 network.

Orchestration: a workflow channel on an AG2 hub, its order a ``TransitionGraph``
(:mod:`mastif.frameworks.ag2_network`, :func:`~mastif.frameworks.ag2_network.build_network`):
the hub admits the node participants' turns in the order the graph selects, and each node
participant's turn is one node visit. In-process a visit is the node's ``Agent.ask``; under
``a2a`` the orchestrator agent runs the same network, each turn an A2A request to the node's
agent, whose visits are :meth:`AG2Adapter.run_node`.

A node visit: ``agent.ask(prompt)`` on the node's ``ag2.Agent`` (no system prompt of ours:
AG2 sends its empty system message), built once per run. AG2's agent loop
(``_execute_turn``): a model call; while the reply has tool calls, its tool executor runs them
concurrently (``asyncio.gather``) and sends the results back; the first reply without tool
calls ends the turn, its text the node's output (``AgentReply.body``).

Model: an ``OpenAIConfig`` (ag2's OpenAI chat-completions client on ``AsyncOpenAI``) at
``ctx.llm_base_url(node)``, ``api_key=ctx.gateway_token``, ``max_retries=0``, the client
timeout, and one run-owned plain-HTTP ``httpx2.AsyncClient`` (openai 3's HTTP library),
closed to stop a cancelled run's request in flight. :class:`GatewayConfig` is an ag2
``ModelConfig`` whose client (:class:`GatewayClient`, an ag2 ``LLMClient``) applies the turn
policy around ag2's ``OpenAIClient``s: the node's ``tool_choice`` on a visit's first request,
``auto`` after, no tools on nodes that use none or once ``max_tool_rounds`` replies with tool
calls were answered (AG2 has no round cap: it loops while the model calls tools), and tool
calls in a reply to a request without tools dropped.

Tools (:class:`GatewayTool`, an ag2 ``Tool`` as ag2's own MCP proxy tools are: the schema as
given, arguments parsed by AG2's ``ToolCallEvent.serialized_arguments``) call
``ctx.call_tool``. Under ``mcp``: AG2's MCP client, ``MCPToolkit(MCPServerConfig(...))`` at
``ctx.mcp_url`` (streamable HTTP, a session per operation: one for listing the tools, one per
call), its ``httpx2.AsyncClient`` built by the run's ``ctx.mcp_http`` (see
:func:`install_mcp_http`).

AG2 answers what it refuses itself: an unknown tool with its ``ToolNotFoundError``, text that
is not JSON with the ``JSONDecodeError`` (as a ``ToolErrorEvent``, a traceback the model
reads); these are recorded as failed calls (:class:`Refusals`, an ag2 middleware, and the
reply's places taken in :class:`GatewayClient`).

No telemetry: AG2's OpenTelemetry tracing is opt-in (the hub's ``tracer_provider``, the
``TelemetryMiddleware``), neither is used, and the OpenTelemetry SDK is not installed
(``OTEL_SDK_DISABLED`` is set all the same).
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
from ag2 import Agent, Middleware
from ag2.annotations import Context
from ag2.config.openai import OpenAIConfig
from ag2.events import ToolCallEvent, ToolCallsEvent, ToolErrorEvent, ToolResultEvent
from ag2.middleware import BaseMiddleware
from ag2.tools.types import FunctionDefinition, FunctionToolSchema, Tool

from mastif.frameworks.ag2_network import build_network
from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.plan import PlannedNode
from mastif.tools import ToolResult

# no OpenTelemetry SDK is installed; should one come in, it exports nothing
os.environ.setdefault("OTEL_SDK_DISABLED", "true")


@dataclass
class Visit:
    """The node visit in progress (one ``Agent.ask``)."""

    node: PlannedNode
    step: int
    requests: int = 0
    tool_rounds: int = 0  # replies with tool calls answered so far
    #: the place of each call of the visit's replies in the run's record (call id -> issue)
    places: dict[str, int] = field(default_factory=dict)


@dataclass
class RunState:
    """What a run's agents, tools and clients share."""

    ctx: RunContext
    visit: Visit | None = None

    def place(self, call_id: str) -> int | None:
        return self.visit.places.get(call_id) if self.visit else None

    def refuse(self, name: str, arguments: Any, error: str, issued: int | None) -> None:
        visit = self.visit
        assert visit is not None
        self.ctx.recorder.tool_call(
            visit.node.name, visit.step, name, arguments, ToolResult(False, "", error), issued
        )


# -- model ---------------------------------------------------------------------------------


class GatewayClient:
    """An ag2 ``LLMClient``: ag2's ``OpenAIClient`` under the contract's turn policy."""

    def __init__(self, config: GatewayConfig):
        self.config = config
        base = config.base
        # ag2's OpenAIClient sends its config's tool_choice: one client per setting
        self.first = base.copy(tool_choice=config.node.spec.tool_choice).create()
        self.after = base.copy(tool_choice="auto").create()
        self.plain = base.create()

    async def __call__(
        self, messages: Sequence[Any], context: Any, *, tools: Iterable[Any], **kwargs: Any
    ) -> Any:
        run = self.config.run
        visit = run.visit
        assert visit is not None
        offered = list(tools)
        if not self.config.use_tools or visit.tool_rounds >= self.config.max_tool_rounds:
            offered = []
        client = self.plain if not offered else self.first if visit.requests == 0 else self.after
        visit.requests += 1
        response = await client(messages, context, tools=offered, **kwargs)
        if response.tool_calls and not offered:
            response.tool_calls = ToolCallsEvent([])  # unasked-for calls are not run
        elif response.tool_calls:
            visit.tool_rounds += 1
            names = {s.function.name for s in offered if isinstance(s, FunctionToolSchema)}
            for call in response.tool_calls.calls:  # places in the model's order
                visit.places[call.id] = issued = run.ctx.recorder.issue()
                if call.name not in names:  # AG2 answers "Tool `x` not found"
                    error = (
                        f"unknown tool {call.name!r}; offered: {sorted(names)} "
                        f"(ag2: Tool `{call.name}` not found)"
                    )
                    run.refuse(call.name, call.arguments, error, issued)
        return response


@dataclass(slots=True)
class GatewayConfig:
    """An ag2 ``ModelConfig`` for one node: ag2's ``OpenAIConfig`` at the gateway, with the
    turn policy (:class:`GatewayClient`)."""

    base: OpenAIConfig
    run: RunState
    node: PlannedNode
    use_tools: bool
    max_tool_rounds: int

    @property
    def provider(self) -> Any:
        return self.base.provider

    @property
    def model(self) -> str:
        return str(self.base.model)

    def copy(self) -> GatewayConfig:
        return GatewayConfig(self.base, self.run, self.node, self.use_tools, self.max_tool_rounds)

    def create(self) -> GatewayClient:
        return GatewayClient(self)


# -- tools ---------------------------------------------------------------------------------


class GatewayTool(Tool):
    """A protocol tool as an ag2 ``Tool``: its JSON schema as given; a call goes through
    ``ctx.call_tool`` with the arguments AG2 parsed, its output (or error) the result."""

    def __init__(self, run: RunState, name: str, description: str, parameters: dict[str, Any]):
        self.run, self.name = run, name
        self.schema = FunctionToolSchema(
            function=FunctionDefinition(name=name, description=description, parameters=parameters)
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> GatewayTool:
        # ag2 copies the tools an Agent is given; this one holds the run (shared by design)
        return GatewayTool(self.run, self.name, self.schema.function.description,
                           self.schema.function.parameters)  # fmt: skip

    async def schemas(self, context: Any) -> list[FunctionToolSchema]:
        return [self.schema]

    def register(
        self,
        stack: ExitStack | AsyncExitStack,
        context: Any,
        *,
        middleware: Iterable[BaseMiddleware] = (),
    ) -> None:
        # as ag2's FunctionTool registers: the agent's tool middleware around the call
        execution: Any = self
        for mw in middleware:
            execution = _wrap(mw.on_tool_execution, execution)

        # ag2 injects the subscriber's arguments by their annotations (fast_depends)
        async def execute(event: ToolCallEvent, context: Context) -> None:
            await context.send(await execution(event, context))

        stack.enter_context(
            context.stream.where(ToolCallEvent.name == self.name).sub_scope(execute)
        )

    async def __call__(self, event: ToolCallEvent, context: Any) -> ToolResultEvent:
        run = self.run
        try:
            arguments = event.serialized_arguments  # AG2's parse (json.loads)
        except Exception as exc:  # noqa: BLE001 - refused as AG2 refuses: a ToolErrorEvent
            return ToolErrorEvent.from_call(event, error=exc)
        visit = run.visit
        assert visit is not None
        result = await run.ctx.call_tool(
            visit.node.name, visit.step, self.name, arguments, run.place(event.id)
        )
        if not result.ok:
            return ToolErrorEvent.from_call(event, error=RuntimeError(result.error))
        return ToolResultEvent.from_call(event, result=result.output)


def _wrap(hook: Any, inner: Any) -> Any:
    async def call(event: ToolCallEvent, context: Any) -> Any:
        return await hook(inner, event, context)

    return call


class Refusals(BaseMiddleware):
    """ag2 tool middleware: a call whose arguments AG2 cannot parse never reaches a tool
    (AG2 answers with the ``JSONDecodeError``); recorded as a failed call at its place. Under
    ``mcp`` arguments that are JSON but not an object are refused before the server too."""

    def __init__(self, event: Any, context: Any, run: RunState):
        super().__init__(event, context)
        self.run = run

    async def on_tool_execution(self, call_next: Any, event: ToolCallEvent, context: Any) -> Any:
        run = self.run
        try:
            arguments: Any = event.serialized_arguments
            refused = None
        except ValueError as exc:
            arguments, refused = event.arguments, f"{type(exc).__name__}: {exc}"
        if refused is None and run.ctx.mcp_url is not None and not isinstance(arguments, dict):
            refused = f"arguments are not a JSON object: {event.arguments!r}"
        if refused is None:
            return await call_next(event, context)
        result = await call_next(event, context)
        if isinstance(result, ToolErrorEvent):
            refused = f"{refused} (ag2: {type(result.error).__name__}: {result.error})"
        run.refuse(event.name, event.arguments, refused[:2000], run.place(event.id))
        return result


#: the run's MCP HTTP client factory (ctx.mcp_http), for AG2's MCP toolkit
_mcp_http: contextvars.ContextVar[Any] = contextvars.ContextVar("ag2_mcp_http", default=None)


class _Httpx2ForRuns:
    """``httpx2`` as AG2's MCP toolkit module sees it: its ``AsyncClient(headers=, timeout=,
    proxy=, verify=)`` is built by the current run's ``ctx.mcp_http`` (the MCP SDK's factory
    signature: it times the exchanges and sends the MCP server's key); the rest is httpx2."""

    def AsyncClient(self, *, headers: Any = None, timeout: Any = None, **_: Any) -> Any:  # noqa: N802
        factory = _mcp_http.get()
        if factory is None:
            return httpx2.AsyncClient(headers=headers, timeout=timeout, **_)
        return factory(headers=headers, timeout=httpx2.Timeout(timeout), auth=None)

    def __getattr__(self, name: str) -> Any:
        return getattr(httpx2, name)


def install_mcp_http() -> None:
    """AG2's MCP toolkit opens each session on an ``httpx2.AsyncClient`` of its own and takes
    no client factory: its module's ``httpx2`` becomes :class:`_Httpx2ForRuns` (once)."""
    from ag2.tools.toolkits.mcp_server import toolkit

    if not isinstance(toolkit.httpx2, _Httpx2ForRuns):
        toolkit.httpx2 = _Httpx2ForRuns()  # type: ignore[assignment]


def mcp_toolkit(ctx: RunContext) -> Tool:
    """AG2's MCP client on the run's MCP server."""
    from ag2.tools.toolkits.mcp_server import MCPServerConfig, MCPToolkit

    install_mcp_http()
    _mcp_http.set(ctx.mcp_http)
    assert ctx.mcp_url is not None
    return MCPToolkit(MCPServerConfig(server_url=ctx.mcp_url))


# -- the run -------------------------------------------------------------------------------


@dataclass
class RunObjects:
    """What a run builds once: one ag2 Agent per workflow node, their tools and HTTP client."""

    run: RunState
    agents: dict[str, Agent]

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: one ``ask`` of its agent."""
        ctx = self.run.ctx
        ctx.at(node.name, step)
        self.run.visit = Visit(node, step)
        _mcp_http.set(ctx.mcp_http)
        try:
            reply = await self.agents[node.name].ask(prompt)
        finally:
            self.run.visit = None
        return reply.body or ""


def build_agents(ctx: RunContext, run: RunState, http: httpx2.AsyncClient) -> dict[str, Agent]:
    g = ctx.generation
    tools: list[Tool] = []
    if ctx.tools.tool_specs() and any(n.spec.use_tools for n in ctx.plan.nodes):
        if ctx.mcp_url is not None:
            tools = [mcp_toolkit(ctx)]
        else:
            tools = [
                GatewayTool(run, s.name, s.description, dict(s.parameters))
                for s in ctx.tools.tool_specs()
            ]
    agents = {}
    for node in ctx.plan.nodes:
        s = ctx.client_settings(node.name)
        base = OpenAIConfig(
            model=s.model, api_key=s.api_key, base_url=s.base_url,
            temperature=s.temperature, max_tokens=s.max_tokens, seed=s.seed,
            timeout=s.timeout_s, max_retries=s.max_retries, http_client=http,
        )  # fmt: skip
        use_tools = node.spec.use_tools and bool(tools)
        config = GatewayConfig(base, run, node, use_tools, g.max_tool_rounds)
        agents[node.name] = Agent(
            node.name,
            config=config,  # type: ignore[arg-type]
            tools=tools if use_tools else (),
            middleware=[Middleware(Refusals, run=run)],
        )
    return agents


class AG2Adapter:
    name = "ag2"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("ag2", "openai")
    mcp_packages = ("mcp",)
    #: no private member of AG2 is overridden or called (the MCP toolkit's module-level
    #: ``httpx2`` is replaced: :func:`install_mcp_http`)
    private_members = ()

    @asynccontextmanager
    async def _session(self, ctx: RunContext) -> AsyncIterator[RunObjects]:
        """The run's agents and HTTP client, closed on exit: :meth:`run` holds them for the
        run; :meth:`run_node` enters them once into ``ctx.resources``."""
        s = ctx.client_settings(ctx.plan.nodes[0].name)
        limits = httpx2.Limits(max_connections=16, max_keepalive_connections=16)
        # plain HTTP on loopback: no certificate store; closed to stop a request in flight
        http = httpx2.AsyncClient(verify=False, limits=limits, timeout=s.timeout_s)
        try:
            run = RunState(ctx)
            with ctx.setting_up():
                objects = RunObjects(run, build_agents(ctx, run, http))
            yield objects
        finally:
            await http.aclose()

    async def objects(self, ctx: RunContext) -> RunObjects:
        built = ctx.built.get(self.name)
        if built is None:
            built = await ctx.resources.enter_async_context(self._session(ctx))
            ctx.built[self.name] = built
        assert isinstance(built, RunObjects)
        return built

    async def run(self, ctx: RunContext) -> str:
        async with self._session(ctx) as objects:
            return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow as an AG2 network (:func:`~mastif.frameworks.ag2_network.build_network`):
        the hub's workflow channel orders the node turns, each turn ``dispatch`` (the node's
        agent in-process; under ``a2a`` an A2A request to the node's agent)."""
        async with AsyncExitStack() as stack:
            with ctx.setting_up():
                network = await stack.enter_async_context(build_network(ctx, dispatch))
            return await network.run()

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` (for orchestrators): one ``ask`` of the node's agent, built
        once per run."""
        objects = await self.objects(ctx)
        return await objects.visit(node, step, prompt)

"""OpenAI Agents SDK: every workflow node is an SDK ``Agent``; the adapter runs them in order.

Orchestration. The Agents SDK has no workflow construct. Its multi-agent constructs are
*handoffs* (a ``transfer_to_<agent>`` tool the model may call, after which the other agent
answers the same conversation) and *agents as tools* (``Agent.as_tool``: the model calls
another agent like a function). In both the model chooses, call by call, whether and where
control goes; neither can express a fixed node sequence with a bounded loop (navigate, then
observe and interact for up to ``max_steps`` rounds, leaving when ``stop_when`` matches the
observer's text, then report) without letting the model choose the order. A handoff also
carries the whole conversation on to the next agent, where the contract gives every node a
fresh prompt rendered from the run's history, and forcing one (``tool_choice`` naming the
handoff tool) costs a model call per hand-over whose only output is the hand-over itself.
So no handoff is used: the adapter chains the node sequence in plain code
(:meth:`OpenAIAgentsAdapter.orchestrate`: :func:`mastif.frameworks.orchestration.run_linear`),
and each node visit is one
``Runner.run(agent, prompt, max_turns=...)`` -- the SDK's own agent loop (model call, tool
calls, tool results, next turn, until the model answers in text). One ``Agent`` per
workflow node, each with its own ``OpenAIChatCompletionsModel`` at the node's gateway URL,
built once per run. Orchestrators (A2A, the hierarchical shape) call
:meth:`OpenAIAgentsAdapter.run_node` once per visit: it reuses the run's agents, models and
MCP connection, kept in ``ctx.built`` and closed through ``ctx.resources``.

What the SDK does by itself and keeps: no system prompt (an agent without ``instructions``
sends none) and the prompt as the user turn; its tool-call loop (``Runner.run``: the calls
of one reply run concurrently as asyncio tasks, results go back as ``tool`` messages in the
model's order); ``reset_tool_choice`` (its default); its tool definitions
(``Converter.tool_to_openai``: ``{"type": "function", "function": {name, description,
parameters, "strict": false}}``); its argument handling (``json.loads`` of the model's
text, empty text is ``{}``, anything else refused with ``Invalid JSON input for tool <name>:
<text>`` and answered with its ``default_tool_error_function``: "An error occurred while
running the tool. Please try again."); its error texts;
and under ``mcp`` its own MCP client (``MCPServerStreamableHttp``), which lists the
server's tools before every model turn (``cache_tools_list=False``, its default).

What the contract makes us change (the same for every framework):

- the turn policy, in :class:`GatewayModel` (the SDK's ``Model.get_response``): the node's
  ``tool_choice`` on the visit's first turn and ``auto`` after (the SDK's
  ``reset_tool_choice`` would send none), the tools withheld after ``max_tool_rounds``
  replies with tool calls (so that turn ends the visit in text), and none on a node without
  tools; tool calls in a reply to a request without tools are dropped, so not run.
  ``max_turns`` is ``max_tool_rounds + 1``, which the visit therefore never exceeds;
- a call of a tool that is not offered: the SDK raises ``ModelBehaviorError`` and ends the
  run by default; here its own option ``tool_not_found_behavior="return_error_to_model"``
  answers it with its text ``Tool '<name>' not found.`` and the visit goes on;
- in-process tools are ``FunctionTool`` s built from the protocol's JSON schemas with
  ``strict_json_schema=False`` (``FunctionTool``'s default ``True`` would rewrite them:
  every property required, ``additionalProperties: false``, ``strict: true``): the SDK's
  MCP tools keep the server's schema as it is (``convert_schemas_to_strict=False``, its
  default), so both protocols offer the protocol's own schemas;
- recording: the calls of one reply take places in the run's record in the model's order as
  the reply arrives (``RunRecorder.issue``); an in-process call is recorded at its place,
  a call the SDK refused (unknown name, arguments that are not a JSON object) too, with
  the SDK's text. Under ``mcp`` the MCP server records the calls that reach it.

Model: ``OpenAIChatCompletionsModel`` (Chat Completions, not the Responses API) with an
``AsyncOpenAI`` client at ``ctx.llm_base_url(node)``, ``api_key=ctx.gateway_token``, the
client's timeout, ``max_retries=0`` and the job's shared ``httpx.AsyncClient``;
``ModelSettings`` with temperature and max_tokens, the seed in ``extra_args`` (the SDK has
no seed setting); no runner-managed retry (``ModelSettings.retry`` unset). An OpenAI client
error propagates from ``Runner.run`` as it was raised.

MCP: the SDK's ``MCPServerStreamableHttp`` with ``params={"url": ctx.mcp_url,
"httpx_client_factory": ctx.mcp_http}`` (the factory times the exchanges and sends the
server's key), connected once per run through the SDK's ``MCPServerManager`` (its worker
task keeps connect and cleanup in one task, whichever task closes the run), and given to
every node agent with tools (``mcp_servers``). Its ``ClientSession`` declares the MCP SDK's
default ``clientInfo`` (``mcp`` / ``0.1.0``). The session read timeout is the run's bound
(``generation.timeout_s``; the SDK's default of 5 s would cut a slow tool short). With MCP v1
the SDK opens its streams with the MCP SDK's deprecated ``streamablehttp_client``; as for the
other frameworks, :class:`StreamableHttpServer` opens the same client through the current
one (:mod:`mastif.frameworks.mcp_transport`: same factory, URL and headers).

Threads: none. The SDK is asyncio-native; a visit runs in the run's task, and cancelling it
(timeout) cancels the request in flight and the tool tasks of the turn.

Telemetry: the SDK traces every run by default and exports the traces to api.openai.com
from a background thread (``BatchTraceProcessor`` / ``BackendSpanExporter``). Switched off in
code when this module loads (:func:`switch_off_tracing`): the exporting processor is
removed from the global trace provider (``set_trace_processors([])``, so no exporter
thread can start) and tracing is disabled globally (``set_tracing_disabled(True)``); every
run also passes ``RunConfig(tracing_disabled=True)``. No other connection is opened.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    ModelBehaviorError,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    ToolErrorFormatterArgs,
    default_tool_error_function,
    set_trace_processors,
    set_tracing_disabled,
)
from agents.mcp import MCPServerManager, MCPServerStreamableHttp
from agents.models.interface import ModelTracing
from agents.tool_context import ToolContext
from openai import AsyncOpenAI
from openai.types.responses import ResponseFunctionToolCall

from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.mcp_transport import streamable_http
from mastif.frameworks.orchestration import run_linear
from mastif.frameworks.plan import PlannedNode
from mastif.tools import ToolResult

#: the SDK's own marker of a refusal of a call's arguments (``tool._parse_function_tool_json_input``
#: and ``MCPUtil.invoke_mcp_tool`` raise ``ModelBehaviorError`` with this text)
INVALID_JSON = "Invalid JSON input for tool"


def switch_off_tracing() -> None:
    """No trace leaves the machine: the SDK's exporting processor removed, tracing off."""
    set_trace_processors([])
    set_tracing_disabled(True)


switch_off_tracing()


@dataclass
class _Visit:
    """The node visit in progress (one ``Runner.run``)."""

    node: PlannedNode
    step: int
    tool_rounds: int = 0  # replies with tool calls answered so far
    #: call id -> (its place in the run's record, the model's argument text)
    calls: dict[str, tuple[int, str]] = field(default_factory=dict)


class _Run:
    """A run's SDK objects: one agent per workflow node, the visit in progress."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.agents: dict[str, Agent[Any]] = {}
        self.visit_state: _Visit | None = None
        self.offered: list[str] = []
        self.run_config = RunConfig(
            tracing_disabled=True,
            trace_include_sensitive_data=False,
            tool_not_found_behavior="return_error_to_model",
            tool_error_formatter=self.tool_not_found,
        )

    @property
    def current(self) -> _Visit:
        assert self.visit_state is not None, "no node visit in progress"
        return self.visit_state

    # -- recording -------------------------------------------------------------------------

    def record_refusal(self, call_id: str, name: str, error: str) -> None:
        """A call the SDK answered itself (no tool ran), recorded at its place."""
        visit = self.current
        place, arguments = visit.calls.get(call_id, (None, ""))
        result = ToolResult(False, "", error)
        self.ctx.recorder.tool_call(visit.node.name, visit.step, name, arguments, result, place)

    def tool_not_found(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        """``RunConfig.tool_error_formatter``: record a call of a tool that is not offered;
        the model reads the SDK's own text (``None``: its default message)."""
        if args.kind == "tool_not_found":
            error = (
                f"unknown tool {args.tool_name!r}; offered: {sorted(self.offered)} "
                f"(Agents SDK: {args.default_message})"
            )
            self.record_refusal(args.call_id, args.tool_name, error)
        return None

    def mcp_failure(self, context: Any, error: Exception) -> str:
        """The MCP tools' ``failure_error_function``: the SDK's default text; a call whose
        arguments it refused never reached the server, so it is recorded here."""
        if isinstance(error, ModelBehaviorError) and str(error).startswith(INVALID_JSON):
            if isinstance(context, ToolContext):
                self.record_refusal(context.tool_call_id, context.tool_name, str(error))
        return default_tool_error_function(context, error)

    # -- a visit ---------------------------------------------------------------------------

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: one ``Runner.run`` of its agent."""
        self.ctx.at(node.name, step)
        self.visit_state = _Visit(node, step)
        try:
            result = await Runner.run(
                self.agents[node.name],
                prompt,
                max_turns=self.ctx.generation.max_tool_rounds + 1,
                run_config=self.run_config,
            )
        finally:
            self.visit_state = None
        return str(result.final_output or "")


class GatewayModel(OpenAIChatCompletionsModel):
    """The SDK's Chat Completions model at our gateway, with the per-node turn policy."""

    def __init__(self, run: _Run, node: PlannedNode, client: AsyncOpenAI, model: str) -> None:
        super().__init__(model=model, openai_client=client)
        self.run, self.node = run, node

    async def get_response(  # type: ignore[override]
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        **kwargs: Any,
    ) -> Any:
        visit = self.run.current
        limit = self.run.ctx.generation.max_tool_rounds
        offer = tools if self.node.spec.use_tools and visit.tool_rounds < limit else []
        # the node's tool_choice on its first turn, auto after; none without tools
        first = visit.tool_rounds == 0
        choice = (self.node.spec.tool_choice if first else "auto") if offer else None
        settings = replace(model_settings, tool_choice=choice)
        response = await super().get_response(
            system_instructions, input, settings, offer, output_schema, handoffs, tracing,
            **kwargs,
        )  # fmt: skip
        calls = [i for i in response.output if isinstance(i, ResponseFunctionToolCall)]
        if calls and not offer:  # tool calls in a reply to a request without tools: not run
            response.output = [i for i in response.output if i not in calls]
        elif calls:
            visit.tool_rounds += 1
            for call in calls:  # the reply's calls take their places in the model's order
                visit.calls[call.call_id] = (self.run.ctx.recorder.issue(), call.arguments)
        return response


def local_tool(run: _Run, spec: Any) -> FunctionTool:
    """A protocol tool as an SDK ``FunctionTool`` with the protocol's own JSON schema; each
    call recorded at its place in the run's record."""
    name = spec.name

    async def invoke(context: ToolContext[Any], text: str) -> str:
        ctx, visit = run.ctx, run.current
        # the SDK's own parsing of a function tool's arguments (tool.py)
        try:
            arguments = json.loads(text) if text else {}
            refused = None if isinstance(arguments, dict) else ": expected a JSON object"
            cause: Exception | None = None
        except json.JSONDecodeError as exc:
            refused, cause = f": {text}", exc
        if refused is not None:
            error = ModelBehaviorError(f"{INVALID_JSON} {name}{refused}")
            error.__cause__ = cause
            run.record_refusal(context.tool_call_id, name, str(error))
            return default_tool_error_function(context, error)
        place = visit.calls.get(context.tool_call_id, (None, ""))[0]
        result = await ctx.call_tool(visit.node.name, visit.step, name, arguments, place)
        # a failure reads as the tool's error text, as an MCP server's isError result does
        return result.output if result.ok else (result.error or "")

    return FunctionTool(
        name=name,
        description=spec.description,
        params_json_schema=spec.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


class StreamableHttpServer(MCPServerStreamableHttp):
    """The SDK's streamable-HTTP MCP server client, its streams opened with the MCP SDK's
    current client (:mod:`mastif.frameworks.mcp_transport`) instead of the deprecated
    ``streamablehttp_client`` the SDK calls with MCP v1: the same factory, URL, headers and
    ``terminate_on_close``; the session, tool listing and calls are the SDK's."""

    def create_streams(self) -> Any:
        params: dict[str, Any] = dict(self.params)
        return streamable_http(
            params["url"],
            headers=params.get("headers"),
            terminate_on_close=params.get("terminate_on_close", True),
            **({"httpx_client_factory": params["httpx_client_factory"]}
               if "httpx_client_factory" in params else {}),
        )  # fmt: skip


async def connect_mcp(run: _Run, stack: AsyncExitStack) -> MCPServerStreamableHttp:
    """The SDK's own MCP client on the run's MCP server, connected once for the run."""
    ctx = run.ctx
    params: dict[str, Any] = {"url": ctx.mcp_url}
    if ctx.mcp_http is not None:
        params["httpx_client_factory"] = ctx.mcp_http
    server = StreamableHttpServer(
        params,  # type: ignore[arg-type]
        name="mastif_tools",
        client_session_timeout_seconds=ctx.generation.timeout_s,
        failure_error_function=run.mcp_failure,
    )
    await stack.enter_async_context(
        # a cancelled run (timeout) must stop here too: the manager would swallow it
        MCPServerManager(
            [server], strict=True, connect_in_parallel=True, suppress_cancelled_error=False
        )
    )
    tools = await server.list_tools()
    run.offered = [t.name for t in tools]
    return server


async def build_run(ctx: RunContext, stack: AsyncExitStack) -> _Run:
    """One SDK agent per workflow node, each with its model at the node's gateway URL; the
    tools (or the MCP connection) shared by the nodes that use them."""
    run = _Run(ctx)
    uses_tools = bool(ctx.tools.tool_specs()) and any(n.spec.use_tools for n in ctx.plan.nodes)
    tools: list[FunctionTool] = []
    servers: list[MCPServerStreamableHttp] = []
    if uses_tools and ctx.mcp_url is not None:
        servers = [await connect_mcp(run, stack)]
    elif uses_tools:
        tools = [local_tool(run, s) for s in ctx.tools.tool_specs()]
        run.offered = [t.name for t in tools]
    for node in ctx.plan.nodes:
        s = ctx.client_settings(node.name)
        client = AsyncOpenAI(
            base_url=s.base_url, api_key=s.api_key, http_client=s.http_async,
            **s.client_options(),
        )  # fmt: skip
        if s.http_async is None:  # its own HTTP client: closed with the run
            stack.push_async_callback(client.close)
        with_tools = node.spec.use_tools and uses_tools
        run.agents[node.name] = Agent(
            name=node.name,
            model=GatewayModel(run, node, client, s.model),
            model_settings=ModelSettings(
                temperature=s.temperature,
                max_tokens=s.max_tokens,
                tool_choice=node.spec.tool_choice if with_tools else None,
                extra_args={"seed": s.seed},
            ),
            tools=list(tools) if with_tools else [],
            mcp_servers=list(servers) if with_tools else [],
        )
    return run


class OpenAIAgentsAdapter:
    name = "openai_agents"
    #: the distributions a run uses (mastif.core.provenance); under mcp also the MCP SDK
    packages = ("openai-agents", "openai")
    mcp_packages = ("mcp",)
    #: no private member of the SDK is overridden or called
    private_members = ()

    @asynccontextmanager
    async def _session(self, ctx: RunContext) -> AsyncIterator[_Run]:
        """The run's agents (one per workflow node) and MCP connection, closed on exit.
        :meth:`run` holds it for the run; :meth:`run_node` enters it once per run into
        ``ctx.resources``."""
        async with AsyncExitStack() as stack:
            with ctx.setting_up():
                run = await build_run(ctx, stack)
            yield run

    async def objects(self, ctx: RunContext) -> _Run:
        """The run's agents for :meth:`run_node`: built on the run's first visit, kept in
        ``ctx.built`` and closed with ``ctx.resources`` when the run ends."""
        built = ctx.built.get(self.name)
        if built is None:
            built = await ctx.resources.enter_async_context(self._session(ctx))
            ctx.built[self.name] = built
        assert isinstance(built, _Run)
        return built

    async def run(self, ctx: RunContext) -> str:
        async with self._session(ctx) as run:
            return await self.orchestrate(ctx, run.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The node sequence, each visit handed to ``dispatch`` (in :meth:`run` the node's
        agent; under ``a2a`` an A2A request to the node's agent). The SDK cannot express the
        fixed sequence with a bounded loop (handoffs let the model choose; see the module
        docstring), so the nodes are chained in plain code, as the SDK's own docs chain agents
        ("orchestrating via code"): mastif's one plain-code chain (``run_linear``: the nodes
        before the loop once, the loop nodes in order for up to max_steps rounds, stop_when
        ending it at once, then the nodes after it)."""
        return await run_linear(ctx, dispatch)

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators): one run of the
        node's agent, built once per run (:meth:`objects`)."""
        run = await self.objects(ctx)
        return await run.visit(node, step, prompt)

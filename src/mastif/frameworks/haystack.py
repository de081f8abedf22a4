"""Haystack: the linear workflow as a Haystack ``Pipeline`` with a cycle; each node visit is
a Haystack ``Agent`` run.

Orchestration. :func:`build_pipeline` builds one ``haystack.Pipeline`` per run (run with
``Pipeline.run_async``): one component per workflow node (:class:`NodeStep`), the nodes
before the loop connected in a line, then the loop: a ``BranchJoiner`` (Haystack's
component for joining a loop's branches) into the first loop node, each loop node followed
by a ``ConditionalRouter`` whose routes are ``exit`` (the node's ``stop_when`` matched --
a custom Jinja filter -- or, after the last loop node, ``max_steps`` rounds are done) and
``next`` (the next loop node; after the last one back to the joiner with the round number
plus one), then a second ``BranchJoiner`` that collects the routers' ``exit`` outputs into
the nodes after the loop. Haystack's pipeline runtime schedules the components and follows
the cycle; mastif's ``drive_workflow`` is not used. What flows along the edges is the round
number; the history each prompt shows is the run's record (``visit_node`` renders it), so
prompts are those of every other framework. Under ``a2a`` :meth:`HaystackAdapter.orchestrate`
builds the same pipeline with each node component's visit an A2A request to the node's agent
(``visit_node`` with the orchestrator's ``dispatch``).

A node visit is one ``Agent.run_async`` (``haystack.components.agents.Agent``: Haystack's own
loop of chat-generator calls and tool execution), one agent per workflow node, built once per
run and kept in ``ctx.built`` for ``run_node`` (A2A node agents, the hierarchical shape). The
prompt is the agent's only message; no system prompt (the Agent adds none of its own).

What Haystack does by itself and keeps: tools on the wire as ``Tool.tool_spec`` (the tools'
names, descriptions and JSON schemas as they are, not strict); its argument parsing (JSON; a
call whose arguments are not JSON is dropped by ``OpenAIChatGenerator`` with a logged warning
and never answered, so the model is not told); the Agent's refusal of an unknown tool name
(a tool message "Tool 'x' not found. Available tools: ..."), written before the results of
the reply's other calls; a failing tool written back as its ``ToolInvocationError`` text
("Failed to invoke Tool `x` with parameters {...}. Error: ..."); the calls of one reply run
concurrently (``tool_concurrency_limit`` 4); under ``mcp`` a tool result is the MCP
``CallToolResult`` as JSON (``model_dump_json``), as mcp-haystack returns it; the Agent's
recovery turn after a reply whose calls were all dropped.

What the contract makes us change (:class:`GatewayChatGenerator`, a subclass of Haystack's
``OpenAIChatGenerator``): the node's ``tool_choice`` on a visit's first turn and ``auto``
after (``generation_kwargs``); once ``max_tool_rounds`` model turns were made the next
request goes out without tools, and tool calls in its reply are dropped (not run); the
Agent's ``max_agent_steps`` is ``max_tool_rounds + 1`` (its backstop). Recording: calls the
generator dropped for their JSON are recorded as failed with Haystack's warning text (the
generator's OpenAI client hands us the completion it returned, :class:`_SeenCompletions`),
unknown names by a ``before_tool`` hook of the Agent (Haystack's hook point) with the
Agent's own text; both before the reply's valid calls, in the order Haystack writes its tool
messages; the valid calls take their places as they start, in the model's order.

Model: ``OpenAIChatGenerator`` at ``ctx.llm_base_url(node)``, ``api_key`` the gateway token
(``Secret.from_token``), ``temperature``/``max_tokens``/``seed`` as ``generation_kwargs``,
the client's timeout, ``max_retries=0``, no streaming. Its ``AsyncOpenAI`` client is built
here on the job's shared HTTP client (the generator only takes ``http_client_kwargs``, which
would build an httpx client, and an SSL context, per generator); without shared clients
Haystack builds its own, closed with the run.

Tools: in-process, Haystack ``Tool`` s with the protocol's names, descriptions and JSON
schemas whose ``async_function`` calls ``ctx.call_tool``. Under ``mcp``, mcp-haystack's
``MCPToolset`` on ``StreamableHttpServerInfo(url=ctx.mcp_url)``, listed once per run. Its
client cannot take an httpx client or factory (``StreamableHttpClient.connect`` builds one
with the MCP SDK's ``create_mcp_http_client``), so :class:`TimedServerInfo` (a
``StreamableHttpServerInfo`` whose ``create_client``, the server info's factory method,
returns :class:`TimedStreamableHttpClient`) connects the same way on an httpx client from
``ctx.mcp_http``: the exchanges are timed and the server's key is sent. The MCP session and
its calls live in mcp-haystack's own background event loop (``AsyncExecutor``, one daemon
thread per process); the client's identity is the MCP SDK's default (``clientInfo``
``{"name": "mcp", "version": "0.1.0"}``: mcp-haystack sets none).

Threads and async: the pipeline, the agents, the generator and in-process tools are async on
the run's loop. Haystack runs a sync tool (the MCP toolset's) with ``asyncio.to_thread``;
here each MCP tool's own function runs in the run's worker thread pool instead
(:func:`_in_run_pool`: blocked MCP calls must not fill the loop's default executor, where the
MCP server runs the tools it serves). A cancelled run (timeout) cancels the pipeline's task
and with it the agent's request in flight; the run's close stops the MCP session (a call in
flight then fails) and shuts the pool down.

Telemetry: Haystack sends anonymous usage events to PostHog when ``haystack.telemetry`` is
imported with ``HAYSTACK_TELEMETRY_ENABLED`` unset. ``HAYSTACK_TELEMETRY_ENABLED=False`` is
set before Haystack is imported here (so no ``Telemetry`` is made and no
``~/.haystack/config.yaml`` written), and ``posthog.disabled = True`` (PostHog's switch:
every capture is dropped, should Haystack have been imported with telemetry on elsewhere).
Haystack's tracing is left on its ``NullTracer`` (``tracing.disable_tracing()``); content
tracing stays off.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace
from typing import Any

# read when haystack.telemetry is imported: off before Haystack is
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

import openai  # noqa: E402
import posthog  # noqa: E402
from haystack import Pipeline, component, tracing  # noqa: E402
from haystack.components.agents import Agent  # noqa: E402
from haystack.components.agents.tool_calling import ToolNotFoundException  # noqa: E402
from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.components.joiners import BranchJoiner  # noqa: E402
from haystack.components.routers import ConditionalRouter  # noqa: E402
from haystack.core.errors import PipelineRuntimeError  # noqa: E402
from haystack.dataclasses import ChatMessage, ChatRole, StreamingCallbackT  # noqa: E402
from haystack.tools import Tool, ToolsType  # noqa: E402
from haystack.utils import Secret  # noqa: E402
from haystack_integrations.tools.mcp import MCPToolset, StreamableHttpServerInfo  # noqa: E402
from haystack_integrations.tools.mcp.mcp_tool import MCPClient, StreamableHttpClient  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from mastif.core.provenance import PrivateMember, private_members_of  # noqa: E402
from mastif.frameworks.base import Dispatch, RunContext  # noqa: E402
from mastif.frameworks.mcp_transport import HTTPX  # noqa: E402
from mastif.frameworks.orchestration import visit_node  # noqa: E402
from mastif.frameworks.plan import PlannedNode, WorkflowPlan  # noqa: E402

posthog.disabled = True  # PostHog drops every capture (Haystack's telemetry goes nowhere)
tracing.disable_tracing()  # Haystack's tracer: the no-op NullTracer

#: what Haystack's OpenAIChatGenerator logs when it drops a call for its arguments
MALFORMED_JSON = (
    "OpenAI returned a malformed JSON string for tool call arguments. This tool call will be "
    "skipped."
)

#: the chat completions the generator's client returned during the current request
_completions: ContextVar[list[Any] | None] = ContextVar("mastif_haystack_seen", default=None)


# -- model ---------------------------------------------------------------------------------


class _SeenCompletions:
    """The OpenAI client's ``chat.completions``, each completion kept for the request that
    asked for it: the generator drops calls with malformed arguments without a trace."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def create(self, **kwargs: Any) -> Any:
        completion = await self._inner.create(**kwargs)
        seen = _completions.get()
        if seen is not None:
            seen.append(completion)
        return completion

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _ObservedClient:
    """An ``AsyncOpenAI`` client as the generator uses it (``chat.completions``, ``close``)."""

    def __init__(self, client: openai.AsyncOpenAI) -> None:
        self.client = client
        self.chat = SimpleNamespace(completions=_SeenCompletions(client.chat.completions))

    async def close(self) -> None:
        await self.client.close()


class GatewayChatGenerator(OpenAIChatGenerator):
    """Haystack's OpenAI chat generator at the node's gateway URL, with the turn policy."""

    def __init__(self, ctx: RunContext, node: PlannedNode) -> None:
        s = ctx.client_settings(node.name)
        super().__init__(
            api_key=Secret.from_token(s.api_key), model=s.model, api_base_url=s.base_url,
            generation_kwargs=s.sampling(), timeout=s.timeout_s, max_retries=s.max_retries,
        )  # fmt: skip
        self.ctx, self.node = ctx, node
        client = openai.AsyncOpenAI(
            api_key=s.api_key, base_url=s.base_url, http_client=s.http_async, **s.client_options()
        )
        if s.http_async is None:  # its own HTTP client: closed with the run
            ctx.resources.push_async_callback(client.close)
        self.async_client = _ObservedClient(client)  # type: ignore[assignment]

    def run(  # type: ignore[override]
        self,
        messages: list[ChatMessage] | str,
        streaming_callback: StreamingCallbackT | None = None,
        generation_kwargs: dict[str, Any] | None = None,
        *,
        tools: ToolsType | None = None,
        tools_strict: bool | None = None,
    ) -> dict[str, list[ChatMessage]]:
        raise RuntimeError("the node agents run with Agent.run_async")

    async def run_async(  # type: ignore[override]
        self,
        messages: list[ChatMessage] | str,
        streaming_callback: StreamingCallbackT | None = None,
        generation_kwargs: dict[str, Any] | None = None,
        *,
        tools: ToolsType | None = None,
        tools_strict: bool | None = None,
    ) -> dict[str, list[ChatMessage]]:
        assert isinstance(messages, list)  # the Agent's conversation
        turn = sum(1 for m in messages if m.is_from(ChatRole.ASSISTANT))
        offer = bool(tools) and turn < self.ctx.generation.max_tool_rounds
        kwargs = dict(generation_kwargs or {})
        if offer:  # tool_choice applies to the visit's first turn; later turns may answer in text
            kwargs["tool_choice"] = self.node.spec.tool_choice if turn == 0 else "auto"
        seen: list[Any] = []
        token = _completions.set(seen)
        try:
            result = await super().run_async(
                messages, streaming_callback, kwargs, tools=tools if offer else [],
                tools_strict=tools_strict,
            )  # fmt: skip
        finally:
            _completions.reset(token)
        if not offer:  # calls in a reply to a request without tools are not run
            result["replies"] = [
                ChatMessage.from_assistant(text=r.text, meta=r.meta) for r in result["replies"]
            ]
        else:
            self.record_dropped(seen, result["replies"])
        return result

    def record_dropped(self, seen: list[Any], replies: list[ChatMessage]) -> None:
        """Record the calls the generator dropped for their arguments (not JSON)."""
        kept = {call.id for reply in replies for call in reply.tool_calls}
        for completion in seen:
            for choice in completion.choices:
                for call in choice.message.tool_calls or []:
                    function = getattr(call, "function", None)
                    if function is None or call.id in kept:
                        continue
                    self.ctx.record_failed_tool_call(
                        self.ctx.node, self.ctx.step, function.name, function.arguments,
                        f"arguments are not valid JSON (Haystack: {MALFORMED_JSON})",
                    )  # fmt: skip


# -- tools ---------------------------------------------------------------------------------


class RecordRefusals:
    """The Agent's ``before_tool`` hook: records the calls the Agent will refuse (a tool name
    it was not given), with its own text, before any tool runs."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def run(self, state: Any) -> None:
        offered = [t.name for t in state.data.get("tools") or []]
        messages = state.data.get("messages") or []
        for call in messages[-1].tool_calls if messages else []:
            if call.tool_name not in offered:
                said = ToolNotFoundException(call.tool_name, offered)
                self.ctx.record_failed_tool_call(
                    self.ctx.node, self.ctx.step, call.tool_name, call.arguments,
                    f"unknown tool {call.tool_name!r}; offered: {sorted(offered)} (Haystack: {said})",
                )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"type": f"{__name__}.RecordRefusals", "data": {}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecordRefusals:
        raise NotImplementedError("built per run")


def local_tools(ctx: RunContext) -> list[Tool]:
    """The protocol's tools as Haystack Tools; each call goes through ``ctx.call_tool``,
    recorded at the visit in progress. A failed call raises, so Haystack writes it back as
    its ``ToolInvocationError`` text."""

    def make(spec: Any) -> Tool:
        async def call(**arguments: Any) -> str:
            result = await ctx.call_tool(ctx.node, ctx.step, spec.name, arguments)
            if not result.ok:
                raise RuntimeError(result.error or "the tool failed")
            return result.output

        return Tool(spec.name, spec.description, spec.parameters, async_function=call)

    return [make(s) for s in ctx.tools.tool_specs()]


@dataclass
class TimedServerInfo(StreamableHttpServerInfo):
    """mcp-haystack's streamable-HTTP server info whose client is built on ``http_factory``
    (``ctx.mcp_http``: the MCP SDK's ``httpx_client_factory``)."""

    #: returns an AsyncClient of the MCP SDK's HTTP library (httpx, or httpx2 under SDK 2)
    http_factory: Callable[..., Any] | None = None

    def create_client(self) -> MCPClient:
        return TimedStreamableHttpClient(self)


class TimedStreamableHttpClient(StreamableHttpClient):
    """mcp-haystack's streamable-HTTP client, connected as it connects (same headers and
    timeout, the MCP SDK's ``streamable_http_client``, its own session set-up) on an httpx
    client from the server info's factory, closed with the session."""

    def __init__(self, server_info: TimedServerInfo) -> None:
        super().__init__(
            server_info, max_retries=server_info.max_retries,
            base_delay=server_info.base_delay, max_delay=server_info.max_delay,
        )  # fmt: skip
        self.http_factory = server_info.http_factory

    async def connect(self) -> list[Any]:
        if self.http_factory is None:
            return await super().connect()
        headers = self.headers or (
            {"Authorization": f"Bearer {self.token}"} if self.token else None
        )
        # the MCP SDK's own httpx line (httpx2 under SDK 2)
        http = self.http_factory(headers=headers, timeout=HTTPX.Timeout(self.timeout), auth=None)
        await self.exit_stack.enter_async_context(http)
        streams = await self.exit_stack.enter_async_context(
            streamable_http_client(self.url, http_client=http)
        )
        return await self._initialize_session_with_transport(streams, f"HTTP server at {self.url}")


def _in_run_pool(pool: ThreadPoolExecutor, tool: Tool) -> Tool:
    """``tool`` (an MCP toolset's: sync, Haystack's MCP call) run in the run's worker pool."""
    function = tool.function
    assert function is not None

    async def invoke(**arguments: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, partial(function, **arguments))

    return Tool(
        tool.name, tool.description, tool.parameters, function=function, async_function=invoke
    )


async def mcp_tools(ctx: RunContext) -> list[Tool]:
    """The MCP server's tools through mcp-haystack's ``MCPToolset`` (one ``tools/list`` per
    run), closed with the run."""
    assert ctx.mcp_url is not None
    info = TimedServerInfo(url=ctx.mcp_url, http_factory=ctx.mcp_http)
    toolset = MCPToolset(server_info=info)
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"haystack-{ctx.run_id[:8]}")

    async def close() -> None:
        pool.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(toolset.close)  # ends the MCP session: a call in flight fails

    ctx.resources.push_async_callback(close)
    # its connect blocks until mcp-haystack's loop has the session: not on the run's loop,
    # where the MCP server answers
    await asyncio.get_running_loop().run_in_executor(pool, toolset.warm_up)
    return [_in_run_pool(pool, t) for t in toolset.tools]


# -- agents --------------------------------------------------------------------------------


@dataclass
class RunObjects:
    """What a run builds once: one Agent per workflow node (with its generator), the tools."""

    ctx: RunContext
    agents: dict[str, Agent] = field(default_factory=dict)

    @classmethod
    async def build(cls, ctx: RunContext) -> RunObjects:
        nodes = ctx.plan.nodes
        tools: list[Tool] = []
        if ctx.tools.tool_specs() and any(n.spec.use_tools for n in nodes):
            tools = await mcp_tools(ctx) if ctx.mcp_url is not None else local_tools(ctx)
        objects = cls(ctx)
        for node in nodes:
            objects.agents[node.name] = Agent(
                chat_generator=GatewayChatGenerator(ctx, node),
                tools=list(tools) if node.spec.use_tools and tools else None,
                max_agent_steps=ctx.generation.max_tool_rounds + 1,
                hooks={"before_tool": [RecordRefusals(ctx)]},
            )
        return objects

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One node visit: one run of the node's Agent on the prompt, ending in text."""
        self.ctx.at(node.name, step)
        result = await self.agents[node.name].run_async(messages=[ChatMessage.from_user(prompt)])
        last = result.get("last_message")
        return (last.text or "") if last is not None and last.is_from(ChatRole.ASSISTANT) else ""


# -- the pipeline --------------------------------------------------------------------------


@component
class NodeStep:
    """A workflow node as a pipeline component: one visit (``visit_node``: the prompt
    rendered from the run's record, the visit dispatched, its text recorded) per run of the
    component; ``step`` is the loop's round (1 outside the loop)."""

    def __init__(self, ctx: RunContext, dispatch: Dispatch, node: PlannedNode) -> None:
        self.ctx, self.dispatch, self.node = ctx, dispatch, node

    @component.output_types(step=int, text=str)
    def run(self, step: int) -> dict[str, Any]:
        raise RuntimeError("the workflow pipeline runs with Pipeline.run_async")

    @component.output_types(step=int, text=str)
    async def run_async(self, step: int) -> dict[str, Any]:
        text = await visit_node(
            self.ctx, self.dispatch, self.node, step if self.node.spec.loop else 1
        )
        return {"step": step, "text": text}


def loop_router(node: PlannedNode, last: bool, max_steps: int) -> ConditionalRouter:
    """After a loop node: ``exit`` when its ``stop_when`` matched (or, after the last loop
    node, the round was the ``max_steps``-th), else ``next`` (the next round's number after
    the last loop node)."""
    leave = "text | stops" + (f" or step >= {max_steps}" if last else "")
    routes = [
        {"condition": "{{ " + leave + " }}", "output": "{{ step }}",
         "output_name": "exit", "output_type": int},
        {"condition": "{{ True }}", "output": "{{ step + 1 }}" if last else "{{ step }}",
         "output_name": "next", "output_type": int},
    ]  # fmt: skip
    return ConditionalRouter(routes, custom_filters={"stops": node.stops_loop})  # type: ignore[arg-type]


def build_pipeline(ctx: RunContext, dispatch: Dispatch, plan: WorkflowPlan | None = None) -> Any:
    """The workflow as a Haystack Pipeline (see the module docstring); returns it and the
    input that starts it."""
    plan = plan or ctx.plan
    loop = plan.loop if plan.max_steps >= 1 else ()
    pipe = Pipeline(max_runs_per_component=max(100, plan.max_steps + 1))
    for node in plan.nodes:
        if node.spec.loop and not loop:
            continue
        pipe.add_component(node.name, NodeStep(ctx, dispatch, node))
    line = [n.name for n in plan.before]
    for a, b in zip(line, line[1:], strict=False):
        pipe.connect(f"{a}.step", f"{b}.step")
    tail = f"{line[-1]}.step" if line else None
    if loop:
        pipe.add_component("loop_entry", BranchJoiner(int))
        pipe.add_component("loop_exit", BranchJoiner(int))
        if tail:
            pipe.connect(tail, "loop_entry.value")
        pipe.connect("loop_entry.value", f"{loop[0].name}.step")
        for i, node in enumerate(loop):
            last = i == len(loop) - 1
            router = f"{node.name}__route"
            pipe.add_component(router, loop_router(node, last, plan.max_steps))
            pipe.connect(f"{node.name}.step", f"{router}.step")
            pipe.connect(f"{node.name}.text", f"{router}.text")
            pipe.connect(
                f"{router}.next", "loop_entry.value" if last else f"{loop[i + 1].name}.step"
            )
            pipe.connect(f"{router}.exit", "loop_exit.value")
        tail = "loop_exit.value"
    after = [n.name for n in plan.after]
    for a, b in zip([tail, *(f"{n}.step" for n in after)], after, strict=False):
        if a is not None:
            pipe.connect(a, f"{b}.step")
    first = line[0] if line else ("loop_entry" if loop else after[0])
    start = {first: {"value": 1}} if first == "loop_entry" else {first: {"step": 1}}
    return pipe, start


def _unwrapped(exc: BaseException) -> BaseException:
    """The error a pipeline component raised, out of Haystack's ``PipelineRuntimeError``."""
    while isinstance(exc, PipelineRuntimeError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


_mcp_haystack = private_members_of("mcp-haystack")

#: what this adapter calls of mcp-haystack that it does not promise
PRIVATE_MEMBERS: tuple[PrivateMember, ...] = (
    _mcp_haystack(MCPClient, "_initialize_session_with_transport",
                  "calls it to set up the MCP session as StreamableHttpClient.connect does"),
)  # fmt: skip


class HaystackAdapter:
    name = "haystack"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("haystack-ai", "openai")
    mcp_packages = ("mcp-haystack", "mcp")
    private_members = PRIVATE_MEMBERS

    async def objects(self, ctx: RunContext) -> RunObjects:
        """The run's agents: built on the run's first need, kept in ``ctx.built``."""
        built = ctx.built.get(self.name)
        if built is None:
            with ctx.setting_up():
                built = ctx.built[self.name] = await RunObjects.build(ctx)
        assert isinstance(built, RunObjects)
        return built

    async def run(self, ctx: RunContext) -> str:
        """The workflow's pipeline, each node visit a run of the node's Agent."""
        objects = await self.objects(ctx)
        return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow's Haystack Pipeline, each node component's visit handed to
        ``dispatch`` (in :meth:`run` the node's Agent; under ``a2a`` an A2A request to the
        node's agent)."""
        with ctx.setting_up():
            pipe, start = build_pipeline(ctx, dispatch)
        try:
            await pipe.run_async(start)
        except PipelineRuntimeError as exc:
            raise _unwrapped(exc) from exc
        outputs = ctx.recorder.node_outputs
        return outputs[-1].text if outputs else ""

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's
        Agent for the node."""
        objects = await self.objects(ctx)
        return await objects.visit(node, step, prompt)

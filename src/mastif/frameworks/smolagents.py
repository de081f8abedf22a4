"""smolagents: every workflow node is a ``ToolCallingAgent``; the adapter runs them in order.

Orchestration. smolagents has one multi-agent construct, *managed agents*: a manager agent
whose model decides, call by call, which sub-agent to hand a request to. It cannot express
a fixed node sequence with a bounded loop (navigate, then observe and interact for up to
``max_steps`` rounds, leaving when ``stop_when`` matches, then report) without letting the
model choose the order and without extra model calls for the manager. So the adapter
chains the node sequence in plain code (:meth:`SmolagentsAdapter.orchestrate`:
:func:`mastif.frameworks.orchestration.run_linear`), and each node visit is one
``ToolCallingAgent.run`` -- smolagents' own step loop (``MultiStepAgent._run_stream``):
model call, tool calls, observation, next step, until a final answer or ``max_steps``.
One agent per workflow node, each with its own ``OpenAIModel`` at the node's gateway URL,
built once per run; a visit is ``agent.run(prompt, reset=True)``. Orchestrators (A2A, the
hierarchical shape) call :meth:`SmolagentsAdapter.run_node` once per visit: it reuses the
run's agents, models, worker thread and MCP client, built on the run's first visit, kept in
``ctx.built`` and closed through ``ctx.resources`` when the run ends.

What smolagents does by itself and keeps: its system prompt (``toolcalling_agent.yaml``: an
"expert assistant" ReAct prompt with examples and the list of the agent's tools, including
its ``final_answer`` tool), its user turn ``New task:\\n<our prompt>``, the stop sequences
``Observation:`` and ``Calling tools:``, its tool schemas (``inputs`` in smolagents' type
system, rendered by ``get_tool_json_schema``: every property in ``required`` unless
``nullable``), its argument handling (``parse_json_if_needed``: text that is not JSON is
passed to the tool as it is, positionally, i.e. as its first input;
``validate_tool_arguments``), the execution of one reply's calls (one call directly, several
in a thread pool of ``max_tool_threads``, default size), how results go back to the model (as
text: an assistant turn ``Calling tools:\\n[...]`` and a user turn ``Observation:\\n...``; a
call that fails or is refused ends the step with an error, which the model reads in its next
user turn, "Error: ... Now let's retry: ..."), its error texts (``Unknown tool ...``, ``Error
executing tool ...``), and the forced final answer call (``provide_final_answer``) should
``max_steps`` run out.

What the contract makes us change (the same for every framework):

- a reply without tool calls is the node's answer (smolagents would parse it as a JSON
  action, call a failed parse an error and ask again): ``parse_tool_calls`` turns it into
  a call of smolagents' own ``final_answer`` tool, so the step loop ends the run there;
- ``final_answer`` is not offered on the wire (the protocol's tools are, with the node's
  ``tool_choice`` on its first turn and ``auto`` after; smolagents always sends
  ``required``), and a node without tools sends none;
- ``max_tool_rounds``: the agent's ``max_steps`` is ``max_tool_rounds + 1`` (one model call
  per step), and once ``max_tool_rounds`` replies with tool calls were answered the next
  request goes out without tools, so that step ends in text (tool calls in a reply to a
  request without tools are not run);
- recording: calls smolagents refuses before a tool runs (unknown name, arguments
  ``validate_tool_arguments`` rejects, text its MCP client will not send) are recorded as
  failed calls with its error text; the calls of one reply take their places in the run's
  record in the model's order although they run concurrently (``smolagents_tools.Reply``);
- messages are flattened to text (``flatten_messages_as_text=True``, a smolagents option).

Model: ``OpenAIModel`` at ``ctx.llm_base_url(node)`` with ``api_key=ctx.gateway_token``, its
own plain-HTTP ``httpx.Client`` (closed to stop a timed-out run), ``max_retries=0`` and
smolagents' rate-limit retry off (``retry=False``): the gateway retries.

Tools (:mod:`mastif.frameworks.smolagents_tools`): in-process, smolagents ``Tool`` s built
from the protocol's tool specs whose ``forward`` goes through ``ctx.call_tool`` on the run's
event loop; under ``mcp``, smolagents' own ``MCPClient`` (mcpadapt) on ``ctx.mcp_url`` over streamable HTTP with the
run's ``httpx_client_factory`` (mcpadapt's "streamable-http" transport set to the MCP SDK's
current client, :mod:`mastif.frameworks.mcp_transport`), and the MCP server records the
calls (as they end: calls of one reply that overlap are recorded in the order they finish).

Threads: smolagents is synchronous. Each run owns one worker thread (not the loop's default
executor: the in-process protocol runs tools there) in which the agents run; tool calls are
bridged back with ``asyncio.run_coroutine_threadsafe``. When the run is cancelled (timeout)
the adapter marks it cancelled, sets the agents' ``interrupt_switch`` and closes the HTTP
clients, so the request in flight fails and the abandoned agent stops.

No telemetry (smolagents sends none; its OpenTelemetry instrumentation is a separate
package, not installed), no hub downloads (nothing of ``huggingface_hub`` is called), and
no logging to the console (``verbosity_level=LogLevel.OFF``).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
import openai
from smolagents import MCPClient, OpenAIModel, Tool, ToolCallingAgent
from smolagents.memory import ActionStep, ToolCall
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction
from smolagents.monitoring import LogLevel, TokenUsage
from smolagents.utils import AgentError, AgentGenerationError

from mastif.core.provenance import PrivateMember, private_members_of
from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.mcp_transport import streamable_http
from mastif.frameworks.orchestration import run_linear
from mastif.frameworks.plan import PlannedNode
from mastif.frameworks.smolagents_tools import (
    GatewayTool,
    Reply,
    Ticket,
    current_call,
    mcp_tool,
)
from mastif.frameworks.threadbridge import RunCancelled, ThreadBridge
from mastif.tools import ToolResult

FINAL_ANSWER = "final_answer"


@dataclass
class _Visit:
    """The node visit in progress (one ``agent.run``)."""

    node: PlannedNode
    step: int
    tool_rounds: int = 0  # replies with tool calls answered so far


@dataclass
class _Bridge(ThreadBridge):
    """What a run's smolagents thread shares with the run coroutine."""

    visit: _Visit | None = None
    #: the tool calls of the model's latest reply (smolagents may run them concurrently)
    reply: Reply | None = None
    clients: list[httpx.Client] = field(default_factory=list)
    agents: list[ToolCallingAgent] = field(default_factory=list)
    mcp: MCPClient | None = None
    #: orders cancel() and adopt_mcp(): an MCP client connected after the run's end is
    #: disconnected by the worker, one connected before by the run's close
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cancel(self) -> None:
        with self.lock:
            self.cancelled.set()
        for agent in self.agents:
            agent.interrupt()
        for client in self.clients:
            try:
                client.close()  # a request in flight fails at once
            except Exception:  # noqa: BLE001, S110 - best effort
                pass

    def adopt_mcp(self, client: MCPClient) -> None:
        """Keep the run's MCP client for the run's close; if the run already ended (its
        build was cut short), disconnect it here instead."""
        with self.lock:
            if not self.cancelled.is_set():
                self.mcp = client
                return
        client.disconnect()
        raise RunCancelled()

    def start_tool(self, name: str, arguments: Any) -> Future[ToolResult]:
        """``ctx.call_tool`` for the visit in progress, begun on the run's loop (from any
        thread); the call takes its place in the run's record as it begins there."""
        self.check()
        visit = self.visit
        assert visit is not None
        coro = self.ctx.call_tool(visit.node.name, visit.step, name, arguments)
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def record_refusal(self, name: str, arguments: Any, error: str) -> Future[None]:
        """Record, on the run's loop, a call smolagents refused before any tool ran."""
        visit = self.visit
        assert visit is not None

        async def record() -> None:
            self.ctx.record_failed_tool_call(visit.node.name, visit.step, name, arguments, error)

        return asyncio.run_coroutine_threadsafe(record(), self.loop)


# -- model ---------------------------------------------------------------------------------


class GatewayModel(OpenAIModel):
    """smolagents' OpenAI-compatible model at our gateway, with the per-node turn policy."""

    def __init__(self, bridge: _Bridge, use_tools: bool, max_tool_rounds: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.bridge, self.use_tools, self.max_tool_rounds = bridge, use_tools, max_tool_rounds

    def generate(
        self,
        messages: list[Any],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        bridge = self.bridge
        bridge.check()
        visit = bridge.visit
        assert visit is not None
        # final_answer is how smolagents ends a run; here a reply in text does (see
        # parse_tool_calls), so only the protocol's tools are offered, until the cap
        tools = [t for t in tools_to_call_from or [] if t.name != FINAL_ANSWER]
        if not self.use_tools or visit.tool_rounds >= self.max_tool_rounds:
            tools = []
        choice = visit.node.spec.tool_choice if visit.tool_rounds == 0 else "auto"
        params = self._prepare_completion_kwargs(
            messages=messages,
            stop_sequences=stop_sequences,
            response_format=response_format,
            tools_to_call_from=tools or None,
            tool_choice=choice,
            model=self.model_id,
            custom_role_conversions=self.custom_role_conversions,
            convert_images_to_image_urls=True,
            **kwargs,
        )
        self._apply_rate_limit()
        response = self.retryer(self.client.chat.completions.create, **params)
        message = response.choices[0].message
        tool_calls = message.tool_calls if tools else None  # unasked-for calls are not run
        if tool_calls:
            visit.tool_rounds += 1
        usage = response.usage
        return ChatMessage(
            role="assistant",
            content=message.content,
            tool_calls=[
                ChatMessageToolCall(
                    id=tc.id,
                    type="function",
                    function=ChatMessageToolCallFunction(
                        name=tc.function.name, arguments=tc.function.arguments
                    ),
                )
                for tc in tool_calls
            ]
            if tool_calls
            else None,
            raw=response,
            token_usage=TokenUsage(
                input_tokens=usage.prompt_tokens if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
            ),
        )

    def parse_tool_calls(self, message: ChatMessage) -> ChatMessage:
        """A reply without tool calls is the node's answer: smolagents' final_answer call."""
        message.role = "assistant"
        if not message.tool_calls:
            answer = message.content or ""
            message.tool_calls = [
                ChatMessageToolCall(
                    id="final",
                    type="function",
                    function=ChatMessageToolCallFunction(
                        name=FINAL_ANSWER, arguments={"answer": answer}
                    ),
                )
            ]
            return message
        return super().parse_tool_calls(message)


# -- agent ----------------------------------------------------------------------------------


class SmolAgent(ToolCallingAgent):
    """smolagents' tool-calling agent; the calls it refuses are recorded, and the calls of
    one reply take their places in the run's record in the model's order."""

    bridge: _Bridge

    def process_tool_calls(self, chat_message: ChatMessage, memory_step: ActionStep) -> Any:
        # smolagents' own: one call runs directly, several in its thread pool; an error
        # ends the step. It yields the reply's calls in the model's order before any runs.
        # (keyed by id as smolagents keys them: of calls sharing an id, one runs)
        reply = self.bridge.reply = Reply([])
        by_id: dict[str, ToolCall] = {}
        for item in super().process_tool_calls(chat_message, memory_step):
            if isinstance(item, ToolCall):
                by_id[item.id] = item
                reply.reset(list(by_id.values()))
            yield item

    def execute_tool_call(self, tool_name: str, arguments: dict[str, str] | str) -> Any:
        bridge = self.bridge
        bridge.check()
        reply = bridge.reply
        index = reply.claim(tool_name, arguments) if reply is not None else None
        ticket = Ticket(reply, index) if reply is not None and index is not None else None
        current_call.ticket = ticket
        try:
            return super().execute_tool_call(tool_name, arguments)
        except AgentError as exc:
            bridge.check()  # a tool call cut short by the run's end is no refusal
            if tool_name != FINAL_ANSWER and (ticket is None or not ticket.placed):
                # smolagents answered this call itself and no tool ran: a failed call
                error = self._refusal(tool_name, arguments, str(exc))
                record = partial(bridge.record_refusal, tool_name, arguments, error)
                if ticket is None:
                    record().result()
                else:
                    ticket.reply.take_place(ticket.index, record).result()
            raise
        finally:
            current_call.ticket = None
            if ticket is not None:
                ticket.reply.release(ticket.index)

    def _refusal(self, name: str, arguments: Any, said: str) -> str:
        """The recorded error of a call smolagents refused (it said ``said``)."""
        if name not in self.tools:
            offered = sorted(self.bridge.ctx.tool_names())
            return f"unknown tool {name!r}; offered: {offered} (smolagents: {said})"
        if not isinstance(arguments, dict):
            return f"arguments are not a JSON object (smolagents: {said})"
        return f"arguments are not accepted by smolagents: {said}"


# -- the adapter ----------------------------------------------------------------------------


def mcp_tools(bridge: _Bridge) -> list[Tool]:
    """The MCP server's tools through smolagents' own MCP client (in the agents' thread)."""
    # mcpadapt opens "streamable-http" with the MCP SDK's deprecated streamablehttp_client:
    # the same client (same httpx client factory and arguments) through the current one
    from mcpadapt import core as mcpadapt_core

    mcpadapt_core.TRANSPORTS["streamable-http"] = streamable_http
    ctx = bridge.ctx
    params: dict[str, Any] = {"url": ctx.mcp_url, "transport": "streamable-http"}
    if ctx.mcp_http is not None:
        params["httpx_client_factory"] = ctx.mcp_http
    client = MCPClient(params, structured_output=False)
    bridge.adopt_mcp(client)
    return list(client.get_tools())


def build_agents(bridge: _Bridge, nodes: tuple[PlannedNode, ...]) -> dict[str, SmolAgent]:
    """One ToolCallingAgent per workflow node, each with its model at the node's URL."""
    ctx, g = bridge.ctx, bridge.ctx.generation
    specs = ctx.tools.tool_specs()
    tools: list[Tool] = []
    if specs and any(n.spec.use_tools for n in nodes):
        tools = (
            [mcp_tool(t) for t in mcp_tools(bridge)]
            if ctx.mcp_url is not None
            else [GatewayTool(s, bridge.start_tool) for s in specs]
        )
    agents = {}
    for node in nodes:
        use_tools = node.spec.use_tools and bool(tools)
        http = httpx.Client(verify=False)  # plain HTTP on loopback: no certificate store
        bridge.clients.append(http)
        s = ctx.client_settings(node.name)
        model = GatewayModel(
            bridge, use_tools, g.max_tool_rounds,
            model_id=s.model,
            api_base=s.base_url,
            api_key=s.api_key,
            client_kwargs={"http_client": http, **s.client_options()},
            flatten_messages_as_text=True,
            retry=False,  # its rate-limit retry: the gateway retries
            **s.sampling(),
        )  # fmt: skip
        agent = SmolAgent(
            tools=tools if use_tools else [],
            model=model,
            max_steps=g.max_tool_rounds + 1,
            verbosity_level=LogLevel.OFF,
        )
        agent.bridge = bridge
        bridge.agents.append(agent)
        agents[node.name] = agent
    return agents


def visit_node(bridge: _Bridge, agent: SmolAgent, visit: _Visit, prompt: str) -> str:
    """One node visit: one ``agent.run`` (in the worker thread)."""
    bridge.check()
    bridge.visit = visit
    try:
        return str(agent.run(prompt, reset=True))
    except AgentGenerationError as exc:
        # the OpenAI client's error as it was, so the run's error is classified like others'
        cause = exc.__cause__
        if isinstance(cause, openai.OpenAIError):
            raise cause from exc
        if isinstance(exc, RunCancelled) or bridge.cancelled.is_set():
            raise RunCancelled() from exc
        raise


_smol = private_members_of("smolagents")

#: what this adapter overrides or calls of smolagents that smolagents does not promise
PRIVATE_MEMBERS: tuple[PrivateMember, ...] = (
    _smol(OpenAIModel, "_prepare_completion_kwargs",
          "calls it to build the request as smolagents does"),
    _smol(OpenAIModel, "_apply_rate_limit", "calls it before each request, as smolagents does"),
    _smol(OpenAIModel, "retryer", "calls it around each request (retry off)", "instance"),
)  # fmt: skip


@dataclass
class _RunObjects:
    """What a run builds once: its worker thread and one agent per workflow node."""

    bridge: _Bridge
    worker: ThreadPoolExecutor
    agents: dict[str, SmolAgent]

    def in_worker(self, fn: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        return self.bridge.loop.run_in_executor(
            self.worker, contextvars.copy_context().run, fn, *args
        )

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: one ``agent.run`` of its agent, in the worker thread."""
        self.bridge.ctx.at(node.name, step)
        return await self.in_worker(
            visit_node, self.bridge, self.agents[node.name], _Visit(node, step), prompt
        )


class SmolagentsAdapter:
    name = "smolagents"
    #: the distributions a run uses (mastif.core.provenance): smolagents' MCP client under mcp
    packages = ("smolagents", "openai")
    mcp_packages = ("mcpadapt", "mcp")
    private_members = PRIVATE_MEMBERS

    @asynccontextmanager
    async def _session(self, ctx: RunContext) -> AsyncIterator[_RunObjects]:
        """The run's worker thread and agents (one per workflow node), closed on exit:
        every agent interrupted, every HTTP client closed, the MCP client disconnected,
        the worker shut down. :meth:`run` holds it for the run; :meth:`run_node` enters
        it once per run into ``ctx.resources``."""
        loop = asyncio.get_running_loop()
        bridge = _Bridge(ctx, loop)
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"smol-{ctx.run_id[:8]}")
        try:
            objects = _RunObjects(bridge, worker, {})
            with ctx.setting_up():
                objects.agents = await objects.in_worker(build_agents, bridge, ctx.plan.nodes)
            yield objects
        finally:
            bridge.cancel()  # a cancelled run must not go on in its worker thread
            if bridge.mcp is not None:
                mcp = bridge.mcp
                await loop.run_in_executor(None, mcp.disconnect)
            worker.shutdown(wait=False, cancel_futures=True)

    async def objects(self, ctx: RunContext) -> _RunObjects:
        """The run's agents for :meth:`run_node`: built on the run's first visit, kept in
        ``ctx.built`` and closed with ``ctx.resources`` when the run ends."""
        built = ctx.built.get(self.name)
        if built is None:
            built = await ctx.resources.enter_async_context(self._session(ctx))
            ctx.built[self.name] = built
        assert isinstance(built, _RunObjects)
        return built

    async def run(self, ctx: RunContext) -> str:
        async with self._session(ctx) as objects:
            return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The node sequence, each visit handed to ``dispatch`` (in :meth:`run` the node's
        agent; under ``a2a`` an A2A request to the node's agent). smolagents cannot express
        the fixed sequence with a bounded loop (see the module docstring), so the nodes are
        chained in plain code, as a smolagents user would: mastif's one plain-code chain
        (``run_linear``: the nodes before the loop once, the loop nodes in order for up to
        max_steps rounds, stop_when ending it at once, then the nodes after it)."""
        return await run_linear(ctx, dispatch)

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators): one run of the
        node's agent, built once per run (:meth:`objects`)."""
        objects = await self.objects(ctx)
        return await objects.visit(node, step, prompt)

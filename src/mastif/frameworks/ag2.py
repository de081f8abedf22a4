"""AG2 (the AutoGen 0.2 fork, ``import autogen``): the workflow as a ``GroupChat`` of node
agents whose speaker selection is a function, each node visit a two-agent chat between the
node's ``ConversableAgent`` and its tool executor.

Version. AG2's classic framework (``ConversableAgent``, ``GroupChat``, ``autogen.mcp``) is the
``ag2`` distribution up to 0.14; ag2 1.x is another framework (``import ag2``: ``Agent`` and a
hub-and-channels ``Network``), and its README sends classic users to ``ag2-classic``, which
the registry does not serve. The lock pins ag2 0.14.0, its last classic release
(``envs/ag2/requirements.in``).

Orchestration: ``GroupChat`` + ``GroupChatManager`` with a speaker-selection *function*
(:func:`build_group_chat`). The participants are one agent per workflow node (no model of
their own: each answers the manager with a registered async reply function, which is one
node visit) and a ``workflow`` agent that opens the chat with the task. AG2's manager runs
its loop (``GroupChatManager.a_run_chat``): append the message, broadcast it, ask the
selection function for the next speaker, let it speak. The selection function
(:class:`Route`) is the workflow's rules: the nodes before the loop in a line, the loop nodes
in order for up to ``max_steps`` rounds (a ``stop_when`` match in the last message leaves at
once), then the nodes after the loop; ``None`` ends the chat. Why this construct: of AG2's
orchestrations it is the one that expresses a fixed sequence with a bounded, content-exited
loop without model calls. ``speaker_selection_method="auto"`` asks the model for every turn;
``round_robin`` has no exit on content or round count; the newer patterns
(``initiate_group_chat`` with ``DefaultPattern`` and handoffs) put every agent into one
shared conversation with a group tool executor, so a node's request would carry the other
nodes' messages, not its own prompt, and their ``OnContextCondition`` needs the round count
and stop flag written into the context variables by tools or hooks. ``max_round`` is the
plan's visits plus two, so it never cuts a run; the manager is silent and never takes a
message for a termination message (AG2's default: a message that is exactly ``TERMINATE``).
Under ``a2a`` the orchestrator agent runs the same group chat (:meth:`AG2Adapter.orchestrate`),
each node agent's reply one A2A request to the node's A2A agent.

A node visit (:meth:`RunObjects.visit`): the node's tool executor (a ``ConversableAgent``
without a model, ``human_input_mode="NEVER"``, the tools registered for execution) starts a
fresh chat with the node's assistant (``ConversableAgent`` with the node's ``LLMConfig``,
the tools registered for the model) with the rendered prompt (``a_initiate_chat``,
``clear_history=True``): AG2's own tool loop — the assistant's reply with tool calls, the
executor's ``a_generate_tool_calls_reply`` running them (concurrently, ``asyncio.gather``)
and answering with one ``tool`` message each, the assistant again — until the assistant
answers without tool calls (the executor's ``is_termination_msg``) or ``max_turns``
(``max_tool_rounds + 1``) is reached. Its last message is the node's output.

What AG2 does by itself and keeps: ``ConversableAgent``'s system message ("You are a helpful
AI Assistant.") on every model request; the prompt as a user turn named after the sending
agent (``"name": "<node>_tools"``); ``"stream": false`` sent; tool schemas as given (``Tool`` with
``parameters_json_schema``); its argument handling (``_format_json_str``, then ``json.loads``;
text that is not JSON is refused: "Error: ... The argument must be in JSON format."); its
refusal of unknown names ("Error: Function X not found."); a failed tool call answered as
"Error: <error>"; the calls of one reply run concurrently; results serialised with
``serialize_to_str``; under ``mcp`` the toolkit's result rendering (a tool returns
``(text, non-text contents)``, written back as the tuple's ``str``: ``('95', None)``); AG2
fails the run on arguments that are JSON but not an object (its ``ExecuteFunctionEvent``
requires a dict; the call is recorded as failed first).

What the contract makes us change: the turn policy is applied where AG2 makes the request,
in the agent's model client — AG2's custom model client extension (``model_client_cls`` in
the config entry, ``register_model_client``) with :class:`GatewayClient`, a subclass of AG2's
own ``OpenAIClient``: the node's ``tool_choice`` on the first request of a visit, ``auto``
after, no tools once ``max_tool_rounds`` replies with tool calls were answered (AG2 would
send its ``tools`` on every request) or on a node without tools, and tool calls in a reply
to a request without tools are dropped, not run. Calls AG2 refuses before a tool runs are
recorded as failed (:class:`ToolExecutor`).

Model: AG2's ``OpenAIClient`` on an ``openai.OpenAI`` client at ``ctx.llm_base_url(node)``
with ``api_key=ctx.gateway_token``, the client timeout, ``max_retries=0`` and a plain-HTTP
``httpx.Client`` of the run's own (closed to stop a cancelled run's request in flight); the
config entry is ``api_type`` ``openai`` with ``temperature``, ``max_tokens`` and ``seed``,
``cache_seed`` None (no disk cache). AG2's model clients are synchronous: in an async chat it
runs each request in the loop's default executor (``a_generate_oai_reply``); on cancellation
the adapter closes the run's HTTP client so the request fails at once. An OpenAI error that
AG2 wraps (``TimeoutError`` around ``APITimeoutError``) is re-raised as itself.

Tools: in-process, ``autogen.tools.Tool`` s built from the protocol's specs whose function
goes through ``ctx.call_tool``; under ``mcp``, AG2's MCP toolkit (``autogen.mcp.
create_toolkit``, tools only) on an MCP SDK ``ClientSession`` over streamable HTTP at
``ctx.mcp_url`` (AG2 has no streamable-HTTP session config of its own: the SDK's client, with
the run's ``httpx_client_factory``, :mod:`mastif.frameworks.mcp_transport`), registered with
``Toolkit.register_for_llm`` / ``register_for_execution``; the session declares the SDK's
default ``clientInfo`` (``mcp``), and the MCP server records the calls.

Telemetry: AG2 classic sends none. Its OpenTelemetry instrumentation
(``autogen.opentelemetry``) is opt-in and its packages are not installed; its runtime logging
(``autogen.runtime_logging``) is off unless started. AG2's console output (each message and
event, ``IOStream``) goes to a stream that drops it (:class:`QuietStream`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from autogen import Agent, ConversableAgent, GroupChat, GroupChatManager, LLMConfig
from autogen.io.base import IOStream
from autogen.oai.client import OpenAIClient
from autogen.tools import Tool

from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode, WorkflowPlan
from mastif.tools import ToolResult

#: the name of the agent that opens the group chat with the task (no node may have it)
STARTER = "workflow"


def openai_cause(exc: BaseException) -> openai.OpenAIError | None:
    """The OpenAI client's error behind AG2's wrapper (``TimeoutError``), if any."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, openai.OpenAIError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


class QuietStream:
    """AG2's output stream for a run (``IOStream.set_default``): nothing is printed (AG2 prints
    every message and event to the console by default); AG2 never asks for input here
    (``human_input_mode="NEVER"`` everywhere)."""

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", flush: bool = False) -> None:
        pass

    def send(self, message: Any) -> None:
        pass

    def input(self, prompt: str = "", *, password: bool = False) -> str:
        raise RuntimeError("AG2 asked for human input in a mastif run")


# --------------------------------------------------------------------------- the model client


class GatewayClient(OpenAIClient):
    """AG2's OpenAI client at the node's gateway URL, with the contract's turn policy.

    Registered as the assistant's custom model client (``model_client_cls``); AG2 hands it
    the request it built (the agent's messages, its tools and the config entry's
    parameters). The turn is read from the visit's own messages (each visit is a fresh chat):
    the tool rounds made so far are the assistant turns with tool calls."""

    def __init__(self, config: dict[str, Any], *, settings: Any, node: PlannedNode,
                 max_tool_rounds: int, http: httpx.Client) -> None:  # fmt: skip
        client = openai.OpenAI(
            base_url=settings.base_url, api_key=settings.api_key, http_client=http,
            **settings.client_options(),
        )  # fmt: skip
        super().__init__(client)
        self.node, self.max_tool_rounds = node, max_tool_rounds

    def create(self, params: dict[str, Any]) -> Any:
        params = {k: v for k, v in params.items() if k != "model_client_cls"}
        rounds = sum(
            1
            for m in params.get("messages", [])
            if m.get("role") == "assistant" and m.get("tool_calls")
        )
        offered = bool(
            params.get("tools") and self.node.spec.use_tools and rounds < self.max_tool_rounds
        )
        if offered:
            params["tool_choice"] = self.node.spec.tool_choice if rounds == 0 else "auto"
        else:
            params.pop("tools", None)
            params.pop("tool_choice", None)
        response = super().create(params)
        if not offered:  # calls in a reply to a request without tools are not run
            for choice in response.choices:
                choice.message.tool_calls = None
        return response


# --------------------------------------------------------------------------- tools


@dataclass
class Call:
    """A tool call AG2 is executing (one per task: AG2 gathers a reply's calls)."""

    #: its place in the run's record, taken as AG2 starts it: AG2 starts a reply's calls in
    #: the model's order, but they reach the tool (or are refused) in any order
    issued: int
    reached: bool = False  # the tool function was entered: AG2 did not refuse it


CURRENT_CALL: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "mastif_ag2_call", default=None
)


def reaching(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """``func`` (a registered function), marking the current call as having reached it."""

    async def reached(*args: Any, **kwargs: Any) -> Any:
        call = CURRENT_CALL.get()
        if call is not None:
            call.reached = True
        result = func(*args, **kwargs)
        return await result if asyncio.iscoroutine(result) else result

    return reached


class ToolExecutor(ConversableAgent):
    """The node's tool executor; calls AG2 refuses before a tool runs (an unknown name,
    arguments that are not JSON or not an object) are recorded as failed, with AG2's text."""

    objects: RunObjects

    async def a_execute_function(
        self, func_call: dict[str, Any], call_id: str | None = None, verbose: bool = False
    ) -> tuple[bool, dict[str, Any]]:
        call = Call(self.objects.ctx.recorder.issue())
        token = CURRENT_CALL.set(call)
        try:
            ok, result = await super().a_execute_function(func_call, call_id, verbose)
        except Exception as exc:
            # AG2 itself fails on arguments that are JSON but not an object (its
            # ExecuteFunctionEvent requires a dict): the run fails as it would for an AG2
            # user, with the call on record
            if not call.reached:
                self._refused(call, func_call, f"{type(exc).__name__}: {exc}"[:500])
            raise
        finally:
            CURRENT_CALL.reset(token)
        if not call.reached:
            self._refused(call, func_call, str(result.get("content", "")))
        return ok, result

    def _refused(self, call: Call, func_call: dict[str, Any], said: str) -> None:
        """Record a call AG2 answered (``said``) without running a tool."""
        visit = self.objects.visit_now
        if visit is None:
            return
        name = func_call.get("name") or "<unnamed>"
        offered = sorted(self.objects.ctx.tool_names())
        error = (
            f"unknown tool {name!r}; offered: {offered} ({said})"
            if name not in self.function_map
            else said
        )
        # ctx.record_failed_tool_call, at the call's place
        self.objects.ctx.recorder.tool_call(
            visit.node.name, visit.step, name, func_call.get("arguments", ""),
            ToolResult(False, "", error), call.issued,
        )  # fmt: skip


def local_tools(ctx: RunContext, objects: RunObjects) -> list[Tool]:
    """The protocol's tools as AG2 ``Tool`` s (their JSON schemas as given); each call goes
    through ``ctx.call_tool``. A failure raises, so AG2 answers it as "Error: <error>", as it
    does for an MCP tool whose result is an error."""

    def make(spec: Any) -> Tool:
        async def call(**arguments: Any) -> str:
            visit = objects.visit_now
            node, step = (visit.node.name, visit.step) if visit else (ctx.node, ctx.step)
            call = CURRENT_CALL.get()
            issued = call.issued if call is not None else None
            result = await ctx.call_tool(node, step, spec.name, arguments, issued)
            if not result.ok:
                raise RuntimeError(result.error or "the tool failed")
            return result.output

        return Tool(name=spec.name, description=spec.description, func_or_tool=call,
                    parameters_json_schema=spec.parameters)  # fmt: skip

    return [make(s) for s in ctx.tools.tool_specs()]


async def mcp_tools(ctx: RunContext, stack: AsyncExitStack) -> list[Tool]:
    """The MCP server's tools through AG2's MCP toolkit, on an MCP SDK session over streamable
    HTTP (the run's httpx client factory), open for the run."""
    from autogen.mcp import create_toolkit
    from mcp import ClientSession

    from mastif.frameworks.mcp_transport import streamable_http

    assert ctx.mcp_url is not None
    kwargs: dict[str, Any] = {}
    if ctx.mcp_http is not None:
        kwargs["httpx_client_factory"] = ctx.mcp_http
    streams = await stack.enter_async_context(streamable_http(ctx.mcp_url, **kwargs))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    await session.initialize()
    toolkit = await create_toolkit(session, use_mcp_resources=False)  # only the server's tools
    return list(toolkit.tools)


# --------------------------------------------------------------------------- the run's objects


@dataclass
class Visit:
    node: PlannedNode
    step: int


@dataclass
class NodePair:
    """A workflow node's two agents: the assistant (the model) and its tool executor."""

    assistant: ConversableAgent
    executor: ToolExecutor
    max_turns: int


@dataclass
class RunObjects:
    """What a run builds once: one assistant and one tool executor per workflow node."""

    ctx: RunContext
    http: httpx.Client
    pairs: dict[str, NodePair] = field(default_factory=dict)
    visit_now: Visit | None = None

    @classmethod
    async def build(cls, ctx: RunContext, stack: AsyncExitStack) -> RunObjects:
        http = httpx.Client(verify=False)  # plain HTTP on loopback: no certificate store
        stack.callback(http.close)  # closed on cancel too: a request in flight fails at once
        objects = cls(ctx, http)
        rounds = ctx.generation.max_tool_rounds
        nodes = ctx.plan.nodes
        tools: list[Tool] = []
        if rounds > 0 and ctx.tools.tool_specs() and any(n.spec.use_tools for n in nodes):
            tools = (
                await mcp_tools(ctx, stack) if ctx.mcp_url is not None
                else local_tools(ctx, objects)
            )  # fmt: skip
        for node in nodes:
            objects.pairs[node.name] = objects.node_pair(node, tools if node.spec.use_tools else [])
        return objects

    def node_pair(self, node: PlannedNode, tools: list[Tool]) -> NodePair:
        ctx = self.ctx
        s = ctx.client_settings(node.name)
        entry = {
            "api_type": "openai",
            "model": s.model,
            "model_client_cls": GatewayClient.__name__,
            # AG2 prices each response by model name and warns on stdout about a model it
            # does not know; the cost is AG2's bookkeeping only (tokens come from the gateway)
            "price": [0.0, 0.0],
            **s.sampling(),
        }
        assistant = ConversableAgent(
            name=node.name,
            llm_config=LLMConfig(entry, cache_seed=None),
            human_input_mode="NEVER",
            silent=True,
        )
        executor = ToolExecutor(
            name=f"{node.name}_tools",
            llm_config=False,
            human_input_mode="NEVER",
            # a reply without tool calls ends the visit: it is the node's output
            is_termination_msg=lambda message: not message.get("tool_calls"),
            silent=True,
        )
        executor.objects = self
        for tool in tools:
            tool.register_for_llm(assistant)
            tool.register_for_execution(executor)
        if tools:  # each registered function marks the calls that reached it
            executor.register_function(
                {name: reaching(f) for name, f in executor.function_map.items()},
                silent_override=True,
            )
        # registered last: registering a tool for the model rebuilds the agent's client
        assistant.register_model_client(
            GatewayClient, settings=s, node=node,
            max_tool_rounds=ctx.generation.max_tool_rounds, http=self.http,
        )  # fmt: skip
        turns = ctx.generation.max_tool_rounds + 1 if tools else 1
        return NodePair(assistant, executor, turns)

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One node visit: the executor's chat with the node's assistant, ending in text."""
        self.ctx.at(node.name, step)
        pair = self.pairs[node.name]
        self.visit_now = Visit(node, step)
        try:
            with IOStream.set_default(QuietStream()):
                await pair.executor.a_initiate_chat(
                    pair.assistant, message=prompt, clear_history=True, silent=True,
                    max_turns=pair.max_turns, summary_method="last_msg",
                )  # fmt: skip
        except Exception as exc:
            cause = openai_cause(exc)
            if cause is not None and cause is not exc:
                raise cause from exc  # classified by the runner as the provider's error
            raise
        finally:
            self.visit_now = None
        last = pair.assistant.last_message(pair.executor) or {}
        return str(last.get("content") or "")


# --------------------------------------------------------------------------- the group chat


@dataclass
class Route:
    """The group chat's speaker selection: the workflow's sequence and loop rules."""

    plan: WorkflowPlan
    speakers: dict[str, ConversableAgent]
    round: int = 1
    #: the part of the workflow now speaking ("before", "loop", "after"; "" before the first
    #: node) and the speaking node's index in it
    part: str = ""
    index: int = -1

    def step_of(self, node: PlannedNode) -> int:
        return self.round if node.spec.loop else 1

    def _part(self, name: str) -> tuple[PlannedNode, ...]:
        plan = self.plan
        return {"before": plan.before, "loop": plan.loop, "after": plan.after}[name]

    def _first_from(self, part: str) -> ConversableAgent | None:
        order = ["before", "loop", "after"]
        for name in order[order.index(part) :]:
            nodes = self._part(name)
            if name == "loop" and self.plan.max_steps < 1:
                continue
            if nodes:
                self.part, self.index = name, 0
                return self.speakers[nodes[0].name]
        return None

    def __call__(self, last_speaker: Agent, groupchat: GroupChat) -> ConversableAgent | None:
        """The next speaker after ``last_speaker`` (None: the chat ends)."""
        if not self.part:  # the task was posted: the first node
            return self._first_from("before")
        nodes = self._part(self.part)
        if self.part == "loop":
            text = str(groupchat.messages[-1].get("content") or "") if groupchat.messages else ""
            if nodes[self.index].stops_loop(text):
                return self._first_from("after")
            if self.index + 1 == len(nodes):  # a round ended: the next one, or leave
                if self.round >= self.plan.max_steps:
                    return self._first_from("after")
                self.round, self.index = self.round + 1, 0
                return self.speakers[nodes[0].name]
        if self.index + 1 < len(nodes):
            self.index += 1
            return self.speakers[nodes[self.index].name]
        return self._first_from("loop") if self.part == "before" else None


def node_speaker(node: PlannedNode, route_step: Callable[[PlannedNode], int],
                 visit: Callable[[PlannedNode, int], Awaitable[str]]) -> ConversableAgent:  # fmt: skip
    """A group chat participant for ``node``: its turn is one visit of the node."""
    agent = ConversableAgent(
        name=node.name, llm_config=False, human_input_mode="NEVER", silent=True
    )

    async def speak(recipient: ConversableAgent, messages: Any = None, sender: Any = None,
                    config: Any = None) -> tuple[bool, str]:  # fmt: skip
        return True, await visit(node, route_step(node))

    agent.register_reply([Agent, None], speak, position=0)
    return agent


def build_group_chat(
    ctx: RunContext, dispatch: Dispatch
) -> tuple[ConversableAgent, GroupChatManager]:
    """The run's group chat: a participant per node whose turn renders the node's prompt from
    the run's history, hands it to ``dispatch`` (the node's agents, or under ``a2a`` the
    node's A2A agent) and records its output; the speaker selection function
    (:class:`Route`); the manager. Returns the agent that opens the chat, and the manager."""
    plan = ctx.plan

    async def visit(node: PlannedNode, step: int) -> str:
        return await visit_node(ctx, dispatch, node, step)

    speakers: dict[str, ConversableAgent] = {}
    route = Route(plan, speakers)
    for node in plan.nodes:
        speakers[node.name] = node_speaker(node, route.step_of, visit)
    starter = ConversableAgent(
        name=STARTER, llm_config=False, human_input_mode="NEVER", silent=True
    )
    visits = len(plan.before) + len(plan.loop) * max(plan.max_steps, 0) + len(plan.after)
    chat = GroupChat(
        agents=[starter, *speakers.values()],
        messages=[],
        max_round=visits + 2,
        speaker_selection_method=route,
    )
    manager = GroupChatManager(
        groupchat=chat,
        llm_config=False,
        human_input_mode="NEVER",
        is_termination_msg=lambda message: False,  # the route decides when the chat ends
        silent=True,
    )
    return starter, manager


# --------------------------------------------------------------------------- the adapter


class AG2Adapter:
    name = "ag2"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("ag2", "openai")
    mcp_packages = ("mcp",)
    #: no private member of AG2 is overridden or called
    private_members = ()

    @asynccontextmanager
    async def _session(self, ctx: RunContext) -> AsyncIterator[RunObjects]:
        """The run's agents and tools, closed on exit (HTTP client, MCP session): :meth:`run`
        holds them for the run; :meth:`run_node` enters them once into ``ctx.resources``."""
        async with AsyncExitStack() as stack:
            with ctx.setting_up():
                objects = await RunObjects.build(ctx, stack)
            yield objects

    async def run(self, ctx: RunContext) -> str:
        """The group chat (:func:`build_group_chat`), each node's turn the node's agents."""
        async with self._session(ctx) as objects:
            return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The group chat, each node's turn handed to ``dispatch`` (in :meth:`run` the node's
        agents; under ``a2a`` an A2A request to the node's agent)."""
        with ctx.setting_up():
            starter, manager = build_group_chat(ctx, dispatch)
        with IOStream.set_default(QuietStream()):
            await starter.a_initiate_chat(
                manager, message=ctx.task.confirmed_task, clear_history=True, silent=True,
                summary_method="last_msg",
            )  # fmt: skip
        messages = manager.groupchat.messages
        last = messages[-1] if len(messages) > 1 else {}
        return str(last.get("content") or "")

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's
        agents, built on the run's first visit and kept in ``ctx.built``."""
        objects = ctx.built.get(self.name)
        if objects is None:
            objects = await ctx.resources.enter_async_context(self._session(ctx))
            ctx.built[self.name] = objects
        assert isinstance(objects, RunObjects)
        return await objects.visit(node, step, prompt)

"""Strands Agents: the workflow as a Strands multi-agent ``Graph``; every node visit one ``Agent``.

Orchestration. :func:`build_graph` builds one Strands ``Graph`` per run with Strands'
``GraphBuilder`` (``strands.multiagent``): one graph node per workflow node, each a
:class:`WorkflowNode` (a Strands ``AgentBase``: the graph streams it like any agent) whose
execution is one visit (``visit_node``: the prompt rendered from the run's history, handed to a
dispatch, the output recorded). The edges carry the rules, as conditional edges whose
conditions read the workflow's :class:`Progress` from the graph's ``invocation_state``: the
nodes before the loop in a line; the loop nodes in a cycle -- each loop node has an edge to the
next one while no ``stop_when`` matched, the last one an edge back to the first while fewer than
``max_steps`` rounds were made -- and every loop node an exit edge to the first node after the
loop (a ``stop_when`` match, or ``max_steps`` rounds made; with no node after the loop no edge
is taken and the graph ends). Strands' own scheduler (``Graph._execute_graph``: batches of
ready nodes, a node ready when an incoming edge from the batch that just ran is satisfied) runs
it; mastif's ``drive_workflow`` is not used. ``reset_on_revisit`` is on (Strands' setting for
cycles whose nodes start afresh on each visit) and ``max_node_executions`` is the plan's number
of visits, so it bounds the cycle without ever cutting a run short. In :meth:`StrandsAdapter.run`
the dispatch is the node's ``Agent``; under ``a2a`` (:meth:`StrandsAdapter.orchestrate`, the
same graph) an A2A request to the node's agent, which serves it with
:meth:`StrandsAdapter.run_node` on the run's agents (built once per run, ``ctx.built``).

A node visit is ``Agent.invoke_async(prompt)`` on a fresh conversation (``agent.messages = []``;
the graph node resets nothing of the agent's: its executor is the :class:`WorkflowNode`):
Strands' own event loop (model call, the reply's tool calls run by its
``ConcurrentToolExecutor``, results written back as ``tool`` messages, next model call, until a
reply without tool calls). One ``Agent`` per workflow node (named after it), no system prompt,
``callback_handler=None`` (its default prints the stream to stdout) and ``retry_strategy=None``
(its default ``ModelRetryStrategy`` retries a throttled call up to 6 times with 4-240 s back-off;
the gateway retries, so Strands makes one attempt).

Model: ``strands.models.openai.OpenAIModel`` (:class:`GatewayModel`) with ``client_args``
``base_url=ctx.llm_base_url(node)``, ``api_key=ctx.gateway_token``, the client timeout and
``max_retries=0``; Strands builds an ``AsyncOpenAI`` from them for every request and closes it
after (its own choice, against sharing connections across event loops). ``params`` carry
temperature, max_tokens and seed; ``stream: False`` (Strands' config switch; the gateway serves
no streaming). What :class:`GatewayModel` changes on the wire, each for the contract: a request
without tools has no ``tools`` key (Strands sends ``"tools": []``) and text-only message content
goes as a string (Strands sends lists of text parts, which the gateway's llama.cpp chat template
does not read). A throttled or overflowing call that Strands wraps (``ModelThrottledException``,
``ContextWindowOverflowException``) is re-raised as the OpenAI error, so the runner classifies it.

Tools: in-process, each a Strands ``PythonAgentTool`` with the protocol's name, description and
JSON schema (Strands normalises the schema on registration: ``type``, ``properties`` and
``required`` filled in, a ``Property <name>`` description on a property without one); its
function calls ``ctx.call_tool`` and returns a Strands ``ToolResult`` (``status: error`` with the
tool's error). Under ``mcp``: Strands' own ``MCPClient`` with the MCP SDK's streamable-HTTP
client (``transport_callable``, :func:`mastif.frameworks.mcp_transport.streamable_http` on the
run's ``ctx.mcp_http``), started once per run (its session lives on a background thread of its
own), its ``list_tools_sync()`` tools given to the agents; its ``initialize`` declares no
``application_name``, so the MCP SDK's default ``clientInfo`` (``mcp``); the server records the
calls.

What the contract makes us change, through Strands' middleware (``agent.add_middleware``) and
hooks, one :class:`TurnPolicy` per node agent: the node's ``tool_choice`` on the visit's first
request and ``auto`` after, no tools once ``max_tool_rounds`` replies with tool calls were
answered (``InvokeModelStage.Input``); tool calls in a reply to a request without tools dropped
from the reply, so they are not run (``InvokeModelStage.Output``); and the record: calls Strands
answers without running a tool (an unknown name: "Unknown tool: X"; a name its pattern refuses)
are recorded as failed with its text (``ExecuteToolStage`` marks the calls that reach a tool, an
``AfterToolsEvent`` hook records the others), in-process at their places in the model's order
(``RunRecorder.issue`` as the reply arrives), with the model's argument text. Kept as Strands
does it: arguments that are not JSON are replaced by ``{}`` (its warning) and the tool runs with
that, recorded so; a reply cut off by ``max_tokens`` ends the visit (its
``MaxTokensReachedException``, the reply appended to the conversation with each tool call
replaced by its note "The selected tool X's tool use was incomplete ..."): that reply's text is
the node's output and its calls, not run, are recorded as failed.

Threads and cancellation: Strands is asyncio-native; the graph runs each node in a task of its
own, cancelled with the run. The MCP client's session thread is stopped with the run
(``ctx.resources`` / the run's exit stack); blocking MCP client calls go to a worker thread.

No telemetry: Strands traces through OpenTelemetry's API (agent, model, tool, graph spans); its
exporters come only with ``StrandsTelemetry`` set up, which mastif never does. The adapter pins
Strands' one tracer (``strands.telemetry.get_tracer()``) to OpenTelemetry's
``NoOpTracerProvider``, so no span records and no trace context goes out with an MCP request,
whatever provider anything else installs. (Creating that tracer instruments ``threading`` with
OpenTelemetry's ``ThreadingInstrumentor``: context propagation only.) ``tiktoken`` is not
installed: Strands estimates tokens by characters, no encoding download.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
from opentelemetry.trace import NoOpTracerProvider
from strands import Agent
from strands.agent.agent_result import AgentResult
from strands.hooks import AfterToolsEvent
from strands.middleware import (
    ExecuteToolContext,
    ExecuteToolStage,
    InvokeModelContext,
    InvokeModelResult,
    InvokeModelStage,
    ModelStopReason,
)
from strands.models.openai import OpenAIModel
from strands.multiagent import GraphBuilder
from strands.multiagent.base import Status
from strands.telemetry import get_tracer
from strands.telemetry.metrics import EventLoopMetrics
from strands.tools import PythonAgentTool
from strands.tools.mcp import MCPClient
from strands.types.exceptions import (
    ContextWindowOverflowException,
    MaxTokensReachedException,
    ModelThrottledException,
)

from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.mcp_transport import streamable_http
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode, WorkflowPlan
from mastif.tools import ToolResult


def silence_tracer() -> None:
    """Strands' tracer on OpenTelemetry's no-op provider: no span is recorded or exported."""
    tracer = get_tracer()
    if not isinstance(tracer.tracer_provider, NoOpTracerProvider):
        tracer.tracer_provider = NoOpTracerProvider()
        tracer.tracer = tracer.tracer_provider.get_tracer(tracer.service_name)


silence_tracer()

# --------------------------------------------------------------------------- the model


class GatewayModel(OpenAIModel):
    """Strands' OpenAI model at the gateway; what it changes on the wire is the contract's.

    It also keeps each tool call's argument text as the model wrote it (``raw_arguments``, by
    call id, from its stream events): Strands replaces text that is not JSON by ``{}``, and a
    call it refuses is recorded with the model's own arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.raw_arguments: dict[str, str] = {}

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        call_id = None
        async for event in super().stream(*args, **kwargs):
            start = event.get("contentBlockStart", {}).get("start", {}).get("toolUse")
            if start is not None:
                call_id = start["toolUseId"]
                self.raw_arguments[call_id] = ""
            delta = event.get("contentBlockDelta", {}).get("delta", {}).get("toolUse")
            if delta is not None and call_id is not None:
                self.raw_arguments[call_id] += delta.get("input", "")
            yield event

    def format_request(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        request = super().format_request(*args, **kwargs)
        if not request.get("tools"):  # Strands sends "tools": [] when it offers none
            request.pop("tools", None)
            request.pop("tool_choice", None)
        return request

    @classmethod
    def format_request_messages(cls, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        messages = super().format_request_messages(*args, **kwargs)
        for message in messages:
            content = message.get("content")
            # text parts as one string: what the gateway's chat template for llama.cpp reads
            if isinstance(content, list) and all(p.get("type") == "text" for p in content):
                message["content"] = "".join(p["text"] for p in content)
        return messages


def gateway_model(ctx: RunContext, node: str) -> GatewayModel:
    s = ctx.client_settings(node)
    return GatewayModel(
        client_args={"base_url": s.base_url, "api_key": s.api_key, **s.client_options()},
        model_id=s.model,
        params=s.sampling(),
        stream=False,  # the gateway serves no streaming; usage comes from the whole body
    )


def parses(text: str) -> bool:
    """``text`` is what Strands' ``json.loads`` reads (an empty text is ``{}`` to it too)."""
    try:
        json.loads(text or "{}")
    except ValueError:
        return False
    return True


def openai_cause(exc: BaseException) -> BaseException | None:
    """The OpenAI error Strands wrapped, if any."""
    cause = exc.__cause__
    return cause if isinstance(cause, openai.OpenAIError) else None


# --------------------------------------------------------------------------- the turn policy


@dataclass
class TurnPolicy:
    """mastif's turn policy and call record for one node's agent, as Strands middleware and a
    hook; :meth:`begin` starts a visit."""

    objects: RunObjects
    node: PlannedNode
    model: GatewayModel
    offers_tools: bool
    max_rounds: int
    step: int = 0
    rounds: int = 0  # replies with tool calls answered in this visit
    offered: bool = False  # the request in flight offered tools
    #: the tool calls of the latest reply that was offered tools, in the model's order
    reply: list[dict[str, Any]] = field(default_factory=list)
    started: set[str] = field(default_factory=set)  # calls of it that reached a tool
    places: dict[str, int] = field(default_factory=dict)  # call id -> RunRecorder.issue()

    def attach(self, agent: Agent) -> None:
        agent.add_middleware(InvokeModelStage.Input, self.shape_request)
        agent.add_middleware(InvokeModelStage.Output, self.read_reply)
        agent.add_middleware(ExecuteToolStage, self.run_tool)
        agent.add_hook(self.after_tools, AfterToolsEvent)

    def begin(self, step: int) -> None:
        self.step, self.rounds, self.reply, self.started, self.places = step, 0, [], set(), {}
        self.model.raw_arguments.clear()

    def shape_request(self, context: InvokeModelContext) -> InvokeModelContext:
        """The node's tool_choice on the visit's first request, auto after; no tools after
        ``max_tool_rounds`` rounds (that request ends the visit in text)."""
        self.offered = (
            self.offers_tools and self.rounds < self.max_rounds and bool(context.tool_specs)
        )
        if not self.offered:
            return context.replace(tool_specs=[], tool_choice=None)
        first = self.rounds == 0 and self.node.spec.tool_choice == "required"
        return context.replace(tool_choice={"any": {}} if first else {"auto": {}})

    def read_reply(self, result: InvokeModelResult) -> InvokeModelResult:
        stop = result.result
        message = stop.message
        calls = [b["toolUse"] for b in message.get("content", []) if "toolUse" in b]
        if not calls:
            return result
        cut_off = stop.stop_reason == "max_tokens"
        if not self.offered:
            # tool calls in a reply to a request without tools are not run (a reply cut off by
            # max_tokens keeps its stop reason: Strands ends the visit on it)
            kept = [b for b in message["content"] if "toolUse" not in b]
            message = {**message, "content": kept}
            reason = stop.stop_reason if cut_off else "end_turn"
            return InvokeModelResult(ModelStopReason(reason, message, stop.usage, stop.metrics))
        if cut_off:
            # Strands runs none of them: it replaces each with its note and ends the visit
            # (MaxTokensReachedException, see RunObjects.visit)
            for c in calls:
                note = (f"The selected tool {c['name']}'s tool use was incomplete due to "
                        "maximum token limits being reached.")  # fmt: skip
                self.record_refusal(c, note, "not run: the reply stopped at max_tokens")
            return result
        self.rounds += 1
        self.reply, self.started = calls, set()
        if self.objects.mcp is None:  # in-process calls take their places as the reply arrives
            recorder = self.objects.ctx.recorder
            self.places = {c["toolUseId"]: recorder.issue() for c in calls}
        return result

    async def run_tool(self, context: ExecuteToolContext, next_fn: Callable[..., Any]) -> Any:
        if context.tool is not None:
            self.started.add(context.tool_use["toolUseId"])
        async for event in next_fn(context):
            yield event

    def after_tools(self, event: AfterToolsEvent) -> None:
        """Record the reply's calls Strands answered without running a tool, with its text."""
        said = {
            block["toolResult"]["toolUseId"]: block["toolResult"]
            for block in event.message.get("content", [])
            if "toolResult" in block
        }
        for call in self.reply:
            call_id = call["toolUseId"]
            if call_id in self.started or call_id not in said:
                continue
            text = " ".join(c.get("text", "") for c in said[call_id].get("content", []))
            self.record_refusal(call, text.strip())
        self.reply = []

    def record_refusal(self, call: dict[str, Any], said: str, why: str = "refused") -> None:
        """Record ``call`` as not run by Strands (it ``said`` so), with the model's arguments."""
        ctx = self.objects.ctx
        offered = sorted(ctx.tool_names())
        name = call["name"]
        error = (
            f"unknown tool {name!r}; offered: {offered} (Strands: {said})"
            if name not in offered
            else f"{why} by Strands: {said}"
            if why == "refused"
            else f"{why} (Strands: {said})"
        )
        place = self.places.pop(call["toolUseId"], None)
        raw = self.model.raw_arguments.get(call["toolUseId"])
        arguments = call["input"] if raw is None or parses(raw) else raw
        result = ToolResult(False, "", error)
        ctx.recorder.tool_call(self.node.name, self.step, name, arguments, result, place)


def gateway_tool(objects: RunObjects, spec: Any) -> PythonAgentTool:
    """A protocol tool as a Strands tool (its JSON schema) calling ``ctx.call_tool``."""
    ctx = objects.ctx

    async def call(tool_use: dict[str, Any], **invocation_state: Any) -> dict[str, Any]:
        policy = objects.policy
        place = policy.places.pop(tool_use["toolUseId"], None) if policy else None
        result = await ctx.call_tool(ctx.node, ctx.step, spec.name, tool_use["input"], place)
        return {
            "toolUseId": tool_use["toolUseId"],
            "status": "success" if result.ok else "error",
            "content": [{"text": result.output if result.ok else result.error or "failed"}],
        }

    tool_spec = {"name": spec.name, "description": spec.description,
                 "inputSchema": {"json": spec.parameters}}  # fmt: skip
    return PythonAgentTool(spec.name, tool_spec, call)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the run's agents


@dataclass
class RunObjects:
    """What a run builds once: the tools (or the MCP client) and one agent per node."""

    ctx: RunContext
    agents: dict[str, Agent] = field(default_factory=dict)
    policies: dict[str, TurnPolicy] = field(default_factory=dict)
    mcp: MCPClient | None = None
    #: the turn policy of the visit in progress (visits of a run are sequential)
    policy: TurnPolicy | None = None

    @classmethod
    async def open(cls, ctx: RunContext, stack: contextlib.AsyncExitStack) -> RunObjects:
        """Build the run's agents; what they hold open is closed with ``stack``."""
        objects = cls(ctx)
        nodes, specs = ctx.plan.nodes, ctx.tools.tool_specs()
        tools: list[Any] = []
        if specs and any(n.spec.use_tools for n in nodes):
            if ctx.mcp_url is not None:
                tools = await objects.connect_mcp(ctx.mcp_url, stack)
            else:
                tools = [gateway_tool(objects, s) for s in specs]
        for node in nodes:
            use_tools = node.spec.use_tools and bool(tools)
            max_rounds = ctx.generation.max_tool_rounds if use_tools else 0
            model = gateway_model(ctx, node.name)
            agent = Agent(
                model=model,
                tools=list(tools) if use_tools and max_rounds > 0 else None,
                name=node.name,
                callback_handler=None,  # its default prints every streamed event to stdout
                retry_strategy=None,  # the gateway retries: one attempt per model call
            )
            policy = TurnPolicy(objects, node, model, use_tools, max_rounds)
            policy.attach(agent)
            objects.agents[node.name], objects.policies[node.name] = agent, policy
        return objects

    async def connect_mcp(self, url: str, stack: contextlib.AsyncExitStack) -> list[Any]:
        """Strands' MCP client on the MCP SDK's streamable-HTTP client, one session per run."""
        transport = functools.partial(streamable_http, url)
        if self.ctx.mcp_http is not None:  # timed exchanges, the server's key
            transport = functools.partial(transport, httpx_client_factory=self.ctx.mcp_http)
        client = MCPClient(transport)
        # start() and list_tools_sync() block until the client's own thread answers
        await asyncio.to_thread(client.start)
        stack.push_async_callback(asyncio.to_thread, client.stop, None, None, None)
        self.mcp = client
        return list(await asyncio.to_thread(client.list_tools_sync))

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: one invocation of its agent on a fresh conversation."""
        self.ctx.at(node.name, step)
        agent, policy = self.agents[node.name], self.policies[node.name]
        agent.messages = []  # each visit starts a conversation; the history is in the prompt
        policy.begin(step)
        self.policy = policy
        try:
            message = (await agent.invoke_async(prompt)).message
        except MaxTokensReachedException:
            # Strands ends the visit on a reply cut off by max_tokens, with that reply (its
            # tool calls replaced by its notes) appended to the conversation: the node's text
            message = agent.messages[-1] if agent.messages else {"content": []}
        except (ModelThrottledException, ContextWindowOverflowException) as exc:
            cause = openai_cause(exc)
            if cause is not None:
                raise cause from exc  # classified by the runner as the provider's error
            raise
        finally:
            self.policy = None
        return "".join(b["text"] for b in message.get("content", []) if "text" in b)


# --------------------------------------------------------------------------- the workflow graph

#: the key of the workflow's progress in the graph's ``invocation_state``
PROGRESS = "mastif_workflow"


@dataclass
class Progress:
    """Where the workflow is: the loop's round and whether a ``stop_when`` matched."""

    plan: WorkflowPlan
    round: int = 0
    stopped: bool = False

    def step_for(self, node: PlannedNode) -> int:
        if node not in self.plan.loop:
            return 1
        if node.name == self.plan.loop[0].name:
            self.round += 1
        return self.round

    def leave(self, node: PlannedNode, text: str) -> None:
        if node in self.plan.loop:
            self.stopped = node.stops_loop(text)

    def loop_goes_on(self) -> bool:
        return not self.stopped and self.round < self.plan.max_steps


class WorkflowNode:
    """A graph node's executor (a Strands ``AgentBase``): each execution is one visit of its
    workflow node, dispatched (the node's ``Agent``, or an A2A request)."""

    def __init__(self, ctx: RunContext, dispatch: Dispatch, node: PlannedNode) -> None:
        self.ctx, self.dispatch, self.node = ctx, dispatch, node
        self.name = node.name

    async def stream_async(
        self, prompt: Any = None, *, invocation_state: dict[str, Any] | None = None, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        # prompt: the graph's own node input ("Original Task: ... Inputs from previous nodes");
        # the visit's prompt is mastif's, rendered from the run's history by visit_node
        progress: Progress = (invocation_state or {})[PROGRESS]
        step = progress.step_for(self.node)
        text = await visit_node(self.ctx, self.dispatch, self.node, step)
        progress.leave(self.node, text)
        message = {"role": "assistant", "content": [{"text": text}]}
        yield {"result": AgentResult("end_turn", message, EventLoopMetrics(), {})}  # type: ignore[arg-type]

    async def invoke_async(self, prompt: Any = None, **kwargs: Any) -> AgentResult:
        result = None
        async for event in self.stream_async(prompt, **kwargs):
            result = event.get("result", result)
        assert isinstance(result, AgentResult)
        return result

    def __call__(self, prompt: Any = None, **kwargs: Any) -> AgentResult:
        return asyncio.run(self.invoke_async(prompt, **kwargs))


def add_edges(builder: GraphBuilder, plan: WorkflowPlan, names: list[str]) -> None:
    """The workflow's rules as the graph's edges (see the module)."""
    loop = [n.name for n in plan.loop] if plan.loop and plan.max_steps >= 1 else []
    before, after = [n.name for n in plan.before], [n.name for n in plan.after]
    line = before + loop[:1] if loop else before + after[:1]
    for a, b in zip(line, line[1:], strict=False):
        builder.add_edge(a, b)

    def goes_on(state: Any, *, invocation_state: dict[str, Any], **kwargs: Any) -> bool:
        return not invocation_state[PROGRESS].stopped

    def next_round(state: Any, *, invocation_state: dict[str, Any], **kwargs: Any) -> bool:
        return bool(invocation_state[PROGRESS].loop_goes_on())

    def leaves(state: Any, *, invocation_state: dict[str, Any], **kwargs: Any) -> bool:
        return not invocation_state[PROGRESS].loop_goes_on()

    def stops(state: Any, *, invocation_state: dict[str, Any], **kwargs: Any) -> bool:
        return bool(invocation_state[PROGRESS].stopped)

    for i, name in enumerate(loop):
        last = i == len(loop) - 1
        builder.add_edge(name, loop[0] if last else loop[i + 1], next_round if last else goes_on)
        if after:
            builder.add_edge(name, after[0], leaves if last else stops)
    for a, b in zip(after, after[1:], strict=False):
        builder.add_edge(a, b)
    builder.set_entry_point(names[0])


@dataclass
class WorkflowGraph:
    """The run's Strands graph and the task it is invoked with."""

    graph: Any
    ctx: RunContext

    async def run(self) -> str:
        progress = Progress(self.ctx.plan)
        result = await self.graph.invoke_async(
            self.ctx.task.confirmed_task, invocation_state={PROGRESS: progress}
        )
        if result.status != Status.COMPLETED:
            raise RuntimeError(f"the Strands graph ended {result.status.value}")
        outputs = self.ctx.recorder.node_outputs
        return outputs[-1].text if outputs else ""


def build_graph(ctx: RunContext, dispatch: Dispatch) -> WorkflowGraph:
    """The linear workflow as a Strands ``Graph`` whose node visits go to ``dispatch``."""
    plan = ctx.plan
    runs_loop = bool(plan.loop) and plan.max_steps >= 1
    nodes = [*plan.before, *(plan.loop if runs_loop else ()), *plan.after]
    builder = GraphBuilder()
    for node in nodes:
        builder.add_node(WorkflowNode(ctx, dispatch, node), node.name)
    add_edges(builder, plan, [n.name for n in nodes])
    builder.reset_on_revisit(True)
    visits = (
        len(plan.before) + len(plan.after) + (len(plan.loop) * plan.max_steps if runs_loop else 0)
    )
    builder.set_max_node_executions(visits)  # the plan's visits: bounds the cycle, never cuts
    builder.set_graph_id("mastif_workflow")
    return WorkflowGraph(builder.build(), ctx)


# --------------------------------------------------------------------------- the adapter


class StrandsAdapter:
    name = "strands"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("strands-agents", "openai")
    mcp_packages = ("mcp",)
    #: no private member of Strands is overridden or called
    private_members = ()

    async def run(self, ctx: RunContext) -> str:
        """The workflow graph, each node visit an invocation of the node's agent."""
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

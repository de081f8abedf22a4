"""BeeAI Framework: the workflow as a BeeAI ``Workflow``; every node visit one ``RequirementAgent`` run.

Orchestration. The linear workflow is a BeeAI ``Workflow`` (``beeai_framework.workflows``,
:func:`build_workflow`, once per run) with one step per workflow node, named after it. A step
makes its node's visit and returns the name of the step to run next, which is how BeeAI's
workflow routes: a node before or after the loop names the node after it; a loop node names the
next loop node, and the last one names the first loop node again (the cycle: the step counts the
round in the workflow's state) until ``max_steps`` rounds were made; a ``stop_when`` match names
the first node after the loop (or ``Workflow.END``) at once. BeeAI's runner follows the names;
mastif's ``drive_workflow`` is not used. Each step's visit is ``visit_node`` (the prompt rendered
from the run's history, handed to a dispatch, its output recorded): in :meth:`BeeAIAdapter.run`
the dispatch is the node's agent, under ``a2a`` (:meth:`BeeAIAdapter.orchestrate`, the same
workflow) an A2A request to the node's agent, which runs it with :meth:`BeeAIAdapter.run_node` on
the run's agents (built once per run, ``ctx.built``).

A node visit is one ``RequirementAgent.run(prompt)`` (BeeAI's recommended agent; its
``ToolCallingAgent`` is deprecated): BeeAI's own loop of model request, tool calls, model request,
... until a final answer. What BeeAI does by itself and keeps: its system prompt (role, "provide a
final answer to the user by calling the 'final_answer' tool", the tools with their descriptions,
notes, today's date) and its task wrapper ("Your task: <prompt>"); its tool schemas
(``use_strict_tool_schema``: ``strict: true``, every property required, no extra properties);
``parallel_tool_calls: false`` on requests with tools (yet every call of a reply is run, and
concurrently: ``asyncio.gather``); its repair of broken tool-call JSON (``parse_broken_json``);
its refusals (an unknown tool: "Tool 'x' does not exist!", arguments its schema model rejects) and
error texts ("The tool has failed; the error log is shown below. ..."), written back as ``tool``
messages; its error budget (3 failed calls per iteration, 20 per visit, then its ``AgentError``
ends the visit) and its extra request after an answer it cannot read.

What the contract makes us set or change, with BeeAI's own switches and one BeeAI run middleware
per node model (:class:`NodeTurns`, bound to every ``ChatModel.run``; it edits the request in the
model's ``start`` event and the reply in its ``success`` event): ``final_answer_as_tool=False``
(a text reply is the node's answer, BeeAI's option for it); BeeAI's ``final_answer`` tool is not
offered on the wire, only the protocol's tools, and none on a node that uses none; the node's
``tool_choice`` on the visit's first request and ``auto`` after; no tools once ``max_tool_rounds``
replies with tool calls were made, and tool calls in the reply to such a request are dropped (not
run); no retries of a model request (the model call's ``max_retries`` set to 0: the agent passes
its per-iteration error budget there too, which would resend a request); its tool-call cycle
checker off (``tool_call_checker=False``: it withdraws a tool and re-asks the model when the same
call is repeated, a hidden extra request). The agent's memory is cleared before each visit (the
history between nodes is mastif's, in the prompt). Calls BeeAI refuses before any tool runs are
recorded as failed with its own text, in the model's order (a place per call when the reply
arrives, ``RunRecorder.issue``).

Model: BeeAI's ``OpenAIChatModel`` (through litellm's OpenAI provider: the OpenAI SDK at
``ctx.llm_base_url(node)``, the gateway token as ``api_key``, litellm's ``max_retries`` 0, which
BeeAI always sends), one per workflow node; temperature, max_tokens and seed as its
``ChatModelParameters``; ``tool_choice_support`` given in full (BeeAI drops ``required`` for any
custom ``base_url`` otherwise, and would then force the call through a response format).

Tools: in-process, each a BeeAI ``Tool`` (:class:`GatewayTool`) whose input schema is BeeAI's
``JSONSchemaModel`` of the protocol's JSON schema and whose ``_run`` calls ``ctx.call_tool`` (a
failed call raises BeeAI's ``ToolError``, as its ``MCPTool`` does for an ``isError`` result).
Under ``mcp``: BeeAI's own ``MCPTool`` (``MCPTool.from_session``) on one MCP SDK
``ClientSession`` per run over streamable HTTP at ``ctx.mcp_url`` (the run's
``httpx_client_factory``), held in a task of its own as BeeAI's session provider holds it, but
closed with the run (:func:`open_mcp_tools`); its ``initialize`` declares the SDK's default
``clientInfo`` (``mcp``). The server records the calls.

Async and cancellation: BeeAI is asyncio-native (every run is a task of its ``RunContext``); a
cancelled run (timeout) cancels the workflow's task, the agent's and litellm's request.

No telemetry: BeeAI's core has no exporter (its OpenTelemetry instrumentation is the separate
``openinference-instrumentation-beeai``, not installed); litellm's model-cost map is read from its
package (``LITELLM_LOCAL_MODEL_COST_MAP``), its callbacks are cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

# litellm fetches its model-cost map from GitHub at import unless told to read its own copy
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import httpx  # noqa: E402
import litellm  # noqa: E402
import openai  # noqa: E402
from beeai_framework.adapters.openai import OpenAIChatModel  # noqa: E402
from beeai_framework.agents.requirement import RequirementAgent  # noqa: E402
from beeai_framework.backend import (  # noqa: E402
    AnyMessage,
    AssistantMessage,
    ChatModelOutput,
    ChatModelParameters,
    MessageTextContent,
    MessageToolCallContent,
    ToolMessage,
    UserMessage,
)
from beeai_framework.backend.errors import ChatModelToolCallError  # noqa: E402
from beeai_framework.backend.events import (  # noqa: E402
    ChatModelErrorEvent,
    ChatModelStartEvent,
    ChatModelSuccessEvent,
)
from beeai_framework.context import RunContext as BeeRunContext  # noqa: E402
from beeai_framework.emitter import Emitter, EventMeta  # noqa: E402
from beeai_framework.errors import FrameworkError  # noqa: E402
from beeai_framework.template import PromptTemplate  # noqa: E402
from beeai_framework.tools import StringToolOutput, Tool, ToolError, ToolRunOptions  # noqa: E402
from beeai_framework.tools.mcp import MCPTool  # noqa: E402
from beeai_framework.utils.models import JSONSchemaModel  # noqa: E402
from beeai_framework.utils.strings import to_safe_word  # noqa: E402
from beeai_framework.workflows import Workflow  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from mastif.frameworks.base import Dispatch, RunContext  # noqa: E402
from mastif.frameworks.orchestration import visit_node  # noqa: E402
from mastif.frameworks.plan import PlannedNode  # noqa: E402
from mastif.tools import ToolResult  # noqa: E402

# nothing of litellm's logging leaves the machine: no success/failure callbacks (litellm has
# no telemetry of its own any more; its cost map is local, above)
litellm.callbacks = []
litellm.success_callback = []
litellm.failure_callback = []

#: the name of BeeAI's own answer tool (the agent's, never offered on the wire here)
FINAL_ANSWER = "final_answer"
#: every ``tool_choice`` the gateway's OpenAI-compatible endpoint takes
TOOL_CHOICE_SUPPORT = {"required", "none", "single", "auto"}

# --------------------------------------------------------------------------- a node visit


def tool_rounds(messages: list[AnyMessage]) -> int:
    """Replies with tool calls so far in a visit (each one a tool round)."""
    return sum(1 for m in messages if isinstance(m, AssistantMessage) and m.get_tool_calls())


@dataclass
class Visit:
    """The node visit in progress (a run's visits are sequential): the record's places of the
    latest reply's calls, the calls that reached a tool, those recorded as refused."""

    node: PlannedNode
    step: int
    #: whether the latest request offered tools
    offered: bool = False
    places: dict[str, int] = field(default_factory=dict)
    reached: set[str] = field(default_factory=set)
    recorded: set[str] = field(default_factory=set)


class TextUserMessage(UserMessage):
    """A user turn whose text parts go out as one string.

    BeeAI writes a user turn's content as a list of text parts; OpenAI accepts that, but the
    contract's scripted server and the gateway's llama.cpp mend read a string (as for
    smolagents' ``flatten_messages_as_text``). BeeAI joins a system message's parts so."""

    def to_plain(self) -> dict[str, Any]:
        plain = super().to_plain()
        if all(isinstance(c, MessageTextContent) for c in self.content):
            plain["content"] = "\n".join(c.text for c in self.content)
        return plain


def as_text(message: AnyMessage) -> AnyMessage:
    if type(message) is UserMessage:
        return TextUserMessage(list(message.content), message.meta, id=message.id)
    return message


class NodeTurns:
    """mastif's turn policy for one node's model, as a BeeAI run middleware: bound to every run
    of the model, it edits the request in the model's ``start`` event (tools, ``tool_choice``,
    retries, user turns as text) and the reply in its ``success`` event; refused calls are
    recorded from there."""

    def __init__(self, objects: RunObjects, node: PlannedNode, offers_tools: bool) -> None:
        self.objects = objects
        self.node = node
        self.offers_tools = offers_tools

    def bind(self, ctx: BeeRunContext) -> None:
        # the model run's own events (not nested ones); the listeners die with the run
        ctx.emitter.on("start", self.on_start)
        ctx.emitter.on("success", self.on_success)
        ctx.emitter.on("error", self.on_error)

    def on_start(self, event: ChatModelStartEvent, meta: EventMeta) -> None:
        request = event.input
        objects = self.objects
        objects.record_refusals(request.messages)
        request.messages = [as_text(m) for m in request.messages]
        # the gateway retries; BeeAI would resend the request (the agent passes its error budget)
        request.max_retries = 0
        rounds = tool_rounds(request.messages)
        names = objects.tool_names
        tools = [t for t in request.tools or [] if t.name in names]  # not BeeAI's final_answer
        visit = objects.visit
        offered = self.offers_tools and bool(tools) and rounds < objects.max_rounds
        if visit is not None:
            visit.offered = offered
        if offered:
            request.tools = tools
            request.tool_choice = self.node.spec.tool_choice if rounds == 0 else "auto"
        else:  # a node without tools, or the request after the last tool round: text only
            request.tools = None
            request.tool_choice = None

    def on_success(self, event: ChatModelSuccessEvent, meta: EventMeta) -> None:
        visit = self.objects.visit
        output = event.value
        if visit is None:
            return
        if not visit.offered:
            # tool calls in a reply to a request without tools are not run
            for message in list(output.output):
                if not isinstance(message, AssistantMessage):
                    continue
                for call in message.get_tool_calls():
                    message.content.remove(call)
                if not message.content:
                    output.output.remove(message)
            return
        recorder = self.objects.ctx.recorder
        for call in output.get_tool_calls():  # each call's place: the model's order
            if call.tool_name != FINAL_ANSWER:
                visit.places[call.id] = recorder.issue()

    def on_error(self, event: ChatModelErrorEvent, meta: EventMeta) -> None:
        """A reply BeeAI rejects as a whole: a call whose arguments are not JSON (its litellm
        adapter: "Response could not be produced because it is invalid."), an unknown tool
        under a forced ``tool_choice``: none of its calls runs; each is recorded as refused."""
        error = event.error
        if isinstance(error, ChatModelToolCallError):
            output, said = error.response, error.generated_error or error.message
        else:
            output, said = error.context.get("output"), error.message
        if not isinstance(output, ChatModelOutput):
            return
        for call in output.get_tool_calls():
            if call.tool_name != FINAL_ANSWER:
                self.objects.record_refused(call, said)


class Reached:
    """A BeeAI run middleware on every protocol tool: marks the calls that reached the tool (its
    ``start`` event comes after BeeAI validated the input), so the others are known refused."""

    def __init__(self, objects: RunObjects) -> None:
        self.objects = objects

    def bind(self, ctx: BeeRunContext) -> None:
        def started(data: Any, meta: EventMeta) -> None:
            call = ctx.context.get("tool_call_msg")
            visit = self.objects.visit
            if visit is not None and isinstance(call, MessageToolCallContent):
                visit.reached.add(call.id)

        ctx.emitter.on("start", started)


class GatewayTool(Tool[BaseModel, ToolRunOptions, StringToolOutput]):
    """A protocol tool as a BeeAI tool (its JSON schema as BeeAI's ``JSONSchemaModel``)
    calling ``ctx.call_tool``."""

    def __init__(self, objects: RunObjects, spec: Any) -> None:
        super().__init__()
        self._objects = objects
        self._spec = spec
        self._schema = JSONSchemaModel.create(spec.name, spec.parameters)

    @property
    def name(self) -> str:
        return str(self._spec.name)

    @property
    def description(self) -> str:
        return str(self._spec.description)

    @property
    def input_schema(self) -> type[BaseModel]:
        return self._schema

    def _create_emitter(self) -> Emitter:
        return Emitter.root().child(
            namespace=["tool", "mastif", to_safe_word(self.name)], creator=self
        )

    async def _run(
        self, input: BaseModel, options: ToolRunOptions | None, context: BeeRunContext
    ) -> StringToolOutput:
        ctx = self._objects.ctx
        call = context.context.get("tool_call_msg")
        visit = self._objects.visit
        place = visit.places.get(call.id) if visit is not None and call is not None else None
        # what BeeAI hands a tool: the validated input, as its MCPTool sends it
        arguments = input.model_dump(exclude_unset=True)
        result = await ctx.call_tool(ctx.node, ctx.step, self.name, arguments, place)
        if not result.ok:  # BeeAI's way to show a tool's error to the model
            raise ToolError(result.error or f"{self.name} failed")
        return StringToolOutput(result.output)


def gateway_model(ctx: RunContext, node: str, turns: NodeTurns) -> OpenAIChatModel:
    """BeeAI's OpenAI chat model at the node's gateway URL, with the node's turn policy."""
    s = ctx.client_settings(node)
    sampling = s.sampling()
    return OpenAIChatModel(
        s.model,
        api_key=s.api_key,
        base_url=s.base_url,
        parameters=ChatModelParameters(
            temperature=sampling["temperature"],
            max_tokens=sampling["max_tokens"],
            seed=sampling["seed"],
            stream=False,
        ),
        tool_choice_support=set(TOOL_CHOICE_SUPPORT),
        settings={"timeout": s.timeout_s},
        # no cache_control marks in the messages (litellm's prompt-caching injection)
        allow_prompt_caching=False,
        middlewares=[turns],
    )


def verbatim_prompt(template: PromptTemplate[Any]) -> PromptTemplate[Any]:
    """BeeAI's task template ("Your task: <prompt>") with the prompt as it is: its mustache
    ``{{prompt}}`` HTML-escapes the node prompt (a quote becomes ``&quot;``)."""

    def unescaped(config: Any) -> Any:
        return config.model_copy(
            update={"template": config.template.replace("{{prompt}}", "{{&prompt}}")}
        )

    return template.fork(unescaped)


def provider_error(exc: BaseException) -> BaseException | None:
    """The model client's error under BeeAI's wrappers, so the run's error is classified like
    other frameworks': litellm's errors are OpenAI's, but it reports an endpoint it cannot reach
    as a 500 ("Connection error."); the OpenAI SDK's connection error it was raised from (its
    context) is preferred then."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and all(cause is not c for c in chain):
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    unreachable = (openai.APIConnectionError, httpx.TransportError)
    for kinds in (unreachable, (openai.OpenAIError, httpx.HTTPError, TimeoutError)):
        found = next((c for c in chain if isinstance(c, kinds)), None)
        if found is not None:
            return found
    return None


@dataclass
class RunObjects:
    """What a run builds once: the tools (under ``mcp`` BeeAI's ``MCPTool`` s) and one agent
    per node."""

    ctx: RunContext
    agents: dict[str, RequirementAgent] = field(default_factory=dict)
    tools: list[Any] = field(default_factory=list)
    tool_names: frozenset[str] = frozenset()
    max_rounds: int = 0
    #: the visit in progress
    visit: Visit | None = None

    @classmethod
    async def open(cls, ctx: RunContext, stack: contextlib.AsyncExitStack) -> RunObjects:
        """Build the run's agents; what they hold open is closed with ``stack``."""
        objects = cls(ctx, max_rounds=ctx.generation.max_tool_rounds)
        nodes = ctx.plan.nodes
        specs = ctx.tools.tool_specs()
        if specs and any(n.spec.use_tools for n in nodes):
            if ctx.mcp_url is not None:
                objects.tools = await open_mcp_tools(ctx, stack)
            else:
                objects.tools = [GatewayTool(objects, s) for s in specs]
            reached = Reached(objects)
            for tool in objects.tools:
                tool.middlewares.append(reached)
        objects.tool_names = frozenset(t.name for t in objects.tools)
        for node in nodes:
            use_tools = node.spec.use_tools and bool(objects.tools)
            turns = NodeTurns(objects, node, use_tools)
            objects.agents[node.name] = RequirementAgent(
                llm=gateway_model(ctx, node.name, turns),
                tools=objects.tools if use_tools else [],
                name=node.name,
                # a text reply is the answer (BeeAI's option); the cycle checker's re-asking off
                final_answer_as_tool=False,
                tool_call_checker=False,
                templates={"task": verbatim_prompt},
            )
        return objects

    async def visit_agent(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node``: one run of its agent (BeeAI's agent loop)."""
        self.ctx.at(node.name, step)
        agent = self.agents[node.name]
        agent.memory.reset()  # each visit starts afresh: the history is in the prompt
        self.visit = Visit(node, step)
        try:
            output = await agent.run(prompt)
            self.record_refusals(output.state.memory.messages)
        except FrameworkError as exc:
            cause = provider_error(exc)
            if cause is not None:
                raise cause from None  # BeeAI's wrappers add nothing a run's record needs
            raise
        finally:
            self.visit = None
        return output.last_message.text

    def record_refusals(self, messages: list[AnyMessage]) -> None:
        """Record the latest reply's calls BeeAI answered without running a tool, with its own
        text (the ``tool`` message it wrote back), each at its place in the model's order."""
        visit = self.visit
        asked = next(
            (
                m
                for m in reversed(messages)
                if isinstance(m, AssistantMessage) and m.get_tool_calls()
            ),
            None,
        )
        if visit is None or asked is None:
            return
        said = {
            c.tool_call_id: c.result
            for m in messages[messages.index(asked) + 1 :]
            if isinstance(m, ToolMessage)
            for c in m.content
        }
        for call in asked.get_tool_calls():
            if call.id in visit.reached or call.tool_name == FINAL_ANSWER or call.id not in said:
                continue
            self.record_refused(call, said[call.id])

    def record_refused(self, call: MessageToolCallContent, said: str) -> None:
        visit = self.visit
        if visit is None or call.id in visit.recorded:
            return
        visit.recorded.add(call.id)
        offered = sorted(self.tool_names)
        error = (
            f"unknown tool {call.tool_name!r}; offered: {offered} (BeeAI: {said})"
            if call.tool_name not in self.tool_names
            else f"arguments refused by BeeAI: {said}"
        )
        place = visit.places.get(call.id) or self.ctx.recorder.issue()
        self.ctx.recorder.tool_call(
            visit.node.name, visit.step, call.tool_name, call.args, ToolResult(False, "", error),
            place,
        )  # fmt: skip


async def open_mcp_tools(ctx: RunContext, stack: contextlib.AsyncExitStack) -> list[Any]:
    """BeeAI's ``MCPTool`` s of the run's MCP server, on one MCP SDK ``ClientSession`` over
    streamable HTTP held for the run.

    As BeeAI's own session provider (``MCPTool.from_client``) does, the session lives in a task
    of its own, so whichever task closes the run (under ``a2a`` not the one that opened it) can
    end it; unlike the provider, which ends it once every tool was garbage-collected, closing
    ``stack`` ends it and waits for it to be closed."""
    from mcp import ClientSession

    from mastif.frameworks.mcp_transport import streamable_http

    assert ctx.mcp_url is not None
    factory = {"httpx_client_factory": ctx.mcp_http} if ctx.mcp_http is not None else {}
    opened: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        async with (
            streamable_http(ctx.mcp_url, **factory) as (read, write, *_),  # type: ignore[arg-type]
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            opened.set_result(session)
            await stop.wait()

    task = asyncio.create_task(hold(), name=f"mcp-session-{ctx.run_id[:8]}")

    async def close() -> None:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)

    stack.push_async_callback(close)
    await asyncio.wait([task, opened], return_when=asyncio.FIRST_COMPLETED)
    if not opened.done():
        task.result()  # its error (the session could not be opened)
        raise RuntimeError("the MCP session ended before it was opened")
    return list(await MCPTool.from_session(opened.result()))


# --------------------------------------------------------------------------- the workflow


class WorkflowState(BaseModel):
    """The BeeAI workflow's state: the loop's round and the latest node output."""

    round: int = 1
    answer: str = ""


def build_workflow(ctx: RunContext, dispatch: Dispatch) -> Workflow[WorkflowState, str]:
    """The linear workflow as a BeeAI ``Workflow`` whose steps (one per node) hand their visits
    to ``dispatch`` and return the next step's name (the loop: the first loop node's again)."""
    plan = ctx.plan
    before, loop, after = plan.before, plan.loop, plan.after
    after_loop = after[0].name if after else Workflow.END
    loop_entry = loop[0].name if loop and plan.max_steps >= 1 else after_loop

    def line(nodes: tuple[PlannedNode, ...], then: str) -> dict[str, str]:
        """Where each node of a line goes: the next node, then ``then``."""
        return {n.name: (nodes[i + 1].name if i + 1 < len(nodes) else then)
                for i, n in enumerate(nodes)}  # fmt: skip

    next_after = {**line(before, loop_entry), **line(after, Workflow.END)}

    def straight(node: PlannedNode) -> Any:
        async def handler(state: WorkflowState) -> str:
            state.answer = await visit_node(ctx, dispatch, node, 1)
            return next_after[node.name]

        return handler

    def in_loop(index: int) -> Any:
        node = loop[index]

        async def handler(state: WorkflowState) -> str:
            state.answer = await visit_node(ctx, dispatch, node, state.round)
            if node.stops_loop(state.answer):
                return after_loop  # a stop_when match ends the loop at once
            if index + 1 < len(loop):
                return loop[index + 1].name
            if state.round < plan.max_steps:
                state.round += 1
                return loop[0].name  # the cycle: the next round
            return after_loop

        return handler

    workflow: Workflow[WorkflowState, str] = Workflow(WorkflowState, name="mastif_workflow")
    for node in before:
        workflow.add_step(node.name, straight(node))
    for index, node in enumerate(loop):
        workflow.add_step(node.name, in_loop(index))
    for node in after:
        workflow.add_step(node.name, straight(node))
    first = before[0].name if before else loop_entry
    if first != Workflow.END:
        workflow.set_start(first)
    return workflow


async def run_workflow(workflow: Workflow[WorkflowState, str]) -> str:
    """Run ``workflow`` to its end; its last node output. An error a step raised comes out as
    it was raised (BeeAI wraps it in its ``FrameworkError``)."""
    if not workflow.step_names or workflow.start_step is None:
        return ""
    try:
        run = await workflow.run(WorkflowState())
    except FrameworkError as exc:
        cause: BaseException = exc
        while isinstance(cause, FrameworkError) and cause.__cause__ is not None:
            cause = cause.__cause__
        if cause is not exc and not isinstance(cause, FrameworkError):
            raise cause from None  # what the step raised, as it raised it
        raise
    return run.state.answer


# --------------------------------------------------------------------------- the adapter


class BeeAIAdapter:
    name = "beeai"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("beeai-framework", "litellm", "openai")
    mcp_packages = ("mcp",)
    #: no private member of BeeAI or litellm is overridden or called
    private_members = ()

    async def run(self, ctx: RunContext) -> str:
        """The BeeAI workflow, each node visit a run of the node's agent."""
        async with contextlib.AsyncExitStack() as stack:
            with ctx.setting_up():
                objects = await RunObjects.open(ctx, stack)
            return await self.orchestrate(ctx, objects.visit_agent)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The BeeAI workflow, each node visit handed to ``dispatch`` (in :meth:`run` the
        node's agent; under ``a2a`` an A2A request to the node's agent)."""
        with ctx.setting_up():
            workflow = build_workflow(ctx, dispatch)
        return await run_workflow(workflow)

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
        return await objects.visit_agent(node, step, prompt)

"""Semantic Kernel: the workflow on a ``Kernel`` with the tools as a plugin.

Mapping. One ``Kernel`` per run holds the protocol's tools as one plugin of kernel
functions (``KernelFunctionFromMethod`` with explicit ``KernelParameterMetadata``: each
parameter's ``schema_data`` is the tool's JSON schema for it) and one
``OpenAIChatCompletion`` service per workflow node (``service_id`` = node name), each with
its own ``AsyncOpenAI`` client at ``ctx.llm_base_url(node)`` so the gateway attributes every
request to its node. A node visit is a fresh ``ChatHistory`` holding the rendered node
prompt and one ``get_chat_message_content`` call. A node that uses tools runs it with
``FunctionChoiceBehavior.Auto`` (or ``Required``) and ``maximum_auto_invoke_attempts =
max_tool_rounds``: SK's own auto-invoke loop then asks the model, runs the requested kernel
functions, appends their results to the history and asks again, and after the last round
makes one more request without tools so the node ends in text. Other nodes get no function
calling.

Orchestration. The workflow is an SK process (the Process Framework, experimental in SK
1.45): ``ProcessBuilder`` with one step per workflow node (``NodeStep``, its kernel function
``visit(context, step)`` is one node visit), run once per run by SK's local runtime
(``start``). Each step emits an event its edges route: DONE to the next node, CONTINUE to the
next loop node (the last one's to the first, with the next round's step), STOP out of the
loop (a ``stop_when`` match, or the last round done) — the rules of
``mastif.frameworks.plan.drive_workflow``; the final answer is the last node output. The process
runs on a kernel of its own (SK's runtime adds each step to its kernel as a plugin, which
automatic function calling would offer the model as tools). The history every prompt shows
is the run's (``WorkflowRun``), not the process's.

The kernel, its chat services (one per node of the plan) and their clients, and under
``mcp`` SK's MCP plugin session, are opened once per run, on first use
(:meth:`SemanticKernelAdapter.kernel`): kept in ``ctx.built``, entered into
``ctx.resources`` (closed by the runner when the run ends). The process and, for an
orchestrator (``a2a``, the hierarchical shape), every ``run_node`` visit use that one kernel.

Tools on the wire are SK's own. SK offers a plugin function as ``<plugin>-<function>``
(``mastif_tools-datetime``) with a parameters object it builds from the function's parameter
metadata (``{"type": "object", "properties": <each parameter's schema_data>, "required":
[...]}``: the tool's property schemas as they are, no ``additionalProperties``), in-process
and from SK's MCP plugin alike. SK resolves a call by its bare name too. The one thing of the
shared turn policy SK does not do itself: with ``tool_choice: required`` the first request of
a node visit says ``required`` and later ones ``auto`` (SK would repeat ``required`` on every
round; ``GatewayChatCompletion._inner_get_chat_message_contents``).

Tool calls. Each kernel function calls ``ctx.call_tool`` with the arguments SK parsed from the
model's JSON (typed, unchanged), under the protocol's tool name whatever name SK resolved.
Calls SK refuses before any function runs — a name it cannot resolve, arguments it cannot
parse (after its own single-quote repair), missing or unexpected arguments — only leave SK's
own text for the model in the chat history; a ``Kernel`` subclass wraps SK's
``invoke_function_call`` and records those as failed calls (the model's name and arguments,
SK's text in the error); the calls SK ran are known from SK's auto function invocation
filter. SK starts the calls of one reply concurrently (``asyncio.gather``, its default, kept)
and appends each tool message when its call is done, so a refusal's message comes before a
slower tool's result; the trace keeps the model's order (see ``RecordingKernel``).

A legacy ``function_call`` beside ``tool_calls`` in a reply (llama-cpp-python sends one) is
not turned into an extra call (see ``GatewayChatCompletion``).

Errors. SK wraps the OpenAI client's exceptions in ``ServiceResponseException``; the adapter
re-raises the client's own exception so the runner classifies provider errors and timeouts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from enum import Enum
from itertools import pairwise
from typing import Any

import httpx
import openai
from openai import AsyncOpenAI
from pydantic import PrivateAttr
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import (
    OpenAIChatCompletion,
    OpenAIChatPromptExecutionSettings,
)
from semantic_kernel.connectors.mcp import MCPStreamableHttpPlugin
from semantic_kernel.contents import ChatHistory, ChatMessageContent
from semantic_kernel.contents.function_call_content import FunctionCallContent
from semantic_kernel.contents.function_result_content import FunctionResultContent
from semantic_kernel.exceptions import FunctionCallInvalidArgumentsException, KernelException
from semantic_kernel.filters import AutoFunctionInvocationContext, FilterTypes
from semantic_kernel.functions import (
    KernelFunctionFromMethod,
    KernelParameterMetadata,
    kernel_function,
)
from semantic_kernel.functions.kernel_plugin import KernelPlugin
from semantic_kernel.processes import ProcessBuilder
from semantic_kernel.processes.kernel_process import (
    KernelProcess,
    KernelProcessStep,
    KernelProcessStepContext,
    KernelProcessStepState,
)
from semantic_kernel.processes.local_runtime.local_kernel_process import start

from mastif.core.provenance import PrivateMember, private_members_of
from mastif.core.trace import NodeOutput
from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.mcp_transport import streamable_http
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode, WorkflowPlan

#: the plugin holding the tools; SK offers each as ``<plugin>-<tool>`` (its own naming)
PLUGIN_NAME = "mastif_tools"

# --------------------------------------------------------------------------- the connector


class GatewayChatCompletion(OpenAIChatCompletion):
    """SK's OpenAI connector, with the turn policy's ``tool_choice`` and a server mend.

    Tools are offered as SK offers them (its own callback): ``<plugin>-<function>`` with the
    parameters object SK builds from the function's parameter metadata.
    """

    def _get_function_call_from_chat_choice(self, choice: Any) -> list[FunctionCallContent]:
        # SK turns a legacy ``function_call`` into one more call beside ``tool_calls``. OpenAI
        # never sends both; llama-cpp-python's chatml-function-calling handler (0.3.x) does,
        # for a single tool call, under the name of its follow-up completion ("python_repl:"),
        # so SK would run a phantom call and echo it back. With tool calls present it is
        # ignored; elsewhere SK's handling stands. (Better mended at the server: see report.)
        message = getattr(choice, "message", None) or getattr(choice, "delta", None)
        if message is not None and getattr(message, "tool_calls", None):
            return []
        return super()._get_function_call_from_chat_choice(choice)

    async def _inner_get_chat_message_contents(
        self, chat_history: ChatHistory, settings: Any
    ) -> list[ChatMessageContent]:
        try:
            return await super()._inner_get_chat_message_contents(chat_history, settings)
        finally:
            # tool_choice "required" holds for a node visit's first request only (as in every
            # adapter); SK's auto-invoke loop reuses this settings object for later rounds
            if getattr(settings, "tool_choice", None) == "required":
                settings.tool_choice = "auto"


def chat_service(ctx: RunContext, node: str, client: AsyncOpenAI) -> GatewayChatCompletion:
    return GatewayChatCompletion(service_id=node, ai_model_id=ctx.model_name, async_client=client)


def gateway_client(ctx: RunContext, node: str) -> AsyncOpenAI:
    s = ctx.client_settings(node)
    return AsyncOpenAI(
        base_url=s.base_url, api_key=s.api_key, **s.client_options(), http_client=s.http_async
    )


class GatewayMCPPlugin(MCPStreamableHttpPlugin):
    """SK's streamable-HTTP MCP plugin on the MCP SDK's current client, its httpx client
    from the run's factory (``RunContext.mcp_http``: exchanges timed, the server's key sent)."""

    def __init__(self, *args: Any, http_factory: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.http_factory = http_factory

    def get_mcp_client(self) -> Any:
        # what SK's own passes to the SDK's deprecated streamablehttp_client: the URL and
        # the factory (no headers, timeouts or terminate_on_close of its own are set)
        extra = {"httpx_client_factory": self.http_factory} if self.http_factory else {}
        return streamable_http(self.url, **extra)


# --------------------------------------------------------------------------- tool calls


def refusal_text(function_call: FunctionCallContent, history: ChatHistory) -> str:
    """What SK told the model about a call it did not run (the tool message it appended)."""
    call_id = function_call.id or "unknown"
    for msg in reversed(history.messages):
        for item in msg.items:
            if isinstance(item, FunctionResultContent) and item.id == call_id:
                return str(item.result)
    return ""


def refused_call(
    kernel: Kernel, function_call: FunctionCallContent, sk_text: str
) -> tuple[str, Any, str]:
    """(name, arguments, error) for a call SK refused before any function ran: the model's
    name and arguments (parsed by SK's own parser where it can), why SK refused it (by SK's
    own name resolution and argument parsing) and what SK told the model."""
    name = function_call.name or "<unnamed>"
    raw = function_call.arguments
    said = f" (Semantic Kernel: {sk_text})"
    try:
        kernel.get_function(function_call.plugin_name, function_call.function_name)
        known = True
    except KernelException:
        known = False
    try:
        parsed: Any = function_call.parse_arguments() if raw else {}  # SK's own parsing
    except FunctionCallInvalidArgumentsException:
        parsed = raw
        if known:
            return name, raw, f"arguments are not valid JSON: {raw!r}"[:300] + said
    parsed = {} if parsed is None else parsed  # "null": SK calls with no arguments
    if not known:
        offered = sorted(
            f.fully_qualified_name for f in kernel.get_full_list_of_function_metadata()
        )
        return name, parsed, f"unknown tool {name!r}; offered: {offered}{said}"
    if not isinstance(parsed, dict):
        return name, raw, f"arguments are not a JSON object: {raw!r}"[:300] + said
    return name, parsed, f"refused by Semantic Kernel before the tool ran{said}"


class RecordingKernel(Kernel):
    """SK's ``Kernel``, recording the tool calls its auto-invoke loop refuses.

    SK's loop hands every tool call of a reply to ``invoke_function_call`` at once
    (``asyncio.gather``, SK's default and kept): each checks the call and either refuses it
    (a tool message for the model, no function run) or runs the function, and appends its
    tool message when it is done. Which calls ran is known from SK's own auto function
    invocation filter (:meth:`invoked`); the others are recorded here as failed calls.
    Records keep the model's order: ``gather`` starts the calls in that order, a refusal is
    recorded before its call's task first waits, and a call that runs takes its place in
    the trace (``ctx.call_tool`` -> ``RunRecorder.issue``) before its tool first waits.
    """

    _ctx: RunContext | None = PrivateAttr(default=None)
    #: the function calls SK invoked a function for (ids of their FunctionCallContent)
    _invoked: set[int] = PrivateAttr(default_factory=set)

    async def invoked(self, context: AutoFunctionInvocationContext, next: Any) -> None:
        """The auto function invocation filter: SK calls it only for a call it runs."""
        if context.function_call_content is not None:
            self._invoked.add(id(context.function_call_content))
        await next(context)

    async def invoke_function_call(  # type: ignore[override]
        self, function_call: FunctionCallContent, chat_history: ChatHistory, **kwargs: Any
    ) -> Any:
        ctx = self._ctx
        if ctx is None:
            return await super().invoke_function_call(function_call, chat_history, **kwargs)
        node, step = ctx.node, ctx.step
        try:
            result = await super().invoke_function_call(function_call, chat_history, **kwargs)
        finally:
            ran = id(function_call) in self._invoked
            self._invoked.discard(id(function_call))
        if not ran:  # SK refused it: no function ran (its own text went to the model)
            sk_text = refusal_text(function_call, chat_history)
            name, args, error = refused_call(self, function_call, sk_text)
            ctx.record_failed_tool_call(node, step, name, args, error)
        return result


def tools_plugin(ctx: RunContext) -> KernelPlugin:
    """The protocol's tools as kernel functions; each execution goes through ``ctx.call_tool``
    (recorded at the run's node visit in progress)."""

    def make(spec: Any) -> KernelFunctionFromMethod:
        schema = spec.parameters
        required = set(schema.get("required") or [])

        @kernel_function(name=spec.name, description=spec.description)
        async def call(**arguments: Any) -> str:
            # ``arguments``: the model's JSON as SK parsed it, with no type coercion
            result = await ctx.call_tool(ctx.node, ctx.step, spec.name, dict(arguments))
            # a failure reads as the tool's error text, as an MCP server's isError result does
            return result.output if result.ok else (result.error or "")

        params = [
            KernelParameterMetadata(
                name=pname,
                description=pschema.get("description"),
                default_value=pschema.get("default"),
                # no type_object: SK hands the value over as parsed, without coercion
                type_=pschema.get("type"),
                is_required=pname in required,
                schema_data=pschema,  # the tool's JSON schema for this parameter, verbatim
            )
            for pname, pschema in (schema.get("properties") or {}).items()
        ]
        return KernelFunctionFromMethod(method=call, plugin_name=PLUGIN_NAME, parameters=params)

    return KernelPlugin(name=PLUGIN_NAME, functions=[make(s) for s in ctx.tools.tool_specs()])


# --------------------------------------------------------------------------- the workflow


class NodeEvents(Enum):
    """The events of the workflow process."""

    #: the process's input event: the first node's first visit
    START = "start"
    #: a node before or after the loop is done: on to the next node
    DONE = "done"
    #: a loop node is done and the loop goes on: the next loop node (the first one, with
    #: the next round's step, after the last)
    CONTINUE = "continue"
    #: a loop node ended the loop (its ``stop_when`` matched, or the last round is done)
    STOP = "stop"


class WorkflowRun:
    """What the node steps of one run share: the run, its kernel, the node outputs so far.

    ``kernel`` holds the tools and the chat services (one per node); the process runs on
    ``process_kernel``, because SK's local runtime adds every step to the kernel it runs on
    as a plugin, and automatic function calling offers a kernel's every function as a tool.
    """

    def __init__(self, ctx: RunContext, dispatch: Dispatch):
        self.ctx, self.dispatch = ctx, dispatch
        self.process_kernel = Kernel()
        self.nodes = {n.name: n for n in ctx.plan.nodes}
        self.outputs: list[NodeOutput] = []
        #: the exception a node visit raised (SK's runtime keeps only its text)
        self.error: BaseException | None = None

    async def visit(self, name: str, step: int, context: KernelProcessStepContext) -> None:
        """One node visit, then the event that routes the process on."""
        ctx, plan, node = self.ctx, self.ctx.plan, self.nodes[name]
        try:
            # the prompt from the run's history, the visit, its output recorded
            text = await visit_node(ctx, self.dispatch, node, step)
        except Exception as exc:
            self.error = exc
            raise
        self.outputs.append(ctx.recorder.node_outputs[-1])
        event, next_step = next_event(plan, node, step, text)
        await context.emit_event(event, data=next_step)


def next_event(
    plan: WorkflowPlan, node: PlannedNode, step: int, text: str
) -> tuple[NodeEvents, int]:
    """The event a node emits after a visit, and the step of the visit it starts.

    The rules of :func:`mastif.frameworks.plan.drive_workflow`: a ``stop_when`` match ends the loop
    at once, and the loop ends after ``max_steps`` rounds.
    """
    if node not in plan.loop:
        return NodeEvents.DONE, 1
    if node.stops_loop(text):
        return NodeEvents.STOP, 1
    if node != plan.loop[-1]:
        return NodeEvents.CONTINUE, step
    if step >= plan.max_steps:
        return NodeEvents.STOP, 1
    return NodeEvents.CONTINUE, step + 1


class NodeStep(KernelProcessStep):
    """A workflow node as a process step; SK's runtime passes it the step of each visit."""

    #: the run it belongs to (None only where SK builds one to read its functions)
    run: WorkflowRun | None = None
    node: str = ""

    async def activate(self, state: KernelProcessStepState) -> None:
        self.node = state.name  # the step's name is the node's

    @kernel_function(name="visit")
    async def visit(self, context: KernelProcessStepContext, step: int) -> None:
        assert self.run is not None
        await self.run.visit(self.node, step, context)


def workflow_process(plan: WorkflowPlan, run: WorkflowRun) -> KernelProcess:
    """The linear workflow as an SK process: one step per node, routed by their events.

    START goes to the first node; a node before or after the loop sends DONE to the next
    one; a loop node sends CONTINUE to the next loop node (the last one to the first) and
    STOP to the first node after the loop; the last node's DONE ends the process.
    """
    builder = ProcessBuilder(name="mastif_workflow")
    steps = {
        n.name: builder.add_step(NodeStep, name=n.name, factory_function=lambda: NodeStep(run=run))
        for n in plan.nodes
    }
    loop = [steps[n.name] for n in plan.loop]
    before = [steps[n.name] for n in plan.before]
    after = [steps[n.name] for n in plan.after]
    line = [*before, *loop[:1]] if loop else [*before, *after]
    if not line:
        raise ValueError("workflow has no nodes")
    builder.on_input_event(NodeEvents.START).send_event_to(line[0])
    for a, b in pairwise(line):
        a.on_event(NodeEvents.DONE).send_event_to(b)
    for i, step in enumerate(loop):
        step.on_event(NodeEvents.CONTINUE).send_event_to(loop[(i + 1) % len(loop)])
        if after:
            step.on_event(NodeEvents.STOP).send_event_to(after[0])
        else:
            step.on_event(NodeEvents.STOP).stop_process()
    if loop:
        for a, b in pairwise(after):
            a.on_event(NodeEvents.DONE).send_event_to(b)
    (after or line)[-1].on_event(NodeEvents.DONE).stop_process()
    return builder.build()


# --------------------------------------------------------------------------- the adapter


def provider_exception(exc: BaseException) -> BaseException | None:
    """The OpenAI client's exception inside SK's wrapping, if there is one."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, (openai.APIError, httpx.TransportError, TimeoutError)):
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


_sk = private_members_of("semantic-kernel")


#: what this adapter overrides, calls or patches of Semantic Kernel (and of the MCP session
#: it opens) that they do not promise: checked once per stack job, before any run
#: (mastif.core.provenance.check_framework)
PRIVATE_MEMBERS: tuple[PrivateMember, ...] = (
    _sk(OpenAIChatCompletion, "_get_function_call_from_chat_choice",
        "overrides it to drop a legacy function_call beside tool_calls"),
    _sk(OpenAIChatCompletion, "_inner_get_chat_message_contents",
        "overrides it so tool_choice required holds for a node visit's first request only"),
    _sk(Kernel, "invoke_function_call",
        "overrides it to record the tool calls SK refuses"),
)  # fmt: skip


class SemanticKernelAdapter:
    name = "semantic_kernel"
    #: the distributions a run uses (mastif.core.provenance): SK's MCP plugin under mcp
    packages = ("semantic-kernel", "openai")
    mcp_packages = ("mcp",)
    private_members = PRIVATE_MEMBERS

    async def run(self, ctx: RunContext) -> str:
        try:
            return await self._run(ctx)
        except KernelException as exc:
            cause = provider_exception(exc)
            if cause is not None:
                raise cause from exc
            raise

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's kernel."""
        try:
            return await self.ask(ctx, await self.kernel(ctx), node, step, prompt)
        except KernelException as exc:
            cause = provider_exception(exc)
            if cause is not None:
                raise cause from exc
            raise

    async def kernel(self, ctx: RunContext) -> RecordingKernel:
        """The run's kernel (tools, a chat service per node of the plan), opened on its first
        use and kept with its context; its clients and MCP session close with the run
        (``ctx.resources``). Every node visit of the run, by the process or by an
        orchestrator's ``run_node``, is made on it."""
        kernel = ctx.built.get(self.name)
        if kernel is None:
            opened = self.open_kernel(ctx, ctx.plan.nodes)
            with ctx.setting_up():
                kernel = await ctx.resources.enter_async_context(opened)
            ctx.built[self.name] = kernel
        assert isinstance(kernel, RecordingKernel)
        return kernel

    @asynccontextmanager
    async def open_kernel(
        self, ctx: RunContext, nodes: Sequence[PlannedNode]
    ) -> AsyncIterator[RecordingKernel]:
        """A kernel with the tools plugin (in-process, or SK's MCP plugin under ``mcp``) and
        one chat service per node; clients and the MCP session close on exit."""
        kernel = RecordingKernel()
        kernel._ctx = ctx
        kernel.add_filter(FilterTypes.AUTO_FUNCTION_INVOCATION, kernel.invoked)
        async with AsyncExitStack() as stack:
            if ctx.mcp_url is not None and any(n.spec.use_tools for n in nodes):
                plugin = GatewayMCPPlugin(
                    name=PLUGIN_NAME, url=ctx.mcp_url, load_prompts=False,
                    request_timeout=int(ctx.generation.timeout_s), http_factory=ctx.mcp_http,
                )  # fmt: skip
                await plugin.connect()
                stack.push_async_callback(plugin.close)
                kernel.add_plugin(plugin, plugin_name=PLUGIN_NAME)
            elif ctx.mcp_url is None and ctx.tools.tool_specs():
                kernel.add_plugin(tools_plugin(ctx))
            for node in nodes:
                client = gateway_client(ctx, node.name)
                if ctx.http is None:  # a shared HTTP client is the job's to close
                    stack.push_async_callback(client.close)
                kernel.add_service(chat_service(ctx, node.name, client))
            yield kernel

    async def _run(self, ctx: RunContext) -> str:
        """The workflow as an SK process on the local runtime (see :func:`workflow_process`),
        each node visit one chat call on the run's kernel."""
        kernel = await self.kernel(ctx)

        async def ask(node: PlannedNode, step: int, prompt: str) -> str:
            return await self.ask(ctx, kernel, node, step, prompt)

        return await self.orchestrate(ctx, ask)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow's SK process, each node visit handed to ``dispatch`` (in :meth:`run`
        a chat call on the run's kernel; under ``a2a`` an A2A request to the node's agent)."""
        plan = ctx.plan
        with ctx.setting_up():
            run = WorkflowRun(ctx, dispatch)
            process = workflow_process(plan, run)
        # a superstep per node visit, and one to find nothing left to do
        visits = len(plan.before) + len(plan.loop) * plan.max_steps + len(plan.after)
        await start(
            process, run.process_kernel, NodeEvents.START, max_supersteps=visits + 2, data=1
        )
        if run.error is not None:  # SK made an OnError event of it, with its text only
            raise run.error
        return run.outputs[-1].text if run.outputs else ""

    async def ask(
        self, ctx: RunContext, kernel: RecordingKernel, node: PlannedNode, step: int, prompt: str
    ) -> str:
        """One node visit: a fresh chat history with the prompt, one SK chat call."""
        gen = ctx.generation
        has_tools = node.spec.use_tools and bool(kernel.plugins)
        history = ChatHistory()
        history.add_user_message(prompt)
        settings = OpenAIChatPromptExecutionSettings(
            service_id=node.name, **ctx.client_settings(node.name).sampling()
        )
        if has_tools and gen.max_tool_rounds > 0:
            behavior = (
                FunctionChoiceBehavior.Required
                if node.spec.tool_choice == "required"
                else FunctionChoiceBehavior.Auto
            )
            settings.function_choice_behavior = behavior(
                maximum_auto_invoke_attempts=gen.max_tool_rounds
            )
        service = kernel.get_service(node.name)
        ctx.at(node.name, step)
        reply = await service.get_chat_message_content(history, settings, kernel=kernel)
        return reply.content if reply is not None else ""

"""LlamaIndex: the linear workflow as a LlamaIndex ``Workflow`` (llama-index-workflows).

Mapping. One :class:`LinearWorkflow` per run: a ``llama_index.core.workflow.Workflow`` whose
``@step`` s pass typed events — ``StartEvent`` → ``BeforeVisit`` (the nodes before the loop,
in a line) → ``LoopVisit`` (the loop nodes; the last one emits ``LoopVisit`` back to the first
for the next round, or leaves the loop after ``max_steps`` rounds, and a ``stop_when`` match
leaves it at once) → ``AfterVisit`` (the nodes after the loop) → ``StopEvent`` with the last
node output. LlamaIndex's workflow runtime routes the events and runs the steps; mastif's
``drive_workflow`` is not used. No workflow timeout (``timeout=None``): the runner bounds and
cancels the run, and a cancelled run cancels the workflow's run (``handler.cancel_run``).

A node visit is LlamaIndex's tool-calling loop on its LLM interface: ``achat_with_tools``
with the node's ``tool_choice`` on the first turn (``auto`` later), the calls taken from the
reply with the LLM's ``get_tool_calls_from_response``, the calls of one reply run
concurrently with LlamaIndex's ``acall_tool`` (as its ``apredict_and_call`` gathers them)
and answered with ``tool`` messages in the model's order, for at most ``max_tool_rounds``
rounds; then one more ``achat`` without tools so the node ends in text. LlamaIndex's
``FunctionAgent`` is not used for it: it bounds a run only by ``max_iterations``, which
raises when reached instead of asking once more without tools, and it keeps a token-counted
memory (tiktoken) the visit does not need.

The model is ``OpenAILike`` (``is_chat_model``, ``is_function_calling_model``), one per
workflow node at ``ctx.llm_base_url(node)`` with ``api_key=ctx.gateway_token``, no retries
(``max_retries=0``: LlamaIndex's retry decorator is then skipped), no streaming, the job's
shared HTTP clients, an empty callback manager of its own (nothing from the global
``Settings``). The workflow, LLMs and tools are built once per run; ``run_node`` (A2A agents,
the hierarchical shape) reuses a run's LLMs and tools across its visits.

Tools are LlamaIndex ``FunctionTool`` s. Under ``mcp`` they come from llama-index-tools-mcp
(``McpToolSpec(BasicMCPClient(ctx.mcp_url, http_client=ctx.mcp_http()))``): each call opens
an MCP session on the run's timed HTTP client and the server records it. Otherwise each
calls ``ctx.call_tool``; their parameter models are built from the tools' JSON schemas with
the MCP tool spec's own converter, so both protocols offer the same tool definitions
(LlamaIndex's: pydantic's schema, ``additionalProperties: false``, ``strict: false``).

Arguments are LlamaIndex's: ``get_tool_calls_from_response`` reads them with its repairing
``parse_partial_json`` (truncated JSON is completed; a value cut off inside a string becomes
``null``) and whatever is not a JSON object becomes ``{}``; the tool runs on that, and the
call is recorded with it. A call to a tool that is not offered is answered with LlamaIndex's
agents' text ("Tool X not found. Please select a tool that is available.") and recorded as
failed with the model's argument text.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.callbacks import CallbackManager
from llama_index.core.tools import FunctionTool, ToolMetadata
from llama_index.core.tools.calling import acall_tool
from llama_index.core.workflow import Event, StartEvent, StopEvent, Workflow, step
from llama_index.llms.openai_like import OpenAILike
from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

from mastif.core.trace import NodeOutput
from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode

#: how many runs' LLMs and tools one adapter (one stack job) keeps for ``run_node``
RUN_CACHE = 64


def unknown_tool_text(name: str) -> str:
    """What LlamaIndex's agents answer for a tool that is not offered (AgentWorkflow)."""
    return f"Tool {name} not found. Please select a tool that is available."


def gateway_llm(ctx: RunContext, node: str) -> OpenAILike:
    s = ctx.client_settings(node)
    sampling = s.sampling()
    seed = sampling.pop("seed")  # OpenAILike sends it among its additional kwargs
    return OpenAILike(
        model=s.model,
        api_base=s.base_url,
        api_key=s.api_key,
        is_chat_model=True,
        is_function_calling_model=True,
        **sampling,
        additional_kwargs={} if seed is None else {"seed": seed},
        **s.client_options(),
        http_client=s.http_sync,
        async_http_client=s.http_async,
        callback_manager=CallbackManager([]),  # not the global Settings'
    )


def local_tools(ctx: RunContext) -> list[FunctionTool]:
    """The protocol's tools as FunctionTools; each call goes through ``ctx.call_tool``,
    recorded at the visit in progress."""
    converter = McpToolSpec(client=None)  # type: ignore[arg-type]  # its schema converter only

    def make(spec: Any) -> FunctionTool:
        async def call(**arguments: Any) -> str:
            result = await ctx.call_tool(ctx.node, ctx.step, spec.name, arguments)
            # a failure reads as the tool's error text, as an MCP server's isError result does
            return result.output if result.ok else (result.error or "")

        schema = converter.create_model_from_json_schema(
            spec.parameters, model_name=f"{spec.name}_Schema"
        )
        meta = ToolMetadata(name=spec.name, description=spec.description, fn_schema=schema)
        return FunctionTool.from_defaults(async_fn=call, tool_metadata=meta)

    return [make(s) for s in ctx.tools.tool_specs()]


async def load_tools(ctx: RunContext) -> list[FunctionTool]:
    """In-process tools, or under ``mcp`` llama-index-tools-mcp's from the MCP server."""
    if ctx.mcp_url is None:
        return local_tools(ctx)
    http = ctx.mcp_http() if ctx.mcp_http is not None else None  # timed (protocol seconds)
    client = BasicMCPClient(ctx.mcp_url, timeout=int(ctx.generation.timeout_s), http_client=http)
    return await McpToolSpec(client=client).to_tool_list_async()


@dataclass
class RunObjects:
    """What a run is given once: one LLM per node, the tools."""

    ctx: RunContext
    llms: dict[str, OpenAILike]
    tools: list[FunctionTool]
    by_name: dict[str, FunctionTool] = field(init=False)

    def __post_init__(self) -> None:
        self.by_name = {t.metadata.get_name(): t for t in self.tools}

    @classmethod
    async def build(cls, ctx: RunContext, nodes: tuple[PlannedNode, ...]) -> RunObjects:
        tools = await load_tools(ctx) if any(n.spec.use_tools for n in nodes) else []
        return cls(ctx, {n.name: gateway_llm(ctx, n.name) for n in nodes}, tools)

    async def visit(self, node: PlannedNode, step: int, prompt: str) -> str:
        """One node visit: LlamaIndex's tool-calling loop, ending in text."""
        ctx, gen = self.ctx, self.ctx.generation
        ctx.at(node.name, step)
        llm = self.llms[node.name]
        tools = self.tools if node.spec.use_tools else []
        messages = [ChatMessage(role=MessageRole.USER, content=prompt)]
        rounds = 0
        while True:
            offer = bool(tools) and rounds < gen.max_tool_rounds
            if offer:
                # tool_choice applies to the node's first turn; later turns may answer in text
                choice = node.spec.tool_choice if rounds == 0 else "auto"
                response = await llm.achat_with_tools(
                    tools, chat_history=messages, allow_parallel_tool_calls=True,
                    tool_choice=choice,
                )  # fmt: skip
            else:
                response = await llm.achat(messages)
            messages.append(response.message)
            calls = (
                llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)
                if offer
                else []
            )
            if not calls:
                return response.message.content or ""
            rounds += 1
            # the calls of one reply run concurrently, as LlamaIndex runs them (its LLMs'
            # apredict_and_call gathers them; FunctionAgent runs its call_tool step with
            # several workers); the tool messages follow in the model's order. Each call
            # takes its place in the run's record as it starts (ctx.call_tool), in order.
            raw = [b.tool_kwargs for b in response.message.blocks if isinstance(b, ToolCallBlock)]
            texts = await asyncio.gather(
                *(self.run_call(node, step, call, raw[i] if i < len(raw) else None)
                  for i, call in enumerate(calls))
            )  # fmt: skip
            for call, text in zip(calls, texts, strict=True):
                messages.append(
                    ChatMessage(
                        role=MessageRole.TOOL, content=text,
                        additional_kwargs={"tool_call_id": call.tool_id},
                    )
                )  # fmt: skip

    async def run_call(self, node: PlannedNode, step: int, call: Any, raw: Any) -> str:
        """Run one tool call of the model's as LlamaIndex does; return the tool message's text.

        ``call`` is a ``ToolSelection`` from the LLM's ``get_tool_calls_from_response``, its
        arguments what LlamaIndex recovered from the model's text: ``parse_partial_json``
        completes truncated JSON (a value cut off inside a string becomes ``null``), and
        whatever is not a JSON object becomes ``{}`` (``ToolSelection`` drops it). LlamaIndex
        never refuses arguments: the tool runs on that recovery, and the call is recorded
        with it (by ``ctx.call_tool``, or by the MCP server under ``mcp``). A call of a tool
        that is not offered is recorded here, with the model's argument text ``raw``.
        """
        ctx, name = self.ctx, call.tool_name
        tool = self.by_name.get(name)
        if tool is None:  # no tool runs
            offered = sorted(self.by_name)
            error = f"unknown tool {name!r}; offered: {offered}"
            arguments = raw if raw is not None else call.tool_kwargs
            ctx.record_failed_tool_call(node.name, step, name, arguments, error)
            return unknown_tool_text(name)
        output = await acall_tool(tool, call.tool_kwargs)
        return output.content


# --------------------------------------------------------------------------- the workflow


class BeforeVisit(Event):
    """Visit the ``index``-th node before the loop."""

    index: int


class LoopVisit(Event):
    """Visit the ``index``-th loop node in round ``round``."""

    index: int
    round: int


class AfterVisit(Event):
    """Visit the ``index``-th node after the loop."""

    index: int


class LinearWorkflow(Workflow):
    """navigate → observe ⇄ interact → report as LlamaIndex workflow steps."""

    def __init__(self, ctx: RunContext, dispatch: Dispatch) -> None:
        super().__init__(timeout=None)  # the runner bounds the run
        self.ctx, self.dispatch = ctx, dispatch
        self.plan = ctx.plan
        self.outputs: list[NodeOutput] = []

    async def visit(self, node: PlannedNode, step: int) -> str:
        # the prompt from the run's history, the visit, its output recorded
        text = await visit_node(self.ctx, self.dispatch, node, step)
        self.outputs.append(self.ctx.recorder.node_outputs[-1])
        return text

    def enter_loop(self) -> LoopVisit | AfterVisit | StopEvent:
        if self.plan.loop and self.plan.max_steps >= 1:
            return LoopVisit(index=0, round=1)
        return self.enter_after()

    def enter_after(self) -> AfterVisit | StopEvent:
        return AfterVisit(index=0) if self.plan.after else self.finish()

    def finish(self) -> StopEvent:
        return StopEvent(result=self.outputs[-1].text if self.outputs else "")

    @step
    async def start(self, ev: StartEvent) -> BeforeVisit | LoopVisit | AfterVisit | StopEvent:
        return BeforeVisit(index=0) if self.plan.before else self.enter_loop()

    @step
    async def before(self, ev: BeforeVisit) -> BeforeVisit | LoopVisit | AfterVisit | StopEvent:
        await self.visit(self.plan.before[ev.index], 1)
        if ev.index + 1 < len(self.plan.before):
            return BeforeVisit(index=ev.index + 1)
        return self.enter_loop()

    @step
    async def loop(self, ev: LoopVisit) -> LoopVisit | AfterVisit | StopEvent:
        node = self.plan.loop[ev.index]
        if node.stops_loop(await self.visit(node, ev.round)):
            return self.enter_after()  # a stop_when match ends the loop at once
        if ev.index + 1 < len(self.plan.loop):
            return LoopVisit(index=ev.index + 1, round=ev.round)
        if ev.round < self.plan.max_steps:
            return LoopVisit(index=0, round=ev.round + 1)  # the loop event back
        return self.enter_after()

    @step
    async def after(self, ev: AfterVisit) -> AfterVisit | StopEvent:
        await self.visit(self.plan.after[ev.index], 1)
        if ev.index + 1 < len(self.plan.after):
            return AfterVisit(index=ev.index + 1)
        return self.finish()


# --------------------------------------------------------------------------- the adapter


class LlamaIndexAdapter:
    name = "llamaindex"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = (
        "llama-index-core",
        "llama-index-workflows",
        "llama-index-llms-openai-like",
        "llama-index-llms-openai",
        "openai",
    )
    mcp_packages = ("llama-index-tools-mcp", "mcp")
    #: no private member of LlamaIndex is overridden or called
    private_members = ()

    def __init__(self) -> None:
        #: run_id -> the run's LLMs and tools, for its run_node visits (A2A, hierarchical)
        self._runs: OrderedDict[str, RunObjects] = OrderedDict()
        self._building: dict[str, asyncio.Future[RunObjects]] = {}

    async def run(self, ctx: RunContext) -> str:
        """The workflow as a LlamaIndex Workflow (:class:`LinearWorkflow`), each node visit
        the node's LLM and tools on the run's objects."""
        with ctx.setting_up():
            objects = await RunObjects.build(ctx, ctx.plan.nodes)
        return await self.orchestrate(ctx, objects.visit)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow's LlamaIndex Workflow, each node visit handed to ``dispatch`` (in
        :meth:`run` the node's LLM and tools; under ``a2a`` an A2A request to the node's
        agent)."""
        with ctx.setting_up():
            workflow = LinearWorkflow(ctx, dispatch)
        handler = workflow.run()
        try:
            result = await asyncio.shield(handler)
        except asyncio.CancelledError:
            await handler.cancel_run()  # stop the workflow's steps with the run
            raise
        return str(result)

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), on the run's LLMs
        and tools."""
        objects = await self._objects(ctx)
        return await objects.visit(node, step, prompt)

    async def _objects(self, ctx: RunContext) -> RunObjects:
        cached = self._runs.get(ctx.run_id)
        if cached is not None and cached.ctx is ctx:
            self._runs.move_to_end(ctx.run_id)
            return cached
        pending = self._building.get(ctx.run_id)
        if pending is None:
            pending = asyncio.ensure_future(RunObjects.build(ctx, ctx.plan.nodes))
            self._building[ctx.run_id] = pending
            try:
                with ctx.setting_up():
                    objects = await pending
            finally:
                self._building.pop(ctx.run_id, None)
            self._runs[ctx.run_id] = objects
            while len(self._runs) > RUN_CACHE:
                self._runs.popitem(last=False)
            return objects
        return await asyncio.shield(pending)

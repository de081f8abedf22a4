"""LangGraph: the workflow as a real ``StateGraph`` with LangGraph's own ``ToolNode``.

Graph shape: every workflow node is a graph node that calls the model (langchain-openai's
``ChatOpenAI`` pointed at our gateway). A node that uses tools gets a companion
``<node>__tools`` graph node — LangGraph's prebuilt ``ToolNode`` — and a conditional edge:
model → tools → model while the model asks for tools and fewer than ``max_tool_rounds``
rounds were made, then on to the next workflow node. The nodes before the loop run in a
line, the loop nodes in a cycle whose conditional edges exit when a node's ``stop_when``
matches or after ``max_steps`` rounds, then the nodes after the loop.

Tool calls reach the tool through ``RunContext.call_tool`` with the arguments the model
produced, or under ``mcp`` through langchain-mcp-adapters' tools and the MCP server, which
records them. Calls LangGraph refuses before any tool runs (a name that is not offered, or
arguments that are not valid JSON) are recorded as failed calls by the model node.

Under ``a2a`` the orchestrator agent runs the same graph (:meth:`LangGraphAdapter.
orchestrate`): the same nodes, edges and loop routing, but each node's step is one A2A
request to the node's agent (``mastif.frameworks.orchestration.visit_node``) instead of model calls, so
it has no tool nodes. A node agent (and a hierarchical decomposer/worker/synthesiser) runs its
visit with :meth:`LangGraphAdapter.run_node`: a one-node graph of the model-calling kind,
compiled once per node and run. Building tools and graphs is timed as set-up
(``ctx.setting_up``).
"""

from __future__ import annotations

import operator
from itertools import pairwise
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.prebuilt import ToolNode

from mastif.core.trace import NodeOutput
from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode, WorkflowPlan, render_prompt


class GraphState(TypedDict):
    outputs: Annotated[list[NodeOutput], operator.add]
    messages: Annotated[list[BaseMessage], add_messages]  # the current node's conversation
    active: str  # workflow node whose conversation ``messages`` holds
    tool_rounds: int
    wants_tools: bool
    step: int
    done: bool
    #: a single-visit graph's prompt (run_node: the orchestrator rendered it), else ""
    prompt: str


def message_text(msg: BaseMessage) -> str:
    content = msg.content
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)


def chat_model(ctx: RunContext, node: str) -> ChatOpenAI:
    """langchain-openai's chat model at the gateway; shared by the LangChain adapter."""
    s = ctx.client_settings(node)
    return ChatOpenAI(
        model=s.model,
        base_url=s.base_url,
        api_key=s.api_key,
        **s.sampling(),
        **s.client_options(),
        http_client=s.http_sync,
        http_async_client=s.http_async,
    )


def langchain_tools(ctx: RunContext) -> list[StructuredTool]:
    """The protocol's tools as LangChain tools; each call is recorded at the visit in progress."""

    def make(spec: Any) -> StructuredTool:
        async def call(**arguments: Any) -> str:
            result = await ctx.call_tool(ctx.node, ctx.step, spec.name, arguments)
            # a failure reads as the tool's error text, as an MCP server's isError result does
            return result.output if result.ok else (result.error or "")

        return StructuredTool(
            name=spec.name,
            description=spec.description,
            args_schema=spec.parameters,  # the JSON schema as is: same schema for every framework
            coroutine=call,
        )

    return [make(spec) for spec in ctx.tools.tool_specs()]


async def load_tools(ctx: RunContext) -> list[BaseTool]:
    """The run's tools for LangChain and LangGraph.

    Under ``mcp`` they come from the MCP server through langchain-mcp-adapters, used as its
    documentation shows (``MultiServerMCPClient(...).get_tools()``: a ``tools/list`` now,
    and a fresh MCP session for every call); the server records each call. Otherwise they
    are the in-process tools, recorded by ``ctx.call_tool``.
    """
    if ctx.mcp_url is None:
        return list(langchain_tools(ctx))
    connection: dict[str, Any] = {"transport": "streamable_http", "url": ctx.mcp_url}
    if ctx.mcp_http is not None:  # exchanges timed (protocol seconds), the server's key sent
        connection["httpx_client_factory"] = ctx.mcp_http
    client = MultiServerMCPClient({"mastif": connection})  # type: ignore[dict-item]
    return await client.get_tools()


def record_refused_calls(ctx: RunContext, node: str, step: int, reply: AIMessage) -> None:
    """Tool calls the framework will not run: unknown names and unparseable arguments."""
    offered = set(ctx.tool_names())
    for call in reply.tool_calls:
        if call["name"] not in offered:
            ctx.record_failed_tool_call(
                node, step, call["name"], call["args"],
                f"unknown tool {call['name']!r}; offered: {sorted(offered)}",
            )  # fmt: skip
    for bad in reply.invalid_tool_calls:
        ctx.record_failed_tool_call(
            node, step, bad.get("name") or "<unnamed>", bad.get("args") or "",
            f"arguments are not valid JSON: {bad.get('error') or bad.get('args')}",
        )  # fmt: skip


def model_step(
    ctx: RunContext,
    plan: WorkflowPlan,
    node: PlannedNode,
    tools: list[BaseTool],
    single: bool,
    last_in_loop: bool,
) -> Any:
    """The graph node of a workflow node that calls the model: one model turn per step, the
    prompt rendered on the node's first turn (``single``: the orchestrator's, from the
    state), tools while fewer than ``max_tool_rounds`` rounds were made."""
    use_tools = node.spec.use_tools and bool(tools)
    llm = chat_model(ctx, node.name)
    max_rounds = ctx.generation.max_tool_rounds

    async def fn(state: GraphState) -> dict[str, Any]:
        step = state["step"] if (node.spec.loop or single) else 1
        ctx.at(node.name, step)
        fresh = state["active"] != node.name
        rounds = 0 if fresh else state["tool_rounds"]
        update: list[BaseMessage] = []
        if fresh:
            prompt = state["prompt"] if single else render_prompt(
                node, ctx.task, state["outputs"], step, plan.max_steps,
                [t.name for t in tools] if use_tools else [],
                prompt_format=plan.prompt_format,
                tool_calls=ctx.recorder.tool_calls,
                page=await ctx.page_for(node),
            )  # fmt: skip
            update = [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage(prompt)]
            history = [HumanMessage(prompt)]
        else:
            history = list(state["messages"])
        if use_tools and rounds < max_rounds:
            # tool_choice applies to the node's first turn; later turns may answer in text
            choice = node.spec.tool_choice if rounds == 0 else "auto"
            reply = await llm.bind_tools(tools, tool_choice=choice).ainvoke(history)
        else:
            reply = await llm.ainvoke(history)
        assert isinstance(reply, AIMessage)
        update.append(reply)
        base = {"messages": update, "active": node.name}
        if use_tools and (reply.tool_calls or reply.invalid_tool_calls):
            record_refused_calls(ctx, node.name, step, reply)
        if use_tools and reply.tool_calls and rounds < max_rounds:
            return {**base, "tool_rounds": rounds + 1, "wants_tools": True}
        text = message_text(reply)
        # a single visit's output is the orchestrator's to record
        out = (
            NodeOutput(node.name, step, node.spec.output_key, text)
            if single
            else ctx.recorder.node_output(node.name, step, node.spec.output_key, text)
        )
        done = {"done": True} if node.stops_loop(text) else {}
        step_update = {"step": state["step"] + 1} if last_in_loop else {}
        return {**base, **done, **step_update, "outputs": [out], "tool_rounds": 0,
                "wants_tools": False}  # fmt: skip

    return fn


def delegate_step(
    ctx: RunContext, dispatch: Dispatch, node: PlannedNode, last_in_loop: bool
) -> Any:
    """The graph node of a workflow node whose visit an agent makes (``visit_node``: the
    rendered prompt to ``dispatch``, its text recorded)."""

    async def delegate(state: GraphState) -> dict[str, Any]:
        step = state["step"] if node.spec.loop else 1
        text = await visit_node(ctx, dispatch, node, step)
        done = {"done": True} if node.stops_loop(text) else {}
        step_update = {"step": state["step"] + 1} if last_in_loop else {}
        out = ctx.recorder.node_outputs[-1]  # visit_node recorded it
        return {**done, **step_update, "outputs": [out], "active": node.name}

    return delegate


def add_routes(builder: StateGraph, plan: WorkflowPlan, tools: list[BaseTool]) -> None:
    """The edges: from START to the first node; from each node to its tool node while it
    asks for tools, else on to the next node, the loop nodes in a cycle that a ``stop_when``
    match or ``max_steps`` rounds leave for the nodes after the loop."""
    loop = plan.loop
    # where each node goes when it is finished: (router, targets)
    before = [n.name for n in plan.before]
    after = [n.name for n in plan.after]
    successors: dict[str, Any] = {}
    line = [*before, loop[0].name] if loop else [*before, *after]
    for a, b in pairwise([*line, END] if not loop else line):
        successors[a] = b
    for a, b in pairwise([*after, END]):
        successors[a] = b
    if not line:
        raise ValueError("workflow has no nodes")
    builder.add_edge(START, line[0])
    exit_target = after[0] if after else END

    for n in plan.nodes:
        targets: dict[str, str] = {}
        has_tools = n.spec.use_tools and bool(tools)
        if has_tools:
            targets["tools"] = f"{n.name}__tools"
        if n in loop:
            i = loop.index(n)
            last = i == len(loop) - 1
            targets["next"] = loop[0].name if last else loop[i + 1].name
            targets["exit"] = exit_target
        else:
            targets["next"] = successors[n.name]

        def route(state: GraphState, _n: PlannedNode = n, _t: dict[str, str] = targets) -> str:
            if "tools" in _t and state["wants_tools"]:
                return "tools"
            if _n in loop:
                # a stop_when match ends the loop at once; a full round ends it after max_steps
                last = _n is loop[-1]
                if state["done"] or (last and state["step"] > plan.max_steps):
                    return "exit"
            return "next"

        builder.add_conditional_edges(n.name, route, targets)


class LangGraphAdapter:
    name = "langgraph"
    #: the distributions a run uses (mastif.core.provenance); under mcp also ``mcp_packages``
    packages = ("langgraph", "langchain-core", "langchain-openai", "openai")
    mcp_packages = ("langchain-mcp-adapters", "mcp")
    #: no private member of LangGraph or LangChain is overridden or called
    private_members = ()

    def build_graph(
        self,
        ctx: RunContext,
        tools: list[BaseTool],
        plan: WorkflowPlan | None = None,
        single: bool = False,
        dispatch: Dispatch | None = None,
    ) -> Any:
        """The graph of ``plan`` (the run's plan by default).

        ``single``: the plan is one node visit whose prompt and step come in the initial
        state (a node run for an orchestrator: :meth:`run_node`), so the graph is built
        once per node and run and invoked for every visit.
        ``dispatch``: each node's step hands its visit to an agent (``visit_node``: the
        rendered prompt to ``dispatch``, its text recorded) instead of calling the model;
        ``tools`` must then be empty (the agents have them).
        """
        plan = plan or ctx.plan
        builder = StateGraph(GraphState)
        loop = plan.loop
        for n in plan.nodes:
            last_in_loop = bool(loop) and n is loop[-1]
            step = (
                model_step(ctx, plan, n, tools, single, last_in_loop)
                if dispatch is None
                else delegate_step(ctx, dispatch, n, last_in_loop)
            )
            builder.add_node(n.name, step)
            if n.spec.use_tools and tools:
                builder.add_node(f"{n.name}__tools", ToolNode(tools, handle_tool_errors=True))
                builder.add_edge(f"{n.name}__tools", n.name)
        add_routes(builder, plan, tools)
        return builder.compile()

    async def _invoke(
        self, graph: Any, ctx: RunContext, plan: WorkflowPlan, step: int, prompt: str = ""
    ) -> Any:
        per_visit = 2 * ctx.generation.max_tool_rounds + 1
        visits = len(plan.before) + len(plan.loop) * plan.max_steps + len(plan.after)
        return await graph.ainvoke(
            {"outputs": [], "messages": [], "active": "", "tool_rounds": 0, "wants_tools": False,
             "step": step, "done": False, "prompt": prompt},
            config={"recursion_limit": visits * per_visit + 5},
        )  # fmt: skip

    async def run(self, ctx: RunContext) -> str:
        with ctx.setting_up():
            graph = self.build_graph(ctx, await load_tools(ctx))
        final = await self._invoke(graph, ctx, ctx.plan, 1)
        outputs: list[NodeOutput] = final["outputs"]
        return outputs[-1].text if outputs else ""

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow's graph, each node's step a visit handed to ``dispatch`` (``a2a``:
        the node agents); the same routing as :meth:`run`."""
        with ctx.setting_up():
            graph = self.build_graph(ctx, [], dispatch=dispatch)
        final = await self._invoke(graph, ctx, ctx.plan, 1)
        outputs: list[NodeOutput] = final["outputs"]
        return outputs[-1].text if outputs else ""

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators): a one-node graph,
        compiled once per node and run (with the run's tools, loaded once) and reused by
        every visit of that node."""
        plan = WorkflowPlan((node,), (), (), ctx.plan.max_steps)
        built = ctx.built.setdefault(self.name, {"graphs": {}})
        graph = built["graphs"].get(node.name)
        if graph is None:
            with ctx.setting_up():
                if node.spec.use_tools and "tools" not in built:
                    built["tools"] = await load_tools(ctx)
                tools = built.get("tools", []) if node.spec.use_tools else []
                graph = self.build_graph(ctx, tools, plan, single=True)
                built["graphs"][node.name] = graph
        final = await self._invoke(graph, ctx, plan, step, prompt)
        outputs: list[NodeOutput] = final["outputs"]
        return outputs[-1].text if outputs else ""

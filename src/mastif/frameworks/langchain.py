"""LangChain: LangChain's own tool-calling agent (``langchain.agents.create_agent``) per node.

Every workflow node is one LangChain agent, built once per run with
``create_agent(model, tools, middleware=[...])`` and invoked with ``ainvoke`` per visit; its
input is the node prompt (``render_prompt``) as the only user message, with no system
prompt. The nodes are chained in plain Python: the nodes before the loop in a line, the loop
nodes round after round until a node's ``stop_when`` matches or ``max_steps`` rounds are
done, then the nodes after the loop. Each node's output is the text of the agent's last
message; the final answer is the last node's output.

Nodes without ``use_tools`` get an agent with no tools: ``create_agent`` then compiles to a
single model call (START → model → END), so the request is the plain chat call, but every
node still runs through LangChain's agent runtime.

Inside a tool-using node the agent runs its own loop (model → ``ToolNode`` → model ...).
One middleware, :class:`NodeTurns`, gives it the same per-node policy as the LangGraph
adapter:

* the first model turn uses the node's ``tool_choice``, later turns ``"auto"``;
* after ``max_tool_rounds`` turns that asked for tools, the next turn is made without tools
  (``request.override(tools=[])``), so the node ends in text; if the model asks for tools
  anyway, the agent is sent to its end (``jump_to: "end"``) and those calls are not run;
* calls the agent refuses before any tool runs (a name that is not offered — answered by
  the agent's ``ToolNode`` with its own error text — and arguments that are not valid JSON)
  are recorded as failed calls. Calls that do run go through ``RunContext.call_tool`` (the
  shared ``langchain_tools``), which records them; the two sets are disjoint.

LangChain's prebuilt limits were considered and not used: ``ModelCallLimitMiddleware`` and
``ToolCallLimitMiddleware`` count model calls or individual tool calls and, at the limit,
end with an injected AI/tool message instead of a last model turn without tools.

The model client and tool objects are the LangGraph adapter's (``chat_model``,
``langchain_tools``), so both frameworks send the same requests for the same conversation.
What ``create_agent`` does by itself that the LangGraph adapter does not: after a turn with
malformed tool-call JSON *and* valid calls, it answers the malformed call with its own
``ToolMessage`` ("... could not be executed - arguments were malformed or truncated.")
before the next model turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command

from mastif.frameworks.base import RunContext
from mastif.frameworks.langgraph import (
    chat_model,
    load_tools,
    message_text,
    record_refused_calls,
)
from mastif.trace import NodeOutput
from mastif.workflow import PlannedNode, drive_workflow, render_prompt


def _last_ai(messages: list[Any]) -> AIMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)


class NodeTurns(AgentMiddleware):
    """The node's tool-round policy and refusal bookkeeping, as a ``wrap_model_call`` hook."""

    def __init__(self, ctx: RunContext, node: PlannedNode) -> None:
        super().__init__()
        self.ctx = ctx
        self.node = node
        self.max_rounds = ctx.generation.max_tool_rounds

    @property
    def name(self) -> str:
        return f"NodeTurns[{self.node.name}]"

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | ExtendedModelResponse:
        # the agent's state holds only this visit's conversation: prompt, then its turns
        rounds = sum(1 for m in request.messages if isinstance(m, AIMessage) and m.tool_calls)
        capped = rounds >= self.max_rounds
        if capped:
            request = request.override(tools=[], tool_choice=None)
        else:
            # tool_choice applies to the node's first turn; later turns may answer in text
            choice = self.node.spec.tool_choice if rounds == 0 else "auto"
            request = request.override(tool_choice=choice)
        response = await handler(request)
        reply = _last_ai(response.result)
        if reply is not None and (reply.tool_calls or reply.invalid_tool_calls):
            record_refused_calls(self.ctx, self.node.name, self.ctx.step, reply)
        if capped and reply is not None and reply.tool_calls:
            # tools were not offered; the agent would still run the calls: end the node here
            return ExtendedModelResponse(response, Command(update={"jump_to": "end"}))
        return response


class LangChainAdapter:
    name = "langchain"
    #: the distributions a run uses (mastif.provenance): create_agent builds a LangGraph graph
    packages = ("langchain", "langchain-core", "langgraph", "langchain-openai", "openai")
    mcp_packages = ("langchain-mcp-adapters", "mcp")
    #: no private member of LangChain or LangGraph is overridden or called
    private_members = ()

    def build_agent(
        self,
        ctx: RunContext,
        node: PlannedNode,
        tools: list[BaseTool],
    ) -> Any:
        """LangChain's agent for one workflow node (tools only where the node uses them)."""
        model = chat_model(ctx, node.name)
        if node.spec.use_tools and tools:
            return create_agent(model, tools, middleware=[NodeTurns(ctx, node)])
        return create_agent(model, [])

    async def invoke(self, ctx: RunContext, agent: Any, node: PlannedNode, step: int,
                     prompt: str) -> str:  # fmt: skip
        """One node visit: the prompt as the only message, the last AI message's text back."""
        ctx.at(node.name, step)
        # model, tools, model, ...: 2 graph steps per tool round plus the last model turn
        recursion_limit = 2 * ctx.generation.max_tool_rounds + 3
        result = await agent.ainvoke(
            {"messages": [HumanMessage(prompt)]}, config={"recursion_limit": recursion_limit}
        )
        reply = _last_ai(result["messages"])
        return message_text(reply) if reply is not None else ""

    async def run(self, ctx: RunContext) -> str:
        plan = ctx.plan
        if not plan.nodes:
            raise ValueError("workflow has no nodes")
        tools = await load_tools(ctx)
        agents = {n.name: self.build_agent(ctx, n, tools) for n in plan.nodes}
        outputs: list[NodeOutput] = []

        async def visit(node: PlannedNode, step: int) -> str:
            use_tools = node.spec.use_tools and bool(tools)
            prompt = render_prompt(
                node, ctx.task, outputs, step, plan.max_steps,
                [t.name for t in tools] if use_tools else [], prompt_format=plan.prompt_format,
                tool_calls=ctx.recorder.tool_calls, page=await ctx.page_for(node),
            )  # fmt: skip
            text = await self.invoke(ctx, agents[node.name], node, step, prompt)
            outputs.append(ctx.recorder.node_output(node.name, step, node.spec.output_key, text))
            return text

        await drive_workflow(plan, visit)
        return outputs[-1].text if outputs else ""

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), by its own agent."""
        tools = await load_tools(ctx) if node.spec.use_tools else []
        return await self.invoke(ctx, self.build_agent(ctx, node, tools), node, step, prompt)

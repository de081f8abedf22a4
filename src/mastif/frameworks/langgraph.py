"""LangGraph: the workflow as a real ``StateGraph``; the model via langchain-openai.

Graph shape: the nodes before the loop in a line, then the loop nodes in a cycle guarded by
conditional edges (early exit when a node's ``stop_when`` matches, or after ``max_steps``
rounds), then the nodes after the loop. Each node runs its own tool loop: the model's tool
calls go through the protocol's transport with the arguments exactly as the model produced
them, for at most ``max_tool_rounds`` rounds.
"""

from __future__ import annotations

import operator
from itertools import pairwise
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

from mastif.frameworks.base import RunContext
from mastif.tools import ToolResult
from mastif.trace import NodeOutput
from mastif.workflow import PlannedNode, render_prompt


class GraphState(TypedDict):
    outputs: Annotated[list[NodeOutput], operator.add]
    step: int
    done: bool


def message_text(msg: BaseMessage) -> str:
    content = msg.content
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)


class LangGraphAdapter:
    name = "langgraph"

    def chat_model(self, ctx: RunContext, node: str) -> ChatOpenAI:
        g = ctx.generation
        return ChatOpenAI(
            model=ctx.model_name,
            base_url=ctx.llm_base_url(node),
            api_key="mastif-gateway",  # the gateway holds the real key, if any
            temperature=g.temperature,
            max_tokens=g.max_tokens,
            seed=g.seed,
            timeout=g.timeout_s,
            max_retries=0,  # the gateway retries; a second layer would double-count calls
        )

    async def run_node(self, ctx: RunContext, node: PlannedNode, state: GraphState) -> str:
        step = state["step"] if node.spec.loop else 1
        tool_specs = ctx.tools.tool_specs() if node.spec.use_tools else []
        prompt = render_prompt(
            node, ctx.task, state["outputs"], step, ctx.plan.max_steps,
            [t.name for t in tool_specs],
        )  # fmt: skip
        llm = self.chat_model(ctx, node.name)
        messages: list[BaseMessage] = [HumanMessage(prompt)]
        schemas = [
            {"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}}
            for t in tool_specs
        ]  # fmt: skip
        rounds = 0
        while True:
            if schemas and rounds < ctx.generation.max_tool_rounds:
                # tool_choice applies to the node's first turn; later turns may answer in text
                choice = node.spec.tool_choice if rounds == 0 else "auto"
                reply = await llm.bind_tools(schemas, tool_choice=choice).ainvoke(messages)
            else:
                reply = await llm.ainvoke(messages)
            assert isinstance(reply, AIMessage)
            messages.append(reply)
            if not (reply.tool_calls or reply.invalid_tool_calls) or not schemas:
                break
            if rounds >= ctx.generation.max_tool_rounds:
                break
            rounds += 1
            await self._call_tools(ctx, node, step, reply, messages)
        return message_text(messages[-1])

    async def _call_tools(
        self,
        ctx: RunContext,
        node: PlannedNode,
        step: int,
        reply: AIMessage,
        messages: list[BaseMessage],
    ) -> None:
        for call in reply.tool_calls:
            result = await ctx.tools.call(call["name"], call["args"])
            ctx.recorder.tool_call(node.name, step, call["name"], call["args"], result)
            content = result.output if result.ok else f"ERROR: {result.error}"
            messages.append(ToolMessage(content=content, tool_call_id=call["id"] or call["name"]))
        for bad in reply.invalid_tool_calls:
            error = f"arguments are not valid JSON: {bad.get('error') or bad.get('args')}"
            result = ToolResult(False, "", error)
            name = bad.get("name") or "<unnamed>"
            ctx.recorder.tool_call(node.name, step, name, bad.get("args") or "", result)
            messages.append(
                ToolMessage(content=f"ERROR: {error}", tool_call_id=bad.get("id") or name)
            )

    def build_graph(self, ctx: RunContext) -> Any:
        plan = ctx.plan
        builder = StateGraph(GraphState)

        def make_node(node: PlannedNode, last_in_loop: bool):  # type: ignore[no-untyped-def]
            async def fn(state: GraphState) -> dict[str, Any]:
                step = state["step"] if node.spec.loop else 1
                text = await self.run_node(ctx, node, state)
                out = ctx.recorder.node_output(node.name, step, node.spec.output_key, text)
                update: dict[str, Any] = {"outputs": [out]}
                if node.stops_loop(text):
                    update["done"] = True
                if last_in_loop:
                    update["step"] = state["step"] + 1
                return update

            return fn

        loop = plan.loop
        for n in plan.nodes:
            builder.add_node(n.name, make_node(n, bool(loop) and n is loop[-1]))

        def chain(names: list[str]) -> None:
            for a, b in pairwise(names):
                builder.add_edge(a, b)

        before = [n.name for n in plan.before]
        after = [n.name for n in plan.after]
        if not loop:
            chain([START, *before, *after, END])
            return builder.compile()
        chain([START, *before, loop[0].name])
        chain([*after, END])
        exit_target = after[0] if after else END
        max_steps = plan.max_steps
        for i, n in enumerate(loop):
            last = i == len(loop) - 1
            nxt = loop[0].name if last else loop[i + 1].name

            def route(state: GraphState, _last: bool = last) -> str:
                # a stop_when match ends the loop at once; a full round ends it after max_steps
                if state["done"] or (_last and state["step"] > max_steps):
                    return "exit"
                return "next"

            builder.add_conditional_edges(n.name, route, {"next": nxt, "exit": exit_target})
        return builder.compile()

    async def run(self, ctx: RunContext) -> str:
        graph = self.build_graph(ctx)
        plan = ctx.plan
        limit = len(plan.before) + len(plan.loop) * plan.max_steps + len(plan.after) + 5
        final = await graph.ainvoke(
            {"outputs": [], "step": 1, "done": False}, config={"recursion_limit": limit}
        )
        outputs: list[NodeOutput] = final["outputs"]
        return outputs[-1].text if outputs else ""

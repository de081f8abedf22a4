"""LangChain: the workflow as an LCEL runnable over LangChain's own agents.

Two LangChain constructs run the workflow, both built once per run (the agents by
:meth:`LangChainAdapter.objects`, the runnable by :meth:`LangChainAdapter.build_workflow`):

* **the node chain and the loop are LCEL runnables.** Every workflow node is a runnable
  ``RunnablePassthrough.assign(reply=prompt | agent | text)`` followed by the bookkeeping
  step that records the node's output; its input and output are the workflow state (the
  node outputs so far, the loop's step, whether a ``stop_when`` matched). The nodes before
  the loop are a ``RunnableSequence``; one round of the loop is the sequence of the loop
  nodes, each behind a ``RunnableBranch`` that passes the state through once a node's
  ``stop_when`` matched (the loop ends at once); the loop itself is a ``RunnableLambda``
  that returns ``round | itself`` while fewer than ``max_steps`` rounds were made and no
  node stopped it — LCEL's recursion (a lambda that returns a runnable has it invoked),
  bounded by the config's ``recursion_limit``; then the nodes after the loop. The whole
  is one ``ainvoke``.
* **each node's model and tool turns are a LangChain 1.x agent**, ``langchain.agents.
  create_agent`` (one per workflow node, tools only where the node uses them), whose input
  is the node prompt (``render_prompt``, as for every framework) as the only user message,
  with no system prompt. Nodes without tools get an agent with no tools, which compiles to
  one model call. The node's output is the text of the agent's last message.

Inside a tool-using node the agent runs its own loop (model → ``ToolNode`` → model ...)
with one middleware, :class:`NodeTurns` (``awrap_model_call``), for the per-node turn
policy every adapter has: the first model turn uses the node's ``tool_choice``, later turns
``"auto"``; after ``max_tool_rounds`` turns that asked for tools the next turn is made
without tools (``request.override(tools=[])``), so the node ends in text; if the model asks
for tools anyway the agent is sent to its end (``jump_to: "end"``) and those calls are not
run. It also records the calls the agent refuses before any tool runs (a name that is not
offered — answered by the agent's ``ToolNode`` with its own error text — and arguments that
are not valid JSON). Calls that do run go through ``RunContext.call_tool`` (the shared
``langchain_tools``), which records them; the two sets are disjoint.

LangChain's prebuilt limits were tried and are not used: ``ModelCallLimitMiddleware`` at
its limit ends the agent with an injected AI message instead of a last model turn without
tools (and as a mere backstop beside :class:`NodeTurns`, its ``after_model`` step kept the
agent from taking the jump to the end after a capped turn: the capped turn's calls ran);
``ToolCallLimitMiddleware`` counts single tool calls, not rounds.

The model clients (langchain-openai's ``ChatOpenAI``, one per node for the node's gateway
URL) and the tool objects are the ones the LangGraph adapter builds (``chat_model``,
``langchain_tools``); under ``mcp`` the tools come from langchain-mcp-adapters.
What ``create_agent`` sends that the LangGraph adapter does not: after a turn with
malformed tool-call JSON *and* valid calls, it answers the malformed call with its own
``ToolMessage`` ("... could not be executed - arguments were malformed or truncated.")
before the next model turn. Otherwise, for the same conversation, the requests are the
same (no system prompt, one request per model turn).

Under ``a2a`` the orchestrator agent runs the same LCEL runnable (:meth:`LangChainAdapter.
orchestrate`): each node's runnable hands its visit to the node's agent as an A2A request
(``mastif.frameworks.orchestration.visit_node``) instead of invoking a local agent. A node agent (and a
hierarchical decomposer/worker/synthesiser) runs its visit with
:meth:`LangChainAdapter.run_node`: the node's agent invoked with the given prompt; the agents
and tools are built once per run and reused by every visit. Building them and the runnable
is timed as set-up (``ctx.setting_up``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import reduce
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import (
    Runnable,
    RunnableBranch,
    RunnableLambda,
    RunnablePassthrough,
)
from langchain_core.tools import BaseTool
from langgraph.types import Command

from mastif.core.trace import NodeOutput
from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.langgraph import (
    chat_model,
    load_tools,
    message_text,
    record_refused_calls,
)
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode, WorkflowPlan, render_prompt


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


@dataclass
class RunObjects:
    """What a run builds once: its tools and one agent per workflow node."""

    tools: list[BaseTool]
    agents: dict[str, Any]


def reply_text(result: dict[str, Any]) -> str:
    """A node's output: the text of the agent's last AI message."""
    reply = _last_ai(result["messages"])
    return message_text(reply) if reply is not None else ""


def chain(steps: list[Runnable]) -> Runnable:
    return reduce(lambda a, b: a | b, steps)


def delegated_runnable(ctx: RunContext, dispatch: Dispatch, node: PlannedNode) -> Runnable:
    """A node's visit handed to an agent (``visit_node``: the rendered prompt to
    ``dispatch``, its text recorded); the workflow state in and out."""

    async def delegate(state: dict[str, Any]) -> dict[str, Any]:
        step = state["step"] if node.spec.loop else 1
        text = await visit_node(ctx, dispatch, node, step)
        return {
            "outputs": [*state["outputs"], ctx.recorder.node_outputs[-1]],
            "step": state["step"],
            "done": state["done"] or node.stops_loop(text),
        }

    return RunnableLambda(delegate, name=node.name)


def agent_runnable(ctx: RunContext, objects: RunObjects, node: PlannedNode) -> Runnable:
    """A node's visit by its local agent: ``RunnablePassthrough.assign(reply=prompt | agent |
    text)``, then the step that records the node's output; the workflow state in and out."""
    plan = ctx.plan
    tools = objects.tools
    names = [t.name for t in tools] if node.spec.use_tools and tools else []

    async def prompt(state: dict[str, Any]) -> dict[str, Any]:
        step = state["step"] if node.spec.loop else 1
        ctx.at(node.name, step)
        text = render_prompt(
            node, ctx.task, state["outputs"], step, plan.max_steps, names,
            prompt_format=plan.prompt_format, tool_calls=ctx.recorder.tool_calls,
            page=await ctx.page_for(node),
        )  # fmt: skip
        return {"messages": [HumanMessage(text)]}

    async def text(result: dict[str, Any]) -> str:
        return reply_text(result)

    async def record(state: dict[str, Any]) -> dict[str, Any]:
        step = state["step"] if node.spec.loop else 1
        reply = state["reply"]
        out = ctx.recorder.node_output(node.name, step, node.spec.output_key, reply)
        return {
            "outputs": [*state["outputs"], out],
            "step": state["step"],
            "done": state["done"] or node.stops_loop(reply),
        }

    agent = objects.agents[node.name]
    visit = RunnableLambda(prompt, name="prompt") | agent | RunnableLambda(text)
    return (
        RunnablePassthrough.assign(reply=visit) | RunnableLambda(record, name="record")
    ).with_config(run_name=node.name)


def loop_runnable(plan: WorkflowPlan, node_runnable: Callable[[PlannedNode], Runnable]) -> Runnable:
    """The loop: a ``RunnableLambda`` that returns ``round | itself`` while fewer than
    ``max_steps`` rounds were made and no node's ``stop_when`` matched."""

    async def stopped(state: dict[str, Any]) -> bool:
        return state["done"]

    async def next_round(state: dict[str, Any]) -> dict[str, Any]:
        return {**state, "step": state["step"] + 1}

    # a stop_when match skips the rest of the round (and ends the loop below)
    guarded = [
        RunnableBranch((RunnableLambda(stopped), RunnablePassthrough()), node_runnable(n))
        for n in plan.loop
    ]
    one_round = chain([*guarded, RunnableLambda(next_round)]).with_config(run_name="round")

    async def loop_fn(state: dict[str, Any]) -> Any:
        if state["done"] or state["step"] > plan.max_steps:
            return state
        return one_round | loop  # LCEL invokes a returned runnable: the next round

    loop = RunnableLambda(loop_fn, name="loop")
    return loop


class LangChainAdapter:
    name = "langchain"
    #: the distributions a run uses (mastif.core.provenance): create_agent builds a LangGraph graph
    packages = ("langchain", "langchain-core", "langgraph", "langchain-openai", "openai")
    mcp_packages = ("langchain-mcp-adapters", "mcp")
    #: no private member of LangChain or LangGraph is overridden or called
    private_members = ()

    def build_agent(self, ctx: RunContext, node: PlannedNode, tools: list[BaseTool]) -> Any:
        """LangChain's agent for one workflow node (tools only where the node uses them)."""
        model = chat_model(ctx, node.name)
        if node.spec.use_tools and tools:
            return create_agent(model, tools, middleware=[NodeTurns(ctx, node)])
        return create_agent(model, [])

    async def objects(self, ctx: RunContext) -> RunObjects:
        """The run's tools and agents, built on its first use and kept with its context."""
        built = ctx.built.get(self.name)
        if built is None:
            with ctx.setting_up():
                tools = await load_tools(ctx)
                agents = {n.name: self.build_agent(ctx, n, tools) for n in ctx.plan.nodes}
                built = ctx.built[self.name] = RunObjects(tools, agents)
        assert isinstance(built, RunObjects)
        return built

    def recursion_limit(self, ctx: RunContext) -> int:
        """LCEL's and the agents' bound (one config for both): one level per loop round, and
        per agent visit two graph steps per tool round (model, tools) and the last model
        turn, with room to spare; the real bounds are the plan's and :class:`NodeTurns`'."""
        return ctx.plan.max_steps + 2 * ctx.generation.max_tool_rounds + 1 + 10

    def build_workflow(
        self, ctx: RunContext, objects: RunObjects | None, dispatch: Dispatch | None = None
    ) -> Runnable:
        """The plan as one LCEL runnable from the initial state to the final state.

        ``dispatch``: each node's runnable hands its visit to an agent (``visit_node``: the
        rendered prompt to ``dispatch``, its text recorded) instead of invoking the node's
        local agent; ``objects`` are then not needed.
        """
        plan: WorkflowPlan = ctx.plan

        def node_runnable(node: PlannedNode) -> Runnable:
            if dispatch is not None:
                return delegated_runnable(ctx, dispatch, node)
            assert objects is not None
            return agent_runnable(ctx, objects, node)

        steps = [node_runnable(n) for n in plan.before]
        if plan.loop:
            steps.append(loop_runnable(plan, node_runnable))
        steps += [node_runnable(n) for n in plan.after]
        if not steps:
            raise ValueError("workflow has no nodes")
        return chain(steps).with_config(run_name="mastif-workflow")

    async def run(self, ctx: RunContext) -> str:
        objects = await self.objects(ctx)
        with ctx.setting_up():
            workflow = self.build_workflow(ctx, objects)
        return await self._invoke(ctx, workflow)

    async def orchestrate(self, ctx: RunContext, dispatch: Dispatch) -> str:
        """The workflow's runnable, each node's visit handed to ``dispatch`` (``a2a``: the
        node agents); the same chain and loop as :meth:`run`."""
        with ctx.setting_up():
            workflow = self.build_workflow(ctx, None, dispatch)
        return await self._invoke(ctx, workflow)

    async def _invoke(self, ctx: RunContext, workflow: Runnable) -> str:
        final = await workflow.ainvoke(
            {"outputs": [], "step": 1, "done": False},
            config={"recursion_limit": self.recursion_limit(ctx)},
        )
        outputs: list[NodeOutput] = final["outputs"]
        return outputs[-1].text if outputs else ""

    async def run_node(self, ctx: RunContext, node: PlannedNode, step: int, prompt: str) -> str:
        """One visit of ``node`` with the given prompt (for orchestrators), by its own agent."""
        objects = await self.objects(ctx)
        ctx.at(node.name, step)
        result = await objects.agents[node.name].ainvoke(
            {"messages": [HumanMessage(prompt)]},
            config={"recursion_limit": self.recursion_limit(ctx)},
        )
        return reply_text(result)

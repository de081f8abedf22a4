"""Who delegates: an orchestrator that hands node visits to agents, in- or out-of-process.

A linear workflow is orchestrated by the framework itself (a LangGraph ``StateGraph``, a
CrewAI Flow, an SK process, ...; see :mod:`mastif.frameworks`), under every protocol. This
module covers delegation:

* the ``a2a`` protocol: every agent is a real A2A agent, so each node visit travels as an
  A2A message (the rendered node prompt as a text part, ``{node, step}`` as a data part)
  and comes back as a task artifact; inside the agent the stack's framework runs the node.
  The orchestrator agent runs the framework's own workflow construct, whose node steps are
  these A2A requests (the adapter's ``orchestrate``, :func:`run_workflow`);
* the ``hierarchical`` workflow shape (seed paper, Section 3: an orchestrator decomposes the
  task, dispatches subtasks to sub-agents, and synthesises their results), under any
  protocol.

Both take a ``dispatch(node, step, prompt) -> text`` function: in-process it is the
framework's ``run_node``; under ``a2a`` it is an A2A request to the node's agent. Every
visit goes through :func:`visit_node`, which renders the prompt, records the node output and
keeps the history, so the agents only know what their messages tell them.

Under ``a2a`` the orchestrator is an A2A agent too (:data:`ORCHESTRATOR`): the run starts
with an A2A message carrying the task to it (:func:`submit_over_a2a`), and its work
(:func:`orchestrate_over_a2a`) is the workflow above, delegating over A2A with a client of
its own. Every A2A exchange is timed by the orchestrator's client
(:class:`~mastif.protocols.wire.MeteredTransport`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mastif.frameworks.base import Dispatch, FrameworkAdapter, RunContext
from mastif.frameworks.plan import PlannedNode, WorkflowPlan, drive_workflow, render_prompt

if TYPE_CHECKING:  # a2a-sdk loads only when a stack runs under a2a
    from mastif.protocols.a2a import A2AAgents, A2AOrchestratorClient, AgentSpec

#: a subtask line: "1. ...", "2) ...", "- ...", "* ..." (the decomposer's list items), also
#: behind the quote or markdown small models put first ('"1. Open ...', '**1.** Open ...')
_ITEM = re.compile(r"^[\s\"'`>#*_]*(?:\d+[.)]|[-*\u2022])[*_]*\s+(?P<text>\S.*)$")


def parse_subtasks(text: str, limit: int) -> list[str]:
    """The decomposer's list items, at most ``limit``; none found -> no subtasks."""
    items = []
    for line in text.splitlines():
        if m := _ITEM.match(line):
            item = m.group("text").strip().strip("\"'`*_").strip()
            if item:
                items.append(item)
    return items[:limit]


def tool_names_for(ctx: RunContext, node: PlannedNode) -> list[str]:
    return ctx.tool_names() if node.spec.use_tools else []


async def visit_node(
    ctx: RunContext, dispatch: Dispatch, node: PlannedNode, step: int, subtask: str | None = None
) -> str:
    """Render the node's prompt from the run's history, dispatch it, record the output."""
    ctx.at(node.name, step)
    prompt = render_prompt(
        node, ctx.task, ctx.recorder.node_outputs, step, ctx.plan.max_steps,
        tool_names_for(ctx, node), subtask=subtask, prompt_format=ctx.plan.prompt_format,
        max_subtasks=ctx.plan.max_subtasks, tool_calls=ctx.recorder.tool_calls,
        page=await ctx.page_for(node),
    )  # fmt: skip
    text = await dispatch(node, step, prompt)
    ctx.recorder.node_output(node.name, step, node.spec.output_key, text)
    return text


async def run_linear(ctx: RunContext, dispatch: Dispatch) -> str:
    """The linear workflow (loop rules of :func:`mastif.frameworks.plan.drive_workflow`)."""

    async def visit(node: PlannedNode, step: int) -> str:
        return await visit_node(ctx, dispatch, node, step)

    await drive_workflow(ctx.plan, visit)
    outputs = ctx.recorder.node_outputs
    return outputs[-1].text if outputs else ""


async def run_hierarchical(ctx: RunContext, dispatch: Dispatch, delegate: Dispatch) -> str:
    """Decompose with ``dispatch``, run each subtask with ``delegate``, synthesise.

    The plan's three nodes are the decomposer, the worker and the synthesiser (checked when
    the config is loaded). The decomposer's list items are the subtasks (at most
    ``max_subtasks``); a reply without a list leaves one subtask, the task itself, so the
    worker always runs. The synthesiser sees every worker result in its history.
    """
    decomposer, worker, synthesiser = ctx.plan.nodes
    plan_text = await visit_node(ctx, dispatch, decomposer, 1)
    subtasks = parse_subtasks(plan_text, ctx.plan.max_subtasks) or [ctx.task.confirmed_task]
    for i, subtask in enumerate(subtasks, start=1):
        await visit_node(ctx, delegate, worker, i, subtask=subtask)
    return await visit_node(ctx, dispatch, synthesiser, 1)


async def run_workflow(
    ctx: RunContext, framework: FrameworkAdapter, over_a2a: Dispatch | None = None
) -> str:
    """Run one task under the stack's protocol and the plan's shape; return the final answer.

    ``over_a2a`` sends a node visit to its A2A agent (``a2a`` only). Linear: the framework
    orchestrates, with its own construct (``run``); under A2A the same construct, its node
    steps being A2A requests to the node agents (``orchestrate``; a plugin without it gets
    :func:`run_linear`). Hierarchical: our orchestrator decomposes and synthesises with the
    framework in-process and sends each subtask to the worker (over A2A under ``a2a``).
    """

    async def in_process(node: PlannedNode, step: int, prompt: str) -> str:
        return await framework.run_node(ctx, node, step, prompt)

    if ctx.plan.shape == "hierarchical":
        return await run_hierarchical(ctx, in_process, over_a2a or in_process)
    if over_a2a is not None:
        orchestrate = getattr(framework, "orchestrate", None)
        if orchestrate is None:
            return await run_linear(ctx, over_a2a)
        return str(await orchestrate(ctx, over_a2a))
    return await framework.run(ctx)


#: the orchestrator's agent name (no workflow node may have it under a2a)
ORCHESTRATOR = "orchestrator"


def a2a_agent_specs(plan: WorkflowPlan) -> list[AgentSpec]:
    """The run's A2A agents: the orchestrator, and every node (linear) or the worker
    (hierarchical)."""
    from mastif.protocols.a2a import AgentSpec

    nodes = [plan.nodes[1]] if plan.shape == "hierarchical" else list(plan.nodes)
    orchestrator = AgentSpec(
        name=ORCHESTRATOR,
        description="Carries out a web task by delegating its steps to the workflow's agents.",
        skill_id="web_task",
        skill_name="web task",
        skill_description="Given a web task, returns the final report on it.",
    )
    return [orchestrator, *(node_agent_spec(n) for n in nodes)]


def node_agent_spec(node: PlannedNode) -> AgentSpec:
    """The A2A agent that carries out a workflow node."""
    from mastif.protocols.a2a import AgentSpec

    what = node.spec.output_key.replace("_", " ")
    return AgentSpec(
        name=node.name,
        description=f"Carries out the {node.name} step of a web task and reports its {what}.",
        skill_id=node.name,
        skill_name=node.name.replace("_", " "),
        skill_description=f"Given the node prompt of a web task, returns the {what}.",
    )


def over_a2a(client: A2AOrchestratorClient) -> Dispatch:
    """Node visits as A2A messages to the node's agent."""

    async def send(node: PlannedNode, step: int, prompt: str) -> str:
        return await client.send(node.name, prompt, {"node": node.name, "step": step})

    return send


async def orchestrate_over_a2a(
    ctx: RunContext, framework: FrameworkAdapter, agents: A2AAgents
) -> str:
    """The orchestrator agent's work: the workflow, delegating node visits over A2A."""
    from mastif.protocols.a2a import A2AOrchestratorClient

    async with A2AOrchestratorClient(agents, ctx.run_id) as client:
        return await run_workflow(ctx, framework, over_a2a(client))


async def submit_over_a2a(ctx: RunContext, agents: A2AAgents) -> str:
    """The user's side under ``a2a``: the task to the orchestrator agent, its answer back."""
    from mastif.protocols.a2a import A2AOrchestratorClient

    async with A2AOrchestratorClient(agents, ctx.run_id) as client:
        data = {"task_id": ctx.task.task_id}
        return await client.send(ORCHESTRATOR, ctx.task.confirmed_task, data)

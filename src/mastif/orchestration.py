"""Who delegates: an orchestrator that hands node visits to agents, in- or out-of-process.

Under ``standard`` and ``mcp`` a linear workflow is orchestrated by the framework itself (a
LangGraph ``StateGraph``, CrewAI crews, ...; see :mod:`mastif.frameworks`). This module
covers the two cases where an orchestrator of ours delegates to agents instead:

* the ``a2a`` protocol: every agent is a real A2A agent, so each node visit travels as an
  A2A message (the rendered node prompt as a text part, ``{node, step}`` as a data part)
  and comes back as a task artifact; inside the agent the stack's framework runs the node;
* the ``hierarchical`` workflow shape (seed paper, Section 3: an orchestrator decomposes the
  task, dispatches subtasks to sub-agents, and synthesises their results), under any
  protocol.

Both take a ``dispatch(node, step, prompt) -> text`` function: in-process it is the
framework's ``run_node``; under ``a2a`` it is an A2A request to the node's agent. The
orchestrator renders prompts, records node outputs and keeps the history, so the agents
only know what their messages tell them.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from mastif.frameworks.base import FrameworkAdapter, RunContext
from mastif.workflow import PlannedNode, drive_workflow, render_prompt

Dispatch = Callable[[PlannedNode, int, str], Awaitable[str]]

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
        max_subtasks=ctx.plan.max_subtasks,
    )  # fmt: skip
    text = await dispatch(node, step, prompt)
    ctx.recorder.node_output(node.name, step, node.spec.output_key, text)
    return text


async def run_linear(ctx: RunContext, dispatch: Dispatch) -> str:
    """The linear workflow (loop rules of :func:`mastif.workflow.drive_workflow`)."""

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

    ``over_a2a`` sends a node visit to its A2A agent (``a2a`` only). Linear without A2A:
    the framework orchestrates. Linear under A2A: our orchestrator sends every node visit
    to its agent. Hierarchical: our orchestrator decomposes and synthesises with the
    framework in-process and sends each subtask to the worker (over A2A under ``a2a``).
    """

    async def in_process(node: PlannedNode, step: int, prompt: str) -> str:
        return await framework.run_node(ctx, node, step, prompt)

    if ctx.plan.shape == "hierarchical":
        return await run_hierarchical(ctx, in_process, over_a2a or in_process)
    if over_a2a is not None:
        return await run_linear(ctx, over_a2a)
    return await framework.run(ctx)


def a2a_agent_nodes(plan_nodes: tuple[PlannedNode, ...], shape: str) -> list[PlannedNode]:
    """The workflow nodes that are A2A agents: every node (linear), the worker (hierarchical)."""
    return [plan_nodes[1]] if shape == "hierarchical" else list(plan_nodes)

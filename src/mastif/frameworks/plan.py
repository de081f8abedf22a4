"""The agent workflow, independent of any framework.

A workflow is an ordered list of nodes, each with a prompt template and an output key.
Consecutive ``loop`` nodes form one loop (the seed's observe <-> interact) that runs up to
``max_steps`` rounds; a loop node with ``stop_when`` ends the loop early when its output
matches. Framework adapters turn this plan into their own orchestration (a LangGraph
``StateGraph``, a CrewAI crew, ...) but take prompts, history and stop rule from here, so
every framework runs the same workflow.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mastif.core.config import GenerationSpec, NodeSpec, WorkflowSpec, resolve_path
from mastif.core.textclip import head_at_word
from mastif.core.trace import NodeOutput, ToolCall
from mastif.tasks import Task

#: how much of each earlier node output is shown to later nodes (small models, small contexts)
HISTORY_CHARS_PER_OUTPUT = 600
#: how much of each earlier tool result is shown (a page listing is long; its start has
#: the title, URL and first lines of text)
HISTORY_CHARS_PER_TOOL_RESULT = 700


@dataclass(frozen=True)
class PlannedNode:
    spec: NodeSpec
    template: str
    prompt_sha256: str

    @property
    def name(self) -> str:
        return self.spec.name

    def stops_loop(self, text: str) -> bool:
        return bool(self.spec.stop_when and re.search(self.spec.stop_when, text))


@dataclass(frozen=True)
class WorkflowPlan:
    """Nodes split into the part before the loop, the loop, and the part after it."""

    before: tuple[PlannedNode, ...]
    loop: tuple[PlannedNode, ...]
    after: tuple[PlannedNode, ...]
    max_steps: int
    shape: str = "linear"  # or "hierarchical": decomposer, worker, synthesiser
    max_subtasks: int = 3
    #: a protocol whose message format wraps every prompt (the seed paper's condition)
    prompt_format: str | None = None

    @property
    def nodes(self) -> tuple[PlannedNode, ...]:
        return self.before + self.loop + self.after

    def prompt_hashes(self) -> dict[str, str]:
        return {n.name: n.prompt_sha256 for n in self.nodes}


def plan_workflow(
    workflow: WorkflowSpec,
    generation: GenerationSpec,
    base_dir: Path | None = None,
    prompt_format: str | None = None,
) -> WorkflowPlan:
    nodes = []
    for spec in workflow.nodes:
        raw = resolve_path(spec.prompt, base_dir).read_bytes()
        nodes.append(PlannedNode(spec, raw.decode("utf-8"), hashlib.sha256(raw).hexdigest()))
    shape = {"shape": workflow.shape, "max_subtasks": workflow.max_subtasks,
             "prompt_format": prompt_format}  # fmt: skip
    loop_idx = [i for i, n in enumerate(nodes) if n.spec.loop]
    if workflow.shape == "hierarchical":
        if len(nodes) != 3 or loop_idx:
            raise ValueError(
                "workflow.nodes: the hierarchical shape needs exactly three nodes without "
                "loop (decomposer, worker, synthesiser)"
            )
    if not loop_idx:
        return WorkflowPlan(tuple(nodes), (), (), generation.max_steps, **shape)
    first, last = loop_idx[0], loop_idx[-1]
    if loop_idx != list(range(first, last + 1)):
        raise ValueError("workflow.nodes: loop nodes must be consecutive (one loop per workflow)")
    return WorkflowPlan(
        tuple(nodes[:first]), tuple(nodes[first : last + 1]), tuple(nodes[last + 1 :]),
        generation.max_steps, **shape,
    )  # fmt: skip


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text`` (and " ..."), cut between words: a cut inside
    the sandbox's ``127.0.0.1:PORT`` would make the prompt differ between stack jobs, past
    the response cache's stand-in for it (see :mod:`mastif.core.textclip`)."""
    text = text.strip()
    return text if len(text) <= limit else head_at_word(text, limit) + " ..."


def format_history(outputs: list[NodeOutput], tool_calls: Sequence[ToolCall] = ()) -> str:
    """Earlier node outputs in order, each preceded by the tool calls of its visit.

    Tool results are what the agent observed (the seed's observation step); without them
    a later node only sees the model's own retelling of a page or search result.
    """
    if not outputs:
        return "(nothing yet)"
    lines = []
    for o in outputs:
        for call in tool_calls:
            if (call.node, call.step) == (o.node, o.step):
                result = f"ok: {call.output}" if call.ok else f"failed: {call.error}"
                lines.append(
                    f"[{o.node} {o.step}] tool {call.name}({_clip(call.arguments, 200)}) -> "
                    + _clip(result, HISTORY_CHARS_PER_TOOL_RESULT)
                )
        lines.append(f"[{o.node} {o.step}] {_clip(o.text, HISTORY_CHARS_PER_OUTPUT)}")
    return "\n".join(lines)


def render_prompt(
    node: PlannedNode,
    task: Task,
    outputs: list[NodeOutput],
    step: int,
    max_steps: int,
    tool_names: list[str],
    subtask: str | None = None,
    prompt_format: str | None = None,
    max_subtasks: int = 3,
    tool_calls: Sequence[ToolCall] = (),
    page: str | None = None,
) -> str:
    """Fill a node's template; placeholders were checked against PROMPT_FIELDS at load.

    ``subtask`` is the part of the task a hierarchical worker was given (the task itself
    elsewhere). ``page`` is the run's current browser page as a listing (the observation a
    web agent acts on; see :meth:`mastif.frameworks.base.RunContext.page_for`). With ``prompt_format`` the prompt is wrapped in that protocol's message
    format (see :mod:`mastif.protocols.envelope`).
    """
    text = node.template.format(
        task=task.confirmed_task,
        website=task.website,
        # a source without domains (Online-Mind2Web) says so rather than printing None
        domain=task.domain or "unspecified",
        subdomain=task.subdomain or "unspecified",
        step=step,
        max_steps=max_steps,
        history=format_history(outputs, tool_calls),
        tools=", ".join(tool_names) if tool_names else "none",
        subtask=subtask if subtask is not None else task.confirmed_task,
        max_subtasks=max_subtasks,
        start_url=task.start_url or "(none given)",
        page=page if page is not None else "(no page is open)",
    )
    if prompt_format:
        from mastif.protocols.envelope import wrap_prompt

        text = wrap_prompt(prompt_format, text, node.name, step)
    return text


async def drive_workflow(
    plan: WorkflowPlan, visit: Callable[[PlannedNode, int], Awaitable[str]]
) -> None:
    """Run the plan in order for adapters that chain nodes in plain Python.

    ``visit(node, step)`` runs one node and returns its text. The nodes before the loop run
    once, then the loop nodes in order for up to ``max_steps`` rounds — a ``stop_when`` match
    ends the loop at once — then the nodes after the loop. (LangGraph expresses the same rules
    as conditional edges.)
    """
    for node in plan.before:
        await visit(node, 1)
    for step in range(1, plan.max_steps + 1 if plan.loop else 1):
        for node in plan.loop:
            if node.stops_loop(await visit(node, step)):
                break
        else:
            continue
        break
    for node in plan.after:
        await visit(node, 1)

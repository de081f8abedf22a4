"""The linear workflow as Langroid ``Task`` delegation: a controller task with one sub-task
per workflow node.

The controller (``Task(WorkflowAgent, name="workflow")``) has no LLM: its agent's responder
(``agent_response_async``) is the workflow's routing. Given the task (the run's first
message) or a sub-task's result, it decides the next visit and answers with a message
addressed to that node's sub-task (``metadata.recipient``); Langroid's task loop then lets
only that sub-task respond (``Task.step_async``: a responder whose name is not the
recipient cannot respond), runs it (``sub_task.run_async(message, caller=controller)``)
and hands its result back to the controller's agent as the next pending message. When the
workflow is over the agent answers with Langroid's ``AgentDoneTool`` carrying the last node
output, which ends the controller task (``Task.done``) and is its result. (Node outputs are
read from the run's record, not from the sub-tasks' results: Langroid's task loop takes an
empty result for no answer.) The routing rules
are those of every adapter (the nodes before the loop once, the loop nodes in order for up
to ``max_steps`` rounds, a ``stop_when`` match leaving the loop at once, then the nodes
after it); mastif's ``drive_workflow`` / ``run_linear`` are not used.

Each node's sub-task (``Task(VisitAgent, name=<node>)``) has no LLM either: its agent's
responder makes the visit (:func:`mastif.frameworks.orchestration.visit_node`: the prompt
rendered from the run's history, handed to ``dispatch``, the output recorded) and answers
with ``AgentDoneTool`` (the visit done; its output is in the run's record, where the
controller reads it), which ends the sub-task. ``dispatch`` is, in
``LangroidAdapter.run``, one run of the node's own Langroid task (its ``ChatAgent`` with the
model and the tools); under ``a2a`` an A2A request to the node's agent. The controller and
its sub-tasks make no model calls of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langroid.agent.chat_agent import ChatAgent, ChatAgentConfig
from langroid.agent.chat_document import ChatDocMetaData, ChatDocument
from langroid.agent.task import Task, TaskConfig
from langroid.agent.tools.orchestration import AgentDoneTool
from langroid.cachedb.redis_cachedb import RedisCache, RedisCacheConfig
from langroid.mytypes import Entity

from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode

#: the controller task's name (no workflow node is called so: node names are sub-task names)
CONTROLLER = "mastif_workflow"


class QuietTask(Task):
    """Langroid's Task; its kill-switch store (``Task.cache()``, a Redis client that would
    connect to ``REDIS_HOST`` if set) is an in-memory fakeredis."""

    _cache = RedisCache(RedisCacheConfig(fake=True))


def task_config() -> TaskConfig:
    """No log files (Langroid writes ``logs/<task>.log`` and HTML logs by default), no text
    signals (``DONE``/``PASS`` in a node's output must not steer the workflow), no
    infinite-loop guess (a loop of identical outputs is the workflow's, bounded by
    ``max_steps``)."""
    return TaskConfig(
        enable_loggers=False,
        enable_html_logging=False,
        recognize_string_signals=False,
        inf_loop_cycle_len=0,
    )


def no_llm(name: str) -> ChatAgentConfig:
    return ChatAgentConfig(name=name, llm=None, enable_orchestration_tool_handling=False)


@dataclass
class Position:
    """Where the workflow is: ``phase`` ("before", "loop", "after"), the node's index in it,
    and the loop round."""

    phase: str = "start"
    index: int = 0
    round: int = 1

    def node(self, ctx: RunContext) -> PlannedNode:
        return getattr(ctx.plan, self.phase)[self.index]

    def step(self) -> int:
        return self.round if self.phase == "loop" else 1


class WorkflowAgent(ChatAgent):
    """The controller's agent: the workflow's routing as its responder."""

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(no_llm(CONTROLLER))
        self.ctx = ctx
        self.at = Position()
        self.last = ""

    def advance(self, output: str | None) -> Position | None:
        """The next visit after the current one answered ``output`` (None: the start);
        None when the workflow is over."""
        plan, at = self.ctx.plan, self.at
        if at.phase == "start":
            return self.first("before")
        if at.phase == "before" and at.index + 1 < len(plan.before):
            return Position("before", at.index + 1)
        if at.phase == "before":
            return self.first("loop")
        if at.phase == "loop":
            if at.node(self.ctx).stops_loop(output or ""):
                return self.first("after")  # a stop_when match ends the loop at once
            if at.index + 1 < len(plan.loop):
                return Position("loop", at.index + 1, at.round)
            if at.round < plan.max_steps:
                return Position("loop", 0, at.round + 1)  # the next round
            return self.first("after")
        if at.index + 1 < len(plan.after):
            return Position("after", at.index + 1)
        return None

    def first(self, phase: str) -> Position | None:
        plan = self.ctx.plan
        if phase == "before" and plan.before:
            return Position("before")
        if phase in ("before", "loop") and plan.loop and plan.max_steps >= 1:
            return Position("loop")
        if phase != "after" and not plan.after:
            return None
        return Position("after") if plan.after else None

    async def agent_response_async(self, msg: str | ChatDocument | None = None) -> Any:
        started = self.at.phase == "start"
        if not started:
            # the visit's output as the run recorded it (visit_node): a sub-task's result
            # only reports the visit, since Langroid's task loop takes an empty result
            # for no answer and would route the same visit again
            self.last = self.ctx.recorder.node_outputs[-1].text
        following = self.advance(None if started else self.last)
        if following is None:
            return self.to_ChatDocument(AgentDoneTool(content=self.last))
        self.at = following
        node = following.node(self.ctx)
        return ChatDocument(
            content=f"{node.name}, round {following.step()}",
            metadata=ChatDocMetaData(
                sender=Entity.AGENT, sender_name=CONTROLLER, recipient=node.name
            ),
        )


class VisitAgent(ChatAgent):
    """A node sub-task's agent: one visit of its node, handed to ``dispatch``."""

    def __init__(self, node: PlannedNode, controller: WorkflowAgent, dispatch: Dispatch) -> None:
        super().__init__(no_llm(node.name))
        self.node, self.controller, self.dispatch = node, controller, dispatch

    async def agent_response_async(self, msg: str | ChatDocument | None = None) -> Any:
        ctx = self.controller.ctx
        step = self.controller.at.step()
        await visit_node(ctx, self.dispatch, self.node, step)  # its output is in the record
        return self.to_ChatDocument(AgentDoneTool(content=f"{self.node.name}, round {step}: done"))


@dataclass
class LangroidWorkflow:
    """The controller task with its node sub-tasks, for one run."""

    controller: Task

    async def run(self, ctx: RunContext) -> str:
        result = await self.controller.run_async(ctx.task.confirmed_task)
        return result.content if result is not None else ""


def build_workflow(ctx: RunContext, dispatch: Dispatch) -> LangroidWorkflow:
    """The controller task and one sub-task per workflow node (see the module)."""
    agent = WorkflowAgent(ctx)
    controller = QuietTask(agent, name=CONTROLLER, interactive=False, config=task_config())
    controller.add_sub_task(
        [
            QuietTask(
                VisitAgent(node, agent, dispatch),
                name=node.name,
                interactive=False,
                config=task_config(),
            )  # fmt: skip
            for node in ctx.plan.nodes
        ]
    )
    return LangroidWorkflow(controller)

"""The workflow as an AG2 network: a hub, a ``workflow`` channel and its transition graph.

AG2 1.x's construct for a fixed order of speakers is a *workflow channel* on a hub
(``ag2.network``): ``WorkflowAdapter`` admits the participants' turns in the order a
``TransitionGraph`` (an initial speaker, prioritised ``Transition`` rules, a default target,
``max_turns``) selects from the folded channel state after every turn. The adapter builds one
per run (:func:`build_network`):

* the hub: ``Hub.open`` on an in-memory store (``MemoryKnowledgeStore``), with its TTL and
  expectation sweepers off (a run's time limit is mastif's; the workflow's default
  ``turn_within`` expectations would otherwise close a slow run at 600 s) and no tracer;
* participants: a ``workflow`` agent that opens the channel and posts the task (the initial
  speaker), and one agent per workflow node, registered with ``Hub.register`` (no
  ``NetworkPlugin`` tools: nothing here is decided by a model). Each node's ``AgentClient``
  has an envelope handler of its own (``AgentClient.on_envelope``, AG2's hook for it): on its
  turn it makes the node visit (``dispatch``: the node's ag2 ``Agent`` in-process, an A2A
  request under ``a2a``) and posts the visit's text as the turn's ``EV_TEXT``; invites are
  acknowledged by AG2's own ``default_handler``;
* the graph: ``FromSpeaker`` -> ``AgentTarget`` rules for the order, and a condition of our
  own, :class:`LoopExit` (registered with ``register_condition``, AG2's extension point for
  graph conditions), ahead of them: after a loop node's turn, a ``stop_when`` match in its
  text, or the end of the ``max_steps``-th round (counted from the channel's ``turn_count``),
  sends the turn to the first node after the loop (or ends the channel). The default target
  ends the channel after the last node.

The hub folds every turn and picks the next speaker; the channel's close (``EV_CHANNEL_CLOSED``
to the ``workflow`` agent) ends the run. No model call is made by the construct itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from ag2 import Agent
from ag2.knowledge import MemoryKnowledgeStore
from ag2.network import (
    EV_CHANNEL_CLOSED,
    EV_PACKET,
    EV_TEXT,
    WORKFLOW_TYPE,
    AgentClient,
    Envelope,
    Hub,
    WorkflowState,
    default_handler,
)
from ag2.network.transitions import (
    AgentTarget,
    FromSpeaker,
    TerminateTarget,
    Transition,
    TransitionGraph,
    register_condition,
)

from mastif.frameworks.base import Dispatch, RunContext
from mastif.frameworks.orchestration import visit_node
from mastif.frameworks.plan import PlannedNode, WorkflowPlan

#: the participant that opens the channel and posts the task
STARTER = "workflow"


def turn_text(envelope: Envelope) -> str:
    """The text of a turn (``EV_TEXT``, or a packet's body)."""
    data = envelope.event_data or {}
    text = data.get("body") if envelope.event_type == EV_PACKET else data.get("text")
    return text if isinstance(text, str) else ""


@dataclass(slots=True)
class LoopExit:
    """Fires after a loop node's turn when the loop ends there: its ``stop_when`` matched the
    turn's text, or (``last``) the turn closed round ``max_steps``. ``first_turn`` is the
    channel's ``turn_count`` after the loop's first visit; ``size`` the loop's node count."""

    node: str
    pattern: str
    last: bool
    first_turn: int
    size: int
    max_steps: int
    name: ClassVar[str] = "mastif_loop_exit"

    def evaluate(self, state: WorkflowState, envelope: Envelope) -> bool:
        if envelope.sender_id != self.node:
            return False
        if self.pattern and re.search(self.pattern, turn_text(envelope)):
            return True
        if not self.last:
            return False
        round_ = (state.turn_count - self.first_turn) // self.size + 1
        return round_ >= self.max_steps


register_condition(LoopExit)


def build_graph(plan: WorkflowPlan) -> TransitionGraph:
    """The plan as a transition graph over the node names (agent ids: see :func:`build_network`):
    the starter, the nodes before the loop, the loop for up to ``max_steps`` rounds (left at
    once on ``stop_when``), the nodes after it."""
    before, loop, after = list(plan.before), list(plan.loop), list(plan.after)
    if not plan.max_steps:
        loop = []
    order = [STARTER, *(n.name for n in before)]
    rules: list[Transition] = []
    exit_to = AgentTarget(after[0].name) if after else TerminateTarget("workflow_complete")
    if loop:
        first_turn = len(order) + 1  # the starter's task and the visits before the loop
        for i, node in enumerate(loop):
            last = i == len(loop) - 1
            rules.append(Transition(
                when=LoopExit(node.name, node.spec.stop_when or "", last, first_turn,
                              len(loop), plan.max_steps),
                then=exit_to, priority=0,
            ))  # fmt: skip
            nxt = loop[0] if last else loop[i + 1]
            rules.append(Transition(FromSpeaker(node.name), AgentTarget(nxt.name), priority=1))
        entry = loop[0].name
    else:
        entry = after[0].name if after else None
    chain = [*order, entry] if entry else order
    for speaker, nxt in zip(chain, chain[1:], strict=False):
        rules.append(Transition(FromSpeaker(speaker), AgentTarget(nxt), priority=1))
    for node, nxt in zip(after, after[1:], strict=False):
        rules.append(Transition(FromSpeaker(node.name), AgentTarget(nxt.name), priority=1))
    visits = 1 + len(before) + len(loop) * plan.max_steps + len(after)
    return TransitionGraph(
        initial_speaker=STARTER,
        transitions=rules,
        default_target=TerminateTarget("workflow_complete"),
        max_turns=visits,  # never cuts a run: at most every visit once
    )


@dataclass
class Network:
    """A run's hub, its participants and the graph; :meth:`run` drives one workflow."""

    ctx: RunContext
    hub: Hub
    graph: TransitionGraph
    starter: AgentClient
    nodes: dict[str, AgentClient]
    dispatch: Dispatch
    done: asyncio.Future[None] | None = None

    async def run(self) -> str:
        """Open the workflow channel, post the task, wait for the channel's close."""
        self.done = asyncio.get_running_loop().create_future()
        channel = await self.starter.open(
            type=WORKFLOW_TYPE,
            target=list(self.nodes),
            knobs={"graph": self.graph.to_dict()},
            intent=self.ctx.task.confirmed_task,
        )
        await channel.send(self.ctx.task.confirmed_task)
        try:
            await self.done
        finally:
            with contextlib.suppress(Exception):
                await channel.close("run ended")  # a run cut short: no turn after it
        outputs = self.ctx.recorder.node_outputs
        return outputs[-1].text if outputs else ""

    def fail(self, exc: BaseException) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(exc)

    async def on_starter(self, envelope: Envelope) -> None:
        if envelope.event_type == EV_CHANNEL_CLOSED:
            if self.done is not None and not self.done.done():
                self.done.set_result(None)
            return
        await default_handler(envelope, self.starter)

    def node_handler(self, node: PlannedNode) -> Any:
        client = self.nodes[node.name]
        visits = 0

        async def handle(envelope: Envelope) -> None:
            nonlocal visits
            if envelope.event_type not in (EV_TEXT, EV_PACKET):
                await default_handler(envelope, client)  # invites: AG2 acknowledges them
                return
            if envelope.sender_id == client.agent_id:
                return
            if not self.hub.can_send(envelope.channel_id, client.agent_id):
                return  # not this node's turn
            visits += 1
            try:
                text = await visit_node(self.ctx, self.dispatch, node, visits)
                await client.send_envelope(Envelope(
                    channel_id=envelope.channel_id, sender_id=client.agent_id, audience=None,
                    event_type=EV_TEXT, event_data={"text": text},
                    causation_id=envelope.envelope_id,
                ))  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - the run fails with the visit's error
                self.fail(exc)

        return handle


@asynccontextmanager
async def build_network(ctx: RunContext, dispatch: Dispatch) -> AsyncIterator[Network]:
    """The run's hub with the starter and one participant per node (named after it; its id
    is its name, so the graph's rules name the nodes), closed on exit."""
    hub = await Hub.open(
        MemoryKnowledgeStore(),
        ttl_sweep_interval=0,  # no channel expiry: the run's limit is mastif's
        expectation_sweep_interval=0,  # no turn_within close of a slow turn
    )
    try:
        starter = await hub.register(Agent(STARTER), attach_plugin=False)
        nodes = {}
        for node in ctx.plan.nodes:
            nodes[node.name] = await hub.register(Agent(node.name), attach_plugin=False)
        ids = {STARTER: starter.agent_id, **{n: c.agent_id for n, c in nodes.items()}}
        graph = TransitionGraph.loads(_rename(build_graph(ctx.plan).to_dict(), ids))
        network = Network(ctx, hub, graph, starter, nodes, dispatch)
        starter.on_envelope(network.on_starter)
        for node in ctx.plan.nodes:
            nodes[node.name].on_envelope(network.node_handler(node))
        yield network
    finally:
        await hub.close()


def _rename(data: Any, ids: dict[str, str]) -> Any:
    """The graph with node names replaced by the hub's agent ids (``agent_id`` / ``node`` /
    ``initial_speaker`` values)."""
    if isinstance(data, dict):
        return {
            k: ids.get(v, v) if k in ("agent_id", "node", "initial_speaker") and isinstance(v, str)
            else _rename(v, ids)
            for k, v in data.items()
        }  # fmt: skip
    if isinstance(data, list):
        return [_rename(v, ids) for v in data]
    return data

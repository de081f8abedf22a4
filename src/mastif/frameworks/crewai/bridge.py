"""What a run's CrewAI worker thread shares with the run coroutine, and the order of a reply's
tool calls.

:class:`Bridge` carries the node visit in progress and the run's model clients, and sends
tool calls back to the run's event loop. :class:`Turns` keeps the calls of one model reply
in the model's order in the trace although CrewAI runs them in its thread pool.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any

from crewai.llms.providers.openai.completion import OpenAICompletion

from mastif.frameworks.plan import PlannedNode
from mastif.frameworks.threadbridge import ThreadBridge
from mastif.tools import ToolResult


@dataclass
class Visit:
    """One execution of one workflow node, i.e. one crew."""

    node: PlannedNode
    step: int
    max_tool_rounds: int
    tool_rounds: int = 0  # replies with tool calls answered so far


@dataclass
class Bridge(ThreadBridge):
    """What a run's CrewAI thread shares with the run coroutine."""

    llms: list[OpenAICompletion] = field(default_factory=list)  # the run's model clients
    #: the node visit in progress (one at a time); the run's LLMs and tools act for it
    visit: Visit | None = None

    def close_clients(self) -> None:
        llms, self.llms = self.llms, []
        for llm in llms:
            client = llm._client  # the sync OpenAI client; the async one is never used
            if client is not None:
                try:
                    client.close()  # a request in flight fails at once
                except Exception:  # noqa: BLE001, S110 - best effort
                    pass

    def cancel(self) -> None:
        self.cancelled.set()
        self.close_clients()

    def call_tool_in_turn(
        self, turn: Turn, node: str, step: int, name: str, arguments: Any
    ) -> ToolResult:
        """``ctx.call_tool`` on the run's event loop, taking ``turn``'s place in the trace."""
        turn.wait(self)

        async def in_turn() -> ToolResult:
            # on the loop: ctx.call_tool takes its place (RunRecorder.issue) in this same
            # step, before any later call of the reply can be scheduled
            turn.done()
            return await self.ctx.call_tool(node, step, name, arguments)

        self.check()
        return asyncio.run_coroutine_threadsafe(in_turn(), self.loop).result()

    def record_refused_in_turn(
        self, turn: Turn, node: str, step: int, name: str, arguments: Any, error: str
    ) -> None:
        """Record a call CrewAI refused, in ``turn``'s place in the trace (on the loop)."""
        turn.wait(self)

        async def in_turn() -> None:
            self.ctx.record_failed_tool_call(node, step, name, arguments, error)
            turn.done()

        asyncio.run_coroutine_threadsafe(in_turn(), self.loop).result()


class Turns:
    """The tool calls of one reply, in the model's order, taking their places in the trace.

    CrewAI runs the calls of a reply in a thread pool; which thread reaches its tool first
    is up to the machine. Each call waits until the calls before it took their places (a
    call to a tool: it was issued by ``ctx.call_tool``; a refused call: it was recorded; a
    call that leaves no record of ours, e.g. over MCP: it ended), then takes its own; the
    tools themselves still run concurrently.
    """

    def __init__(self, calls: list[Any]) -> None:
        self.ids = [id(c) for c in calls]
        self._next = 0  # every call before this one took its place
        self._done: set[int] = set()
        self._cond = threading.Condition()

    def turn(self, call: Any) -> Turn | None:
        i = self.ids.index(id(call)) if id(call) in self.ids else None
        return Turn(self, i) if i is not None else None

    def wait(self, i: int, bridge: Bridge) -> None:
        with self._cond:
            while self._next < i:
                bridge.check()  # a cancelled run's calls stop waiting
                self._cond.wait(0.05)

    def done(self, i: int) -> None:
        with self._cond:
            self._done.add(i)
            while self._next in self._done:
                self._next += 1
            self._cond.notify_all()


@dataclass
class Turn:
    """One call's turn (:class:`Turns`), and whether the call reached a tool."""

    turns: Turns
    index: int
    reached: bool = False  # the tool was called (in-process or over MCP)
    placed: bool = False

    def wait(self, bridge: Bridge) -> None:
        self.turns.wait(self.index, bridge)

    def done(self) -> None:
        if not self.placed:
            self.placed = True
            self.turns.done(self.index)


#: the turn of the tool call the executor is running in this thread (CrewAI runs each call
#: in a copy of the context it was submitted with)
CURRENT_TURN: contextvars.ContextVar[Turn | None] = contextvars.ContextVar(
    "mastif_turn", default=None
)

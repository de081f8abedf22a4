"""The link between a synchronous framework's worker thread and its run's event loop.

CrewAI and smolagents run their agents in a worker thread per run; their tool calls must
still go through ``ctx.call_tool`` on the run's event loop, and a run that ended (timeout,
cancel) must stop the thread at its next tool call. Each adapter extends
:class:`ThreadBridge` with what its framework needs closed on cancel.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from mastif.frameworks.base import RunContext
from mastif.tools import ToolResult


class RunCancelled(Exception):
    """Raised in the worker thread once the run coroutine was cancelled (timeout)."""

    def __init__(self) -> None:
        super().__init__("the run was cancelled")


@dataclass
class ThreadBridge:
    """What a run's worker thread shares with the run coroutine."""

    ctx: RunContext
    loop: asyncio.AbstractEventLoop
    cancelled: threading.Event = field(default_factory=threading.Event)

    def check(self) -> None:
        if self.cancelled.is_set():
            raise RunCancelled()

    def call_tool(self, node: str, step: int, name: str, arguments: Any) -> ToolResult:
        """``ctx.call_tool`` on the run's event loop, from the worker thread."""
        self.check()
        coro = self.ctx.call_tool(node, step, name, arguments)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

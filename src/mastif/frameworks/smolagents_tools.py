"""The tools of a run's smolagents agents, and the order of one reply's tool calls.

In-process, :class:`GatewayTool` s built from the protocol's tool specs, each call begun on
the run's event loop (``ctx.call_tool``); under ``mcp``, smolagents' own MCP tools
(mcpadapt), the MCP server recording each call. smolagents runs the calls of one reply in a
thread pool; each takes its place in the run's record in the model's order (:class:`Reply`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from smolagents import Tool
from smolagents.memory import ToolCall

from mastif.tools import ToolResult

#: JSON-schema types smolagents' Tool accepts (tools.AUTHORIZED_TYPES)
_TYPES = {"string", "boolean", "integer", "number", "image", "audio", "array", "object", "any",
          "null"}  # fmt: skip


class GatewayTool(Tool):
    """A protocol tool as a smolagents tool; every execution goes through ``ctx.call_tool``
    (``start_tool(name, arguments)``: begins it on the run's event loop, from any thread)."""

    skip_forward_signature_validation = True

    def __init__(self, spec: Any, start_tool: Callable[[str, Any], Future[ToolResult]]) -> None:
        self.name, self.description, self.output_type = spec.name, spec.description, "string"
        required = set(spec.parameters.get("required", []))
        self.inputs = {}
        for key, prop in spec.parameters.get("properties", {}).items():
            kind = prop.get("type", "any")
            entry: dict[str, Any] = {
                "type": kind if isinstance(kind, str) and kind in _TYPES else "any",
                "description": prop.get("description", key),
            }
            if "enum" in prop:
                entry["enum"] = prop["enum"]
            if key not in required:
                entry["nullable"] = True
            self.inputs[key] = entry
        self.start_tool = start_tool
        super().__init__()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        # smolagents passes arguments that are not a JSON object (text it could not parse)
        # positionally: they bind to the inputs in order, as to a ``forward(self, code)``
        arguments = {**dict(zip(self.inputs, args, strict=False)), **kwargs}
        result = placed(lambda: self.start_tool(self.name, arguments))
        if result.ok:
            return result.output
        # smolagents answers a failed tool with "Error executing tool ...: <this>"
        raise RuntimeError(result.error or "the tool failed")


def mcp_tool(tool: Tool) -> Tool:
    """An MCP tool of smolagents' MCP client (mcpadapt), taking its place in the run's
    record order as it sends its call (the MCP server records it)."""
    forward = tool.forward

    def placed_forward(*args: Any, **kwargs: Any) -> Any:
        # mcpadapt sends keyword arguments or one dict; anything else it refuses itself
        sends = not args or (len(args) == 1 and isinstance(args[0], dict) and not kwargs)
        if sends:
            placed(lambda: None)
        return forward(*args, **kwargs)

    tool.forward = placed_forward  # type: ignore[method-assign]
    return tool


# -- the calls of one reply ------------------------------------------------------------------

current_call = threading.local()  # the call a thread of smolagents' tool-call pool is making


@dataclass
class Reply:
    """The tool calls of one model reply, in the model's order. smolagents runs them in a
    thread pool (several at a time); each takes its place in the run's record (the call
    reaches ``ctx.call_tool`` on the run's loop, or a refusal is recorded) only after the
    calls before it took theirs, so the record keeps the model's order while the calls run
    concurrently."""

    calls: list[ToolCall]
    claimed: list[bool] = field(init=False)
    placed: list[bool] = field(init=False)
    lock: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.reset(self.calls)

    def reset(self, calls: list[ToolCall]) -> None:
        """The reply's calls (before any of them runs)."""
        self.calls = calls
        self.claimed = [False] * len(calls)
        self.placed = [False] * len(calls)

    def claim(self, name: str, arguments: Any) -> int | None:
        """Which of the reply's calls ``execute_tool_call(name, arguments)`` is (the first one
        not yet claimed with that name and those arguments; equal ones are alike)."""
        with self.lock:
            for i, call in enumerate(self.calls):
                if (
                    not self.claimed[i]
                    and call.name == name
                    and (call.arguments or {}) == arguments
                ):
                    self.claimed[i] = True
                    return i
        return None

    def take_place(self, index: int, action: Callable[[], Any]) -> Any:
        """Run ``action`` (which places the call) once every earlier call is placed."""
        with self.lock:
            self.lock.wait_for(lambda: all(self.placed[:index]))
            try:
                return action()
            finally:
                self.placed[index] = True
                self.lock.notify_all()

    def release(self, index: int) -> None:
        """The call is done: the calls after it need not wait for it any longer."""
        with self.lock:
            self.placed[index] = True
            self.lock.notify_all()


@dataclass
class Ticket:
    """The call this thread makes: its reply and its index there."""

    reply: Reply
    index: int
    placed: bool = False  # it reached a tool (or the MCP server): the call is recorded there


def placed(start: Callable[[], Any]) -> Any:
    """Start a tool call at its place in the reply's order (``start`` begins it on the run's
    loop and returns a future, or begins nothing); wait for its result."""
    ticket: Ticket | None = getattr(current_call, "ticket", None)
    if ticket is None:
        began = start()
    else:
        began = ticket.reply.take_place(ticket.index, start)
        ticket.placed = True
    return began.result() if began is not None else None

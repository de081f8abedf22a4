"""The standard protocol: plain in-process calls, no protocol directives on the wire."""

from __future__ import annotations

import asyncio
from typing import Any

from mastif.tools import Tool, ToolResult


class InProcessTransport:
    def __init__(self, tools: list[Tool]) -> None:
        self._tools = {t.name: t for t in tools}

    def tool_specs(self) -> list[Tool]:
        return list(self._tools.values())

    async def call(
        self, name: str, arguments: dict[str, Any], run_id: str | None = None
    ) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(False, "", f"unknown tool {name!r}; offered: {sorted(self._tools)}")
        # tools may block (python_repl waits on a child process): keep the event loop free
        return await asyncio.to_thread(tool.invoke, arguments, run_id)

"""What a framework needs from a protocol: the tools offered and a way to call one."""

from __future__ import annotations

from typing import Any, Protocol

from mastif.tools import ToolResult


class ToolSpec(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]


class ToolTransport(Protocol):
    def tool_specs(self) -> list[ToolSpec]:
        """Tools offered to the model: name, guidance description, JSON-schema parameters."""
        ...

    async def call(
        self, name: str, arguments: dict[str, Any], run_id: str | None = None
    ) -> ToolResult:
        """Call a tool by name with the model's typed arguments for run ``run_id``; never raises.

        A name that is not offered is a failed call (a hallucinated tool, paper Eq. 5).
        """
        ...

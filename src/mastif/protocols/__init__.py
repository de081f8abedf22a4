"""Protocols decide how things travel (tool calls, node-to-node messages).

Each protocol is a context manager yielding a :class:`ToolTransport`; frameworks only see
the transport, so any framework runs under any protocol.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mastif.protocols.base import ToolTransport
from mastif.tools import Tool

PROTOCOLS = ("standard",)


@contextmanager
def open_protocol(name: str, tools: list[Tool]) -> Iterator[ToolTransport]:
    if name == "standard":
        from mastif.protocols.standard import InProcessTransport

        yield InProcessTransport(tools)
        return
    raise ValueError(f"unknown protocol {name!r}; available: {PROTOCOLS}")


__all__ = ["PROTOCOLS", "ToolTransport", "open_protocol"]

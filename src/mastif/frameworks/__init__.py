"""Frameworks decide who orchestrates; one adapter module per framework."""

from __future__ import annotations

from mastif.frameworks.base import FrameworkAdapter, RunContext, RunRecorder

FRAMEWORKS = ("langgraph",)


def get_framework(name: str) -> FrameworkAdapter:
    if name == "langgraph":
        from mastif.frameworks.langgraph import LangGraphAdapter

        return LangGraphAdapter()
    raise ValueError(f"unknown framework {name!r}; available: {FRAMEWORKS}")


__all__ = ["FRAMEWORKS", "FrameworkAdapter", "RunContext", "RunRecorder", "get_framework"]

"""Frameworks decide who orchestrates; one adapter module per framework.

Every adapter has the same signature (``async run(ctx: RunContext) -> str``), calls the model
only through the gateway URL in its context and tools only through ``ctx.call_tool``.
"""

from __future__ import annotations

from importlib import import_module

from mastif.frameworks.base import FrameworkAdapter, RunContext, RunRecorder

#: framework name -> "module:class"; modules are imported only when their framework runs
_ADAPTERS = {
    "langgraph": "mastif.frameworks.langgraph:LangGraphAdapter",
    "langchain": "mastif.frameworks.langchain:LangChainAdapter",
    "crewai": "mastif.frameworks.crewai:CrewAIAdapter",
    "semantic_kernel": "mastif.frameworks.semantic_kernel:SemanticKernelAdapter",
}
FRAMEWORKS = tuple(_ADAPTERS)


def get_framework(name: str) -> FrameworkAdapter:
    try:
        module, cls = _ADAPTERS[name].split(":")
    except KeyError:
        raise ValueError(f"unknown framework {name!r}; available: {FRAMEWORKS}") from None
    return getattr(import_module(module), cls)()


__all__ = ["FRAMEWORKS", "FrameworkAdapter", "RunContext", "RunRecorder", "get_framework"]

"""Frameworks decide who orchestrates; one adapter module per framework, found as plugins.

Every adapter has the same signature (``async run(ctx: RunContext) -> str``), calls the model
only through the gateway URL in its context and tools only through ``ctx.call_tool``.

Adapters are registered under the entry-point group :data:`ENTRY_POINT_GROUP`
(``mastif.frameworks``): ``name = "package.module:AdapterClass"``. mastif's own nineteen are
registered the same way in its ``pyproject.toml``, so a user package adds a framework by
declaring one entry point, without editing mastif (``docs/frameworks.md``, "Write your
own"). Names are read from the installed distributions' metadata; a module is imported
only when its framework runs.

Owns the adapter's signature and the run's context (``base.py``), the workflow plan every
framework runs and its prompts (``plan.py``), delegation to agents (``orchestration.py``),
and one adapter per framework: ``langgraph.py``, ``langchain.py``, ``crewai/``,
``semantic_kernel.py``, ``llamaindex.py``, ``smolagents.py`` (its tools in
``smolagents_tools.py``), ``agent_framework.py``, ``pydantic_ai.py``, ``openai_agents.py``,
``haystack.py``, ``autogen.py``, ``ag2.py`` (its AG2 network in ``ag2_network.py``),
``google_adk.py``, ``agno.py``, ``strands.py``, ``camel.py``, ``beeai.py``, ``langroid.py``
(its Task delegation in ``langroid_workflow.py``) and ``upsonic.py``; what adapters share:
a worker thread's link to its run's event loop (``threadbridge.py``) and the MCP SDK's streamable-HTTP client as their MCP integrations
open it (``mcp_transport.py``).

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks, mastif.providers,
mastif.protocols.
"""

from __future__ import annotations

import functools
import sys
from importlib.metadata import EntryPoint, entry_points

from mastif.frameworks.base import FrameworkAdapter, RunContext, RunRecorder

ENTRY_POINT_GROUP = "mastif.frameworks"

#: the frameworks mastif ships: every contract test runs on each of them (plugins are
#: checked by their own tests). The seed paper's four are the default grid
#: (config/config.yaml); config/experiments/frameworks_all.yaml runs all nineteen.
FRAMEWORKS = (
    "langgraph", "langchain", "crewai", "semantic_kernel", "llamaindex", "smolagents",
    "agent_framework", "pydantic_ai", "openai_agents", "haystack",
    "autogen", "ag2", "google_adk", "agno", "strands", "camel", "beeai", "langroid", "upsonic",
)  # fmt: skip
PAPER_FRAMEWORKS = FRAMEWORKS[:4]


class FrameworkNotFound(ValueError):
    """A framework name no installed distribution registers."""


def _registered() -> dict[str, EntryPoint]:
    return dict(_scan(tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def _scan(path: tuple[str, ...]) -> tuple[tuple[str, EntryPoint], ...]:
    """The group's entry points as found on ``path`` (scanning every distribution's
    metadata takes ~65 ms: once per ``sys.path``, which is what decides what is installed)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        # the first distribution on sys.path wins, as for imports
        found.setdefault(ep.name, ep)
    return tuple(found.items())


def available_frameworks() -> tuple[str, ...]:
    """Every framework name registered by an installed distribution, sorted."""
    return tuple(sorted(_registered()))


def _missing_message(name: str, registered: dict[str, EntryPoint]) -> str:
    if not registered:
        return (
            f"unknown framework {name!r}: no framework is registered under the entry-point "
            f"group {ENTRY_POINT_GROUP!r}; is mastif installed (make setup)?"
        )
    return (
        f"unknown framework {name!r}; installed: {', '.join(sorted(registered))} "
        f"(a plugin registers one under the entry-point group {ENTRY_POINT_GROUP!r})"
    )


def check_frameworks(names: list[str] | tuple[str, ...]) -> None:
    """:class:`FrameworkNotFound` naming the first of ``names`` nobody registers."""
    registered = _registered()
    for name in names:
        if name not in registered:
            raise FrameworkNotFound(_missing_message(name, registered))


def get_framework(name: str) -> FrameworkAdapter:
    """A new adapter of the framework registered as ``name`` (its module imported now)."""
    registered = _registered()
    if name not in registered:
        raise FrameworkNotFound(_missing_message(name, registered))
    ep = registered[name]
    try:
        cls = ep.load()
    except (ImportError, AttributeError) as exc:
        raise FrameworkNotFound(
            f"framework {name!r} is registered as {ep.value!r}, which cannot be loaded: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    adapter = cls()
    for member in ("name", "run", "run_node"):
        if not hasattr(adapter, member):
            raise FrameworkNotFound(
                f"framework {name!r} ({ep.value}) is not a framework adapter: it has no "
                f"{member!r} (see mastif.frameworks.base.FrameworkAdapter)"
            )
    return adapter


__all__ = [
    "ENTRY_POINT_GROUP",
    "FRAMEWORKS",
    "PAPER_FRAMEWORKS",
    "FrameworkAdapter",
    "FrameworkNotFound",
    "RunContext",
    "RunRecorder",
    "available_frameworks",
    "check_frameworks",
    "get_framework",
]

"""Tools offered to agents, looked up by name.

The built-in tools need nothing from outside and are in :data:`REGISTRY`. The web and
knowledge tools are bound to a stack job's web environment (the sandbox or the live web,
its browser and URL policy) and are built by :meth:`mastif.execution.webenv.WebEnvironment.tools`,
which the runner uses for every stack; either way the same name always means the same
implementation, description and schema whatever the framework or protocol.

Owns the tool interface (``base.py``); the built-in tools (``builtin.py``; ``sympy`` in
``algebra.py``); the web tools (``web.py``), the scraper (``scrape.py``) and live search
(``search_live.py``), the browser, one headless Chromium per job (``browser.py``) and its page
listings (``snapshot.py``); the research tools (``knowledge.py``), one module per family
(``wikipedia.py``, ``papers.py``, ``youtube.py``, ``pdf.py``) and their APIs' text
(``apitext.py``); the URL policy (``netpolicy.py``), applied by the one HTTP fetcher
(``http.py``) and, for the browser, by a loopback proxy (``egress_proxy.py``); untrusted work
in a limited child process (``isolation.py``).

May import: mastif.core.
"""

from __future__ import annotations

from mastif.tools.base import Tool, ToolError, ToolResult
from mastif.tools.builtin import BUILTIN_TOOLS

#: Tool name -> tool, for every built-in tool.
REGISTRY: dict[str, Tool] = {tool.name: tool for tool in BUILTIN_TOOLS}


def get_tools(names: list[str]) -> list[Tool]:
    """The tools called ``names``, in that order.

    Raises ``KeyError`` naming the unknown tool and listing the available ones, so a typo in
    a config fails loudly before any run starts rather than silently dropping a tool.
    """
    tools: list[Tool] = []
    for name in names:
        if name not in REGISTRY:
            available = ", ".join(sorted(REGISTRY))
            raise KeyError(f"unknown tool {name!r}; available tools: {available}")
        tools.append(REGISTRY[name])
    return tools


__all__ = ["REGISTRY", "Tool", "ToolError", "ToolResult", "get_tools"]

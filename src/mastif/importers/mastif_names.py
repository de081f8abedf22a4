"""MASTIF's names and error texts as mastif's ids and error classes.

Protocol and framework names become mastif's ids (``MCP`` -> ``mcp``, ``SemanticKernel``
-> ``semantic_kernel``; names mastif has no adapter for get a lowercase snake id), model
names a path- and wildcard-safe id, and a logged error text a (status, error_class) pair.
Pure functions of the text: what a log means is decided in :mod:`mastif.importers.mastif_log`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")

#: spellings seen in MASTIF logs -> mastif's protocol ids (key: lowercase, letters/digits only)
PROTOCOL_IDS = {
    "standard": "standard",
    "mcp": "mcp",
    "modelcontextprotocol": "mcp",
    "a2a": "a2a",
    "agenttoagent": "a2a",
    "acp": "acp",
    "agentcommunicationprotocol": "acp",
}
#: spellings seen in MASTIF logs -> mastif's framework ids (key as above)
FRAMEWORK_IDS = {
    "crewai": "crewai",
    "langchain": "langchain",
    "langgraph": "langgraph",
    "semantickernel": "semantic_kernel",
}

#: error text -> (status, error_class), first match wins; anything else is framework_error
ERROR_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"timed? ?out|timeout|deadline exceeded", re.I), "timeout", "timeout"),
    (
        re.compile(
            r"\b(429|5\d\d)\b[^\n]*(error|too many|unavailable)|rate.?limit|too many requests"
            r"|service unavailable|internal server error|bad gateway",
            re.I,
        ),
        "error",
        "provider_error",
    ),
    (
        re.compile(
            r"\b4\d\d\b client error|payment required|unauthori[sz]ed|forbidden|bad request"
            r"|not found for url|invalid api key",
            re.I,
        ),
        "error",
        "provider_bad_request",
    ),
    (
        re.compile(
            r"connection ?(error|refused|reset|aborted)|failed to establish|max retries exceeded"
            r"|name or service not known|unreachable",
            re.I,
        ),
        "error",
        "provider_unreachable",
    ),
    # the inference client's own failure report, with no status: an upstream failure
    (re.compile(r"^inference error: \(request id", re.I), "error", "provider_error"),
)


# --------------------------------------------------------------------------- ids


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def protocol_id(name: str) -> str:
    """mastif's id of a MASTIF protocol name (``MCP`` -> ``mcp``; unknown: lowercase snake)."""
    return PROTOCOL_IDS.get(_key(name)) or _snake(name)


def framework_id(name: str) -> str:
    """mastif's id of a MASTIF framework name (``SemanticKernel`` -> ``semantic_kernel``;
    others, e.g. ``Smolagents``, ``LlamaIndex``: lowercase, non-alphanumerics as ``_``)."""
    return FRAMEWORK_IDS.get(_key(name)) or _snake(name)


def model_slug(name: str) -> str:
    """A path- and wildcard-safe model id: lowercase, runs of other characters as ``-``
    (``mistralai/Mistral-7B-Instruct-v0.1`` -> ``mistralai-mistral-7b-instruct-v0-1``)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def model_ids(names: list[str]) -> dict[str, str]:
    """Original model name -> id. Names whose slugs collide (``a/b.c`` and ``a/b-c``) each get
    ``-`` plus the first 8 hex digits of the name's SHA-256, so ids stay distinct and
    deterministic."""
    slugs = {n: model_slug(n) for n in dict.fromkeys(names)}
    counts = Counter(slugs.values())
    return {
        n: s if counts[s] == 1 else f"{s}-{hashlib.sha256(n.encode()).hexdigest()[:8]}"
        for n, s in slugs.items()
    }


def classify_error(message: str) -> tuple[str, str]:
    """(status, error_class) for the error text MASTIF logged, by :data:`ERROR_RULES`."""
    for pattern, status, error_class in ERROR_RULES:
        if pattern.search(message):
            return status, error_class
    return "error", "framework_error"

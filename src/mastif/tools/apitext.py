"""Plain text from the answers of public APIs, for the research tools.

Shared by :mod:`mastif.tools.wikipedia`, :mod:`mastif.tools.papers` and
:mod:`mastif.tools.youtube`: whitespace collapsed, long texts clipped, a JSON or (untrusted,
parsed without entity expansion) XML body read, an empty argument refused — each failure a
:class:`~mastif.tools.base.ToolError` that names the service.
"""

from __future__ import annotations

import json
from typing import Any
from xml.etree.ElementTree import Element, ParseError

import httpx
from defusedxml import DefusedXmlException
from defusedxml import ElementTree as SafeET

from mastif.tools.base import ToolError


def clean(text: str | None) -> str:
    """Collapse whitespace: arXiv hard-wraps, XML indents, models do not need either."""
    return " ".join((text or "").split())


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ``...`` marking the cut."""
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def json_body(response: httpx.Response, service: str) -> Any:
    """The JSON ``service`` answered with; :class:`ToolError` when it sent something else."""
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ToolError(
            f"{service} returned something other than JSON "
            f"(content-type {response.headers.get('content-type', 'unknown')})"
        ) from None


def xml_root(content: bytes, service: str) -> Element:
    """Parse untrusted XML without entity expansion (defusedxml), with a clear error."""
    try:
        root: Element = SafeET.fromstring(content)
    except (ParseError, DefusedXmlException) as exc:
        preview = clean(content[:120].decode("utf-8", "replace"))
        raise ToolError(f"{service} returned unparsable XML ({exc}): {preview!r}") from None
    return root


def require_text(value: str, name: str) -> str:
    """``value`` stripped; :class:`ToolError` naming the argument ``name`` when empty."""
    value = value.strip()
    if not value:
        raise ToolError(f"{name} must not be empty")
    return value

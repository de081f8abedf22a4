"""Answers wrapped in a protocol envelope, unwrapped to their text.

The original MASTIF asked agents to answer in the protocol's message format (MCP, A2A, ACP
messages, JSON-RPC responses) and logged some replies as the adapter's reply dict;
:func:`unwrap_envelope` finds the answer inside such a reply (``docs/import.md``,
"Envelopes"). Pure functions of the text.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from mastif.importers.mastif_names import protocol_id

#: a Markdown code fence opening the reply, up to its first closing fence
_LEADING_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n[ \t]*```", re.S)
_DECODER = json.JSONDecoder(strict=False)  # control characters in strings are allowed

#: keys of a protocol message that hold its content, in the order they are tried
_CONTENT_KEYS = ("content", "message", "response", "text", "result", "payload")


def _leading_object(text: str) -> tuple[Any, str] | None:
    """The object ``text`` starts with and the text after it: JSON (also with ``\\'`` mended,
    which JSON does not allow) or, for the whole text, a Python literal (MASTIF logged some
    replies as ``str(dict)``). None when ``text`` starts with neither."""
    for candidate in (text, text.replace("\\'", "'")):
        try:
            obj, end = _DECODER.raw_decode(candidate)
        except ValueError:
            continue
        return obj, candidate[end:]
    try:
        return ast.literal_eval(text), ""
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _parts_text(parts: Any) -> str | None:
    """Text of MCP content items (``{type: text, text}``) or A2A parts (``{kind: text, text}``)."""
    if not isinstance(parts, list):
        return None
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, dict)
        and isinstance(p.get("text"), str)
        and (p.get("type") or p.get("kind") or "text") == "text"
    ]
    return "\n".join(texts) if texts else None


def _text_of(value: Any) -> str | None:
    """The text a message field carries: a string, text parts, or a nested message object
    (``{"content": ...}``, ``{"parts": [...]}``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _parts_text(value)
    if isinstance(value, dict):
        for key in ("content", "message", "result", "text"):
            if isinstance(value.get(key), str | list):
                text = _text_of(value[key])
                if text is not None:
                    return text
        return _parts_text(value.get("parts"))
    return None


def _jsonrpc_text(result: Any) -> str | None:
    """Text of a JSON-RPC result: an MCP tool result, an A2A message or task."""
    if isinstance(result, str):
        return result
    if not isinstance(result, dict):
        return None
    for text in (
        _parts_text(result.get("content")),  # MCP CallToolResult
        _parts_text(result.get("parts")),  # A2A Message
    ):
        if text is not None:
            return text
    artifacts = result.get("artifacts")  # A2A Task
    if isinstance(artifacts, list):
        texts = [t for a in artifacts if isinstance(a, dict) if (t := _parts_text(a.get("parts")))]
        if texts:
            return "\n".join(texts)
    status = result.get("status")
    if isinstance(status, dict) and isinstance(status.get("message"), dict):
        return _parts_text(status["message"].get("parts"))
    return None


def _protocol_kind(protocol: str) -> str:
    return protocol_id(protocol.split("/")[0]) or "protocol"


def _envelope_text(obj: Any) -> tuple[str, str] | None:
    """(text, envelope kind) when ``obj`` is a protocol envelope MASTIF wraps answers in."""
    if not isinstance(obj, dict):
        return None
    if "jsonrpc" in obj:
        text = _jsonrpc_text(obj.get("result"))
        return (text, "jsonrpc") if text is not None else None
    protocol = obj.get("protocol", obj.get("protocol_version"))
    if isinstance(protocol, str):  # {"protocol": "MCP/1.0", "content": ...} and kin
        kind = _protocol_kind(protocol)
        for key in _CONTENT_KEYS:
            text = _text_of(obj.get(key))
            if text is not None:
                return text, kind
        for key in _CONTENT_KEYS:  # structured content: the answer is that JSON
            if isinstance(obj.get(key), dict | list):
                return json.dumps(obj[key], indent=2, ensure_ascii=False), kind
        return None
    keys = set(obj)
    if keys == {"payload"}:  # A2A payload without its header
        text = _text_of(obj["payload"])
        return (text, "a2a") if text is not None else None
    if keys == {"content"}:  # the adapter's reply dict, logged as its repr
        content = obj["content"]
        text = "" if content is None else _text_of(content)
        return (text, "content") if text is not None else None
    if obj.get("kind") == "message" or ({"parts", "role"} <= keys):  # an A2A message
        text = _parts_text(obj.get("parts"))
        return (text, "a2a") if text is not None else None
    return None


def unwrap_envelope(text: str, max_depth: int = 3) -> tuple[str, str | None]:
    """The answer inside a protocol envelope, and the envelope's kind (None: not wrapped).

    The reply must *start* with the envelope, bare or in a Markdown code fence: an object of
    a recognised shape, ``{"protocol" | "protocol_version": ..., "content" | "message" |
    "response" | "text" | "result" | "payload": ...}`` (the MCP/A2A/ACP message formats
    MASTIF asked for), ``{"payload": {"content": ...}}``, ``{"content": ...}``, a JSON-RPC
    response (``result`` with MCP content items, A2A parts or artifacts) or an A2A message
    (``parts``). The envelope is replaced by its text; what the reply says after it stays,
    after a blank line. Content that is itself structured (an object) becomes that JSON. Any
    other JSON (an agent answering in JSON) is an answer and stays as it is. Nested
    envelopes are unwrapped up to ``max_depth``; the kind is the outermost one's.
    """
    kind: str | None = None
    current = text
    for _ in range(max_depth):
        body = current.strip()
        fenced = _LEADING_FENCE.match(body)
        inner, after = (fenced.group(1).strip(), body[fenced.end() :]) if fenced else (body, "")
        if not inner.startswith("{"):
            break
        parsed = _leading_object(inner)
        if parsed is None or parsed[1].strip() and fenced:
            break  # a fence holding more than the object: not an envelope
        obj, rest = parsed
        found = _envelope_text(obj)
        if found is None:
            break
        tail = (rest if not fenced else after).strip()
        current = found[0] + (f"\n\n{tail}" if tail else "")
        kind = kind or found[1]
    return current, kind

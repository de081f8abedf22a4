"""The tool interface every framework and protocol sees.

A tool is a name, a guidance-style description ("Use this tool when ...; do NOT use it
for ..."), a JSON schema for its typed parameters, and a function. Invoking a tool never
raises: the outcome is a :class:`ToolResult` whose ``ok`` comes from what the tool itself
returned (an exception or error is a failure), so TUSR (paper Eq. 5) is honest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from mastif.core.textclip import clip_optional, clip_text


def object_schema(properties: dict[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    """One place for a tool's parameter-schema shape, so every tool rejects unknown
    arguments."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def text_parameter(description: str | None = None, **keywords: Any) -> dict[str, Any]:
    """A string parameter's schema: its JSON-schema ``keywords`` (``minLength``, ``enum``,
    ``default``), then its description."""
    schema: dict[str, Any] = {"type": "string", **keywords}
    if description is not None:
        schema["description"] = description
    return schema


def count_parameter(description: str, maximum: int | None = None) -> dict[str, Any]:
    """An integer parameter's schema: at least 1 and, when given, at most ``maximum``."""
    schema: dict[str, Any] = {"type": "integer", "minimum": 1}
    if maximum is not None:
        schema["maximum"] = maximum
    schema["description"] = description
    return schema


@dataclass(frozen=True)
class ToolResult:
    """A tool call's outcome as the agent gets it.

    Its ``output`` and ``error`` are cut to :data:`~mastif.core.textclip.MAX_TEXT_CHARS` by
    :func:`~mastif.core.textclip.clip_text` when it is made: every outcome any tool, protocol
    or framework adapter hands an agent is one of these, so none carries more (issue 49: a
    page-controlled URL in an error text was 2,000,134 characters)."""

    ok: bool
    output: str
    error: str | None = None
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "output", clip_text(self.output))
        object.__setattr__(self, "error", clip_optional(self.error))


class ToolError(Exception):
    """Raised inside a tool function to report a failure with a clear message."""


#: the run a tool call belongs to, set by :meth:`Tool.invoke` for the call's duration, so
#: tools with per-run state (the browser page, the sandbox session) find theirs whichever
#: framework, protocol or thread the call came through
_CURRENT_RUN: ContextVar[str | None] = ContextVar("mastif_current_run", default=None)


def current_run_id() -> str:
    """The run of the tool call in progress; :class:`ToolError` outside a run's call."""
    run_id = _CURRENT_RUN.get()
    if run_id is None:
        raise ToolError("this tool keeps per-run state and was called outside a run")
    return run_id


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., str] = field(repr=False)

    def invoke(self, arguments: dict[str, Any], run_id: str | None = None) -> ToolResult:
        """Validate ``arguments`` against the schema, call the tool, time it, never raise.

        ``run_id``: the run the call belongs to (see :func:`current_run_id`).
        """
        start = time.perf_counter()
        token = _CURRENT_RUN.set(run_id)
        try:
            if not isinstance(arguments, dict):
                raise ToolError(f"arguments must be a JSON object, got {type(arguments).__name__}")
            arguments = self._drop_null_optionals(arguments)
            jsonschema.validate(arguments, self.parameters)
            output = self.func(**arguments)
            return ToolResult(True, str(output), None, time.perf_counter() - start)
        except jsonschema.ValidationError as exc:
            msg = f"invalid arguments for {self.name}: {exc.message}"
            return ToolResult(False, "", msg, time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - a tool failure is data, not a crash
            msg = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
            return ToolResult(False, "", msg, time.perf_counter() - start)
        finally:
            _CURRENT_RUN.reset(token)

    def _drop_null_optionals(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``null`` for an optional parameter means "not given".

        Frameworks that send strict schemas (CrewAI makes every property required and
        nullable) lead models to write ``null`` for what they leave out; the caller's record
        keeps the arguments exactly as sent.
        """
        required = set(self.parameters.get("required", []))
        return {k: v for k, v in arguments.items() if v is not None or k in required}

    def openai_schema(self) -> dict[str, Any]:
        """The tool in OpenAI chat-completions ``tools`` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

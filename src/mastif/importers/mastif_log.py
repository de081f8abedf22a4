"""Logs of the original MASTIF as mastif runs (RUN_SCHEMA rows) and tasks (TASK_SCHEMA).

The original MASTIF writes one JSON object per experiment: a partial log while it runs
(``yaml_file``, ``started_at``, ``updated_at``, ``metadata``, ``completed``, ``results``) and
a final export (``test_run_timestamp``, ``total_tests``, ``metadata``, ``results``). Both
carry ``results``, one object per run: ``model_name``, ``protocol``, ``framework``,
``task_index`` (newer logs), ``task``, ``response``, ``reasoning_steps``, ``latency``,
``success``, ``error``, ``metadata`` (its protocol overhead figures and a ``tool_log``).

:func:`read_mastif_log` reads and checks the whole log before anything is written, and maps
what the log recorded, nothing more (``docs/import.md`` has the column-by-column mapping):

* a run that appears more than once (a resumed log re-runs failed runs and appends them)
  is kept in its last occurrence;
* protocol and framework names become mastif's ids (``MCP`` -> ``mcp``, ``SemanticKernel``
  -> ``semantic_kernel``); names mastif has no adapter for (``Smolagents``, ``ACP``) get a
  lowercase snake id and are kept, since every stage after execution treats them alike;
* model names (``mistralai/Mistral-7B-Instruct-v0.1``) get a path- and wildcard-safe id,
  the original name is kept in ``served_model``;
* an answer wrapped in a protocol envelope is unwrapped to its text
  (:func:`unwrap_envelope`), the verbatim answer kept in ``raw_final_answer``;
* MASTIF's token counts are re-tokenised estimates: they go to ``est_*`` columns with
  ``tokens_estimated`` set, and the API-usage columns stay null, so V (Eq. 3) and cost are
  null for imported runs rather than an estimate passed off as usage;
* MASTIF's ``success`` means "ran without an error", not "did the task": it sets
  ``status``, and the task check ``success`` stays null;
* whatever the log does not record (generation settings, LLM calls, protocol traffic as
  mastif measures it) is null, never 0.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
import typing
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from mastif.core.atomic import write_atomically
from mastif.core.config import Stack
from mastif.core.trace import NodeOutput, RunTrace, ToolCall, runs_to_table
from mastif.tasks import Task, tasks_to_frame

#: ``origin`` of every imported run
ORIGIN = "mastif_log"


#: RunTrace fields a MASTIF log does not record: null, never our runs' default 0
NOT_RECORDED: dict[str, None] = dict.fromkeys(
    [
        "prompt_tokens", "completion_tokens", "n_llm_calls",  # no API usage, no LLM calls
        "temperature", "max_tokens", "max_steps", "max_tool_rounds",  # in its YAML only
        "generation_seed", "sampling_seed", "prompt_hashes", "workflow_shape",
        "protocol_requests", "protocol_messages", "protocol_calls",  # not measured as ours
        "protocol_bytes_sent", "protocol_bytes_received", "protocol_seconds",
        "protocol_exchange_seconds", "protocol_peer_seconds",
    ]
)  # fmt: skip

#: website of a task whose text names none (MASTIF's "standard" test mode)
UNKNOWN_WEBSITE = "unknown"

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


class MastifLogError(ValueError):
    """The file is not a usable MASTIF log; the message names the run index and field."""


#: largest count (tokens, tool calls, indices, step numbers) a log may give: the Parquet
#: columns are int64, and a larger number is a broken or hostile log, not a measurement
MAX_COUNT = 2**53
#: longest run a log may record, in seconds (30 days); NaN/Infinity are never a latency
MAX_LATENCY_S = 30 * 24 * 3600.0
#: step timestamps (Unix seconds) must fall in 1970..2100
MAX_TIMESTAMP = 4102444800.0


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


# --------------------------------------------------------------------------- envelopes

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


# --------------------------------------------------------------------------- errors


def classify_error(message: str) -> tuple[str, str]:
    """(status, error_class) for the error text MASTIF logged, by :data:`ERROR_RULES`."""
    for pattern, status, error_class in ERROR_RULES:
        if pattern.search(message):
            return status, error_class
    return "error", "framework_error"


# --------------------------------------------------------------------------- reading


@dataclass
class ImportedLog:
    """A MASTIF log read and checked: its runs (one per stack x task) and tasks."""

    path: Path
    sha256: str
    experiment: str
    runs: list[RunTrace]
    tasks: list[Task]
    n_results: int  # entries in the log's results
    n_duplicates: int  # entries dropped because a later one recorded the same run
    envelopes: dict[str, int] = field(default_factory=dict)  # envelope kind -> answers
    model_names: dict[str, str] = field(default_factory=dict)  # model id -> original name
    unknown_levels: int = 0  # tasks without steps or level: their level is None

    @property
    def n_unwrapped(self) -> int:
        return sum(self.envelopes.values())

    def stacks(self) -> list[Stack]:
        """The stacks the log has runs of, sorted."""
        return sorted({Stack(r.model, r.protocol, r.framework) for r in self.runs})

    def runs_of(self, stack: Stack) -> list[RunTrace]:
        return [r for r in self.runs if (r.model, r.protocol, r.framework) == astuple(stack)]

    def runs_table(self, stack: Stack | None = None) -> pa.Table:
        """The runs (of one stack, or all) in :data:`mastif.core.trace.RUN_SCHEMA`."""
        return runs_to_table(self.runs if stack is None else self.runs_of(stack))

    def tasks_frame(self) -> pl.DataFrame:
        """The tasks in :data:`mastif.tasks.TASK_SCHEMA` (``results/tasks.parquet``)."""
        return tasks_to_frame(self.tasks)

    def summary(self) -> str:
        """What was read, for the CLI and the job log."""
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.envelopes.items())) or "none"
        lines = [
            f"{self.path}: experiment {self.experiment!r}",
            f"  {self.n_results} result(s) read, {self.n_duplicates} duplicate(s) dropped "
            f"(last occurrence kept), {len(self.runs)} run(s) imported",
            f"  {self.n_unwrapped} answer(s) unwrapped from protocol envelopes ({kinds})",
            f"  {len(self.tasks)} task(s)"
            + (f", {self.unknown_levels} of unknown level" if self.unknown_levels else ""),
            "  token counts: estimates only (est_* columns), no API usage",
            f"  {len(self.stacks())} stack(s):",
        ]
        for s in self.stacks():
            served = self.model_names.get(s.model, s.model)
            lines.append(f"    {s.path}  ({len(self.runs_of(s))} run(s); model {served})")
        return "\n".join(lines)


def astuple(stack: Stack) -> tuple[str, str, str]:
    return stack.model, stack.protocol, stack.framework


class _Where:
    """Error messages that name the file, the run index and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, index: int | None, fieldname: str, problem: str) -> MastifLogError:
        where = f"results[{index}]" if index is not None else "log"
        return MastifLogError(f"{self.path}: {where}: {fieldname}: {problem}")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _get(
    run: Mapping[str, Any],
    name: str,
    types: tuple[type, ...],
    where: _Where,
    index: int,
    *,
    required: bool = False,
) -> Any:
    """``run[name]`` checked against ``types`` (bool is never an int here)."""
    if name not in run or run[name] is None:
        if required:
            raise where.fail(index, name, "missing (required)")
        return None
    value = run[name]
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        expected = " or ".join(t.__name__ for t in types)
        raise where.fail(index, name, f"expected {expected}, got {_type_name(value)}")
    return value


def _int_in_range(value: Any, where: _Where, index: int, name: str, low: int = 0) -> int:
    """``value`` as a count: an int (not bool, not a float) in ``low``..MAX_COUNT."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.fail(index, name, f"expected a whole number, got {value!r}")
    if not low <= value <= MAX_COUNT:
        raise where.fail(index, name, f"out of range ({value}; expected {low}..{MAX_COUNT})")
    return value


def _count(
    run: Mapping[str, Any], name: str, where: _Where, index: int, low: int = 0
) -> int | None:
    """Optional count ``run[name]``: None when absent, else checked by :func:`_int_in_range`."""
    value = _get(run, name, (int,), where, index)  # the type error as for other fields
    return None if value is None else _int_in_range(value, where, index, name, low)


def _number(
    value: float, low: float, high: float, where: _Where, index: int, name: str, unit: str
) -> float:
    """``value`` as a finite float in ``low..high`` (NaN and Infinity are not numbers here)."""
    number = float(value)
    if not math.isfinite(number):
        raise where.fail(index, name, f"not a finite number ({value!r})")
    if not low <= number <= high:
        raise where.fail(
            index, name, f"out of range ({value!r}; expected {low:g}..{high:g} {unit})"
        )
    return number


def _optional_task_field(name: str) -> bool:
    """Whether :class:`Task` accepts None for ``name`` (domain/subdomain)."""
    return type(None) in typing.get_args(Task.model_fields[name].annotation)


def _line(text: str, label: str) -> str | None:
    found = re.search(rf"^\s*{label}:[ \t]*(.+?)\s*$", text, re.M | re.I)
    return found.group(1) if found else None


def _task_fields(task: Any, index: int, task_index: int | None, where: _Where) -> dict[str, Any]:
    """Task record fields (Task's own names) from the log's ``task``: MASTIF's mind2web text
    ``Website: ...\\nDomain: ...\\nGoal: ...``, any other text, or a Mind2Web record."""
    if isinstance(task, dict):
        goal = task.get("confirmed_task") or task.get("goal") or task.get("task")
        if not isinstance(goal, str) or not goal.strip():
            raise where.fail(index, "task.confirmed_task", "missing in the task record")
        steps = task.get("action_reprs", task.get("reference_steps")) or []
        if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
            raise where.fail(index, "task.action_reprs", "expected a list of strings")
        given_id = task.get("annotation_id") or task.get("task_id")
        fields = {
            "task_id": str(given_id) if given_id else None,
            "confirmed_task": goal.strip(),
            "website": task.get("website") or None,
            "domain": task.get("domain") or None,
            "subdomain": task.get("subdomain") or None,
            "reference_steps": steps,
            "level": task.get("level") if not steps else None,
        }
    else:
        text = task.strip()
        goal_at = re.search(r"^\s*Goal:[ \t]*", text, re.M | re.I)
        goal = text[goal_at.end() :].strip() if goal_at else text
        fields = {
            "task_id": None,
            "confirmed_task": goal or text,
            "website": _line(text, "Website"),
            "domain": _line(text, "Domain"),
            "subdomain": _line(text, "Subdomain"),
            "reference_steps": [],
            "level": None,
        }
    if fields["task_id"] is None:
        fields["task_id"] = (
            f"task-{task_index:03d}"
            if task_index is not None and task_index >= 0
            else "task-" + hashlib.sha256(fields["confirmed_task"].encode()).hexdigest()[:12]
        )
    fields["website"] = fields["website"] or UNKNOWN_WEBSITE
    for name in ("domain", "subdomain"):
        if fields[name] is None and not _optional_task_field(name):
            fields[name] = "unknown"
    return fields


def _tool_log(run: Mapping[str, Any]) -> dict[str, Any] | None:
    metadata = run.get("metadata")
    log = metadata.get("tool_log") if isinstance(metadata, dict) else None
    log = log if isinstance(log, dict) and log else run.get("tool_log")
    return log if isinstance(log, dict) and log else None


def _check_tool_log(log: dict[str, Any] | None, where: _Where, index: int) -> None:
    """The tool_log's counts are whole numbers in range, where it gives them."""
    if log is None:
        return
    for name in ("total_calls", "successful_calls"):
        if name in log and log[name] is not None:
            _int_in_range(log[name], where, index, f"tool_log.{name}")
    per_tool = log.get("per_tool")
    if isinstance(per_tool, dict):
        for tool, stats in per_tool.items():
            if isinstance(stats, dict):
                for name in ("calls", "failures"):
                    if name in stats and stats[name] is not None:
                        _int_in_range(stats[name], where, index,
                                      f"tool_log.per_tool.{tool}.{name}")  # fmt: skip


def _tool_counts(log: dict[str, Any] | None) -> tuple[int | None, int | None]:
    """(calls, successful calls) from a MASTIF tool_log; (None, None) when it has none."""
    if log is None:
        return None, None
    total, ok = log.get("total_calls"), log.get("successful_calls")
    if isinstance(total, int) and isinstance(ok, int):
        return total, ok
    per_tool = log.get("per_tool")
    if isinstance(per_tool, dict) and per_tool:
        calls = sum(int(s.get("calls", 0)) for s in per_tool.values() if isinstance(s, dict))
        failures = sum(int(s.get("failures", 0)) for s in per_tool.values() if isinstance(s, dict))
        return calls, calls - failures
    return None, None


def _call_outcome(name: str, log: dict[str, Any] | None) -> bool | None:
    """A tool's per-call outcome where the tool_log decides it: every call of the tool
    succeeded (True) or every one failed (False); else None (not recorded per call)."""
    per_tool = (log or {}).get("per_tool")
    stats = per_tool.get(name) if isinstance(per_tool, dict) else None
    if not isinstance(stats, dict) or not stats.get("calls"):
        return None
    failures = stats.get("failures", 0)
    if failures == 0:
        return True
    if failures == stats["calls"]:
        return False
    return None


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _steps(
    steps: list[Any], tools: set[str], log: dict[str, Any] | None, index: int, where: _Where
) -> tuple[list[NodeOutput], list[ToolCall], datetime | None]:
    """Node outputs (each step's thought, in the workflow node it belongs to) and tool calls
    (steps whose action names a tool) of one run, and the time of its first step."""
    outputs: list[NodeOutput] = []
    calls: list[ToolCall] = []
    node = "run"
    times: list[float] = []
    for k, step in enumerate(steps):
        if not isinstance(step, dict):
            raise where.fail(
                index, f"reasoning_steps[{k}]", f"expected an object, got {_type_name(step)}"
            )
        number = step.get("step_number")
        if isinstance(number, int) and not isinstance(number, bool):
            _int_in_range(number, where, index, f"reasoning_steps[{k}].step_number")
        else:
            number = k + 1
        stamp = step.get("timestamp")
        if isinstance(stamp, int | float) and not isinstance(stamp, bool):
            times.append(
                _number(stamp, 0.0, MAX_TIMESTAMP, where, index,
                        f"reasoning_steps[{k}].timestamp", "Unix seconds")
            )  # fmt: skip
        action = step.get("action")
        action = action if isinstance(action, str) and action else None
        if action is not None and action in tools:
            ok = _call_outcome(action, log)
            observation = _as_text(step.get("observation"))
            if ok is None:
                error: str | None = "outcome not recorded per call in the MASTIF log"
            else:
                error = None if ok else observation or "failed (per the MASTIF log's tool_log)"
            calls.append(
                ToolCall(
                    node=node,
                    step=number,
                    name=action,
                    arguments=_as_text(step.get("action_input")),
                    ok=ok,
                    output=observation,
                    error=error,
                    duration_s=None,
                )
            )
        elif action is not None:
            node = action  # a workflow node's execution starts
        outputs.append(NodeOutput(node, number, "reasoning_step", _as_text(step.get("thought"))))
    started = datetime.fromtimestamp(min(times), UTC) if times else None
    return outputs, calls, started


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_mastif_log(path: str | Path) -> ImportedLog:
    """Read and check a MASTIF results log (partial or final export); nothing is written.

    Raises :class:`MastifLogError` naming the file, the run index and the field when the
    file is not JSON, has no ``results`` list, or a run lacks a required field
    (``model_name``, ``protocol``, ``framework``, ``task``, ``success``, ``latency``) or has
    one of the wrong type, or when one task id stands for two different tasks.
    """
    path = Path(path)
    where = _Where(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MastifLogError(f"{path}: cannot read: {exc}") from None
    try:
        log = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MastifLogError(f"{path}: not JSON: {exc}") from None
    if not isinstance(log, dict):
        raise where.fail(None, "<top level>", f"expected an object, got {_type_name(log)}")
    results = log.get("results")
    if not isinstance(results, list):
        problem = "missing" if results is None else f"expected a list, got {_type_name(results)}"
        raise where.fail(None, "results", problem + " (not a MASTIF results log?)")
    if not results:
        raise where.fail(None, "results", "empty: no runs to import")
    metadata = log.get("metadata") if isinstance(log.get("metadata"), dict) else {}
    sha = hashlib.sha256(raw).hexdigest()
    experiment = str(
        metadata.get("experiment_name")
        or (Path(str(log["yaml_file"])).stem if log.get("yaml_file") else path.stem)
    )
    # identifies the experiment, so a partial log that grew keeps its runs' ids
    identity = [log.get("yaml_file"), log.get("started_at") or log.get("test_run_timestamp"),
                metadata.get("experiment_name")]  # fmt: skip
    log_key = json.dumps(identity) if any(identity) else sha
    declared_tools = {t for t in metadata.get("tools") or [] if isinstance(t, str)}

    # pass 1: check every run; the last occurrence of a (stack, task) wins
    parsed: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    occurrences: Counter[tuple[str, str, str, str]] = Counter()
    tasks: dict[str, tuple[dict[str, Any], int]] = {}
    for i, run in enumerate(results):
        if not isinstance(run, dict):
            raise where.fail(i, "<run>", f"expected an object, got {_type_name(run)}")
        entry: dict[str, Any] = {"index": i, "run": run}
        for name in ("model_name", "protocol", "framework"):
            value = _get(run, name, (str,), where, i, required=True)
            if not value.strip():
                raise where.fail(i, name, "empty")
            entry[name] = value.strip()
        task = _get(run, "task", (str, dict), where, i, required=True)
        if isinstance(task, str) and not task.strip():
            raise where.fail(i, "task", "empty")
        entry["success"] = _get(run, "success", (bool,), where, i, required=True)
        latency = _get(run, "latency", (int, float), where, i, required=True)
        entry["latency"] = _number(latency, 0.0, MAX_LATENCY_S, where, i, "latency", "seconds")
        task_index = _count(run, "task_index", where, i, low=-MAX_COUNT)
        entry["task_index"] = task_index
        entry["response"] = _get(run, "response", (str,), where, i) or ""
        entry["error"] = _get(run, "error", (str,), where, i)
        entry["steps"] = _get(run, "reasoning_steps", (list,), where, i) or []
        _get(run, "metadata", (dict,), where, i)
        _check_tool_log(_tool_log(run), where, i)
        for name in ("reasoning_tokens", "output_tokens"):
            entry[name] = _count(run, name, where, i)
        entry["protocol_id"] = protocol_id(entry["protocol"])
        entry["framework_id"] = framework_id(entry["framework"])
        for name in ("protocol", "framework"):
            if not ID_PATTERN.match(entry[f"{name}_id"]):
                raise where.fail(i, name, f"{entry[name]!r} gives no usable id")
        fields = _task_fields(task, i, task_index, where)
        task_id = fields["task_id"]
        seen = tasks.get(task_id)
        if seen is None:
            tasks[task_id] = (fields, i)
        elif seen[0] != fields:
            raise where.fail(
                i, "task", f"task id {task_id!r} is a different task in results[{seen[1]}]"
            )
        entry["task_id"] = task_id
        key = (entry["model_name"], entry["protocol_id"], entry["framework_id"], task_id)
        occurrences[key] += 1
        parsed.pop(key, None)  # re-insert: the order is that of the last occurrences
        parsed[key] = entry

    # tasks, validated by the Task model
    task_records: dict[str, Task] = {}
    level_source: dict[str, str] = {}
    for task_id, (fields, i) in sorted(tasks.items()):
        record = dict(fields)
        if record["reference_steps"]:
            level_source[task_id] = "steps"
        elif record["level"] is not None:
            level_source[task_id] = "log"
        else:
            # the log records no difficulty: unknown, not made up
            record["level"] = None
            level_source[task_id] = "unknown"
        try:
            task_records[task_id] = Task.model_validate(record)
        except ValidationError as exc:
            raise where.fail(i, "task", f"not a valid task: {exc}") from None

    ids = model_ids([e["model_name"] for e in parsed.values()])
    for mid in set(ids.values()):
        if not ID_PATTERN.match(mid):
            names = [n for n, m in ids.items() if m == mid]
            raise MastifLogError(f"{path}: model name(s) {names} give no usable id")

    # pass 2: the runs
    runs: list[RunTrace] = []
    envelopes: Counter[str] = Counter()
    for key, e in parsed.items():
        run, i = e["run"], e["index"]
        t = task_records[e["task_id"]]
        stack = Stack(ids[e["model_name"]], e["protocol_id"], e["framework_id"])
        failed = (not e["success"]) or bool(e["error"])
        status, error_class = classify_error(e["error"] or "") if failed else ("ok", None)
        error_message = (
            (e["error"] or "the MASTIF log marks the run failed without an error message")
            if failed
            else None
        )
        answer, kind = unwrap_envelope(e["response"])
        if kind is not None:
            envelopes[kind] += 1
        if failed and e["error"] and answer.strip() == e["error"].strip():
            answer = ""  # the log repeats the error as the response: no answer
        tool_log = _tool_log(run)
        tools = set(declared_tools)
        if tool_log is not None:
            tools |= set(tool_log.get("per_tool") or {})
            tools |= {x for x in tool_log.get("tools_used") or [] if isinstance(x, str)}
        outputs, calls, started = _steps(e["steps"], tools, tool_log, i, where)
        last_step = max((o.step for o in outputs), default=0)
        outputs.append(NodeOutput("final", last_step + 1, "final_answer", answer))
        n_calls, n_ok = _tool_counts(tool_log)
        run_metadata = dict(run.get("metadata") or {})
        run_metadata.pop("tool_log", None)
        meta = {
            "log": {
                "file": path.name,
                "sha256": sha,
                "yaml_file": log.get("yaml_file"),
                "started_at": log.get("started_at") or log.get("test_run_timestamp"),
                "updated_at": log.get("updated_at"),
            },
            "result_index": i,
            "occurrences": occurrences[key],
            "model_name": e["model_name"],
            "protocol": e["protocol"],
            "framework": e["framework"],
            "task_index": e["task_index"],
            "task": run["task"],
            "success": e["success"],
            "reasoning_steps_count": run.get("reasoning_steps_count", len(e["steps"])),
            "metadata": run_metadata,
            "tool_log": tool_log,
            "tokens": {
                k: run[k] for k in ("reasoning_tokens", "output_tokens", "total_tokens") if k in run
            },
            "envelope": kind,
            "level_source": level_source[e["task_id"]],
        }
        runs.append(
            RunTrace(
                run_id=hashlib.sha256(
                    f"{ORIGIN}|{log_key}|{stack.path}|{e['task_id']}".encode()
                ).hexdigest()[:20],
                experiment=experiment,
                model=stack.model,
                protocol=stack.protocol,
                framework=stack.framework,
                task_id=t.task_id,
                task_text=t.confirmed_task,
                website=t.website,
                domain=t.domain,  # type: ignore[arg-type]  # None: the log names no domain
                level=t.level,
                status=status,  # type: ignore[arg-type]
                error_class=error_class,
                error_message=error_message,
                final_answer=answer,
                node_outputs=outputs,
                tool_calls=calls,
                llm_calls=[],
                wall_seconds=e["latency"],
                started_at=started,
                provider="",
                served_model=e["model_name"],
                repeat=0,
                # the original's protocol condition wrapped every prompt in the protocol's
                # message format (its reasoning steps show the wrapped node inputs)
                prompt_format=stack.protocol != "standard",
                success=None,
                check_detail=None,
                web="live",
                web_state=None,
                **NOT_RECORDED,
                origin=ORIGIN,
                tokens_estimated=True,
                est_reasoning_tokens=e["reasoning_tokens"],
                est_output_tokens=e["output_tokens"],
                raw_final_answer=e["response"] if answer != e["response"] else None,
                tool_log_calls=n_calls,
                tool_log_ok=n_ok,
                import_meta=json.dumps(meta, sort_keys=True, ensure_ascii=False, default=str),
            )
        )
    runs.sort(key=lambda r: (r.model, r.protocol, r.framework, r.task_id))
    return ImportedLog(
        path=path,
        sha256=sha,
        experiment=experiment,
        runs=runs,
        tasks=[task_records[k] for k in sorted(task_records)],
        n_results=len(results),
        n_duplicates=len(results) - len(parsed),
        envelopes=dict(envelopes),
        model_names={ids[n]: n for n in ids},
        unknown_levels=sum(1 for s in level_source.values() if s == "unknown"),
    )


def stacks_in_log(path: str | Path) -> list[Stack]:
    """The stacks (model id, protocol id, framework id) a MASTIF log has runs of, sorted;
    the whole log is checked, so a bad log fails here (at DAG build) with the same error."""
    return read_mastif_log(path).stacks()


# --------------------------------------------------------------------------- writing


def write_imported(imported: ImportedLog, out_dir: str | Path) -> list[Path]:
    """Write ``out_dir/tasks.parquet`` and ``out_dir/runs/{model}/{protocol}/{framework}.parquet``
    (one per stack); each file appears whole (written aside, then renamed). Returns the paths,
    tasks first."""
    out = Path(out_dir)
    # every table is built before any file is written: a log a table cannot hold fails here
    # and leaves nothing behind (no tasks.parquet without its runs)
    try:
        tasks = imported.tasks_frame()
        tables = {
            out / "runs" / f"{stack.path}.parquet": imported.runs_table(stack)
            for stack in imported.stacks()
        }
    except (pa.ArrowException, OverflowError, ValueError, TypeError) as exc:
        raise MastifLogError(f"{imported.path}: cannot be stored as tables: {exc}") from None
    tasks_path = out / "tasks.parquet"
    write_atomically(tasks_path, lambda p: tasks.write_parquet(p))
    paths = [tasks_path]
    for target, table in tables.items():
        write_atomically(target, lambda p, t=table: pq.write_table(t, p))
        paths.append(target)
    return paths

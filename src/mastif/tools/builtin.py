"""The built-in tools every stack gets: ``python_repl``, ``sympy``, ``datetime``, ``json_parser``.

Each tool is a module-level :class:`~mastif.tools.base.Tool` made by a small factory, so a
run can build a variant (e.g. a shorter time limit) without touching the shared instance.
Descriptions are guidance-style ("Use this tool when ...; Do NOT use it for ...") because
small models pick tools from the description alone.

Code and algebra supplied by a model are untrusted: ``python_repl`` runs under
RestrictedPython, ``sympy`` (:mod:`mastif.tools.algebra`) evaluates its own parse tree
through an allowlist, and both run in a child process
(:func:`mastif.tools.isolation.run_isolated`) with an empty environment, no network, a
CPU-time limit and a memory budget enforced by the OS, killed at a wall-clock limit, so a
runaway snippet can neither hang nor exhaust a run nor read a key.
"""

from __future__ import annotations

import ast
import builtins
import datetime as dt
import json
import operator
import re
import traceback
import types
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from RestrictedPython import (
    compile_restricted_exec,
    limited_builtins,
    safe_globals,
    utility_builtins,
)
from RestrictedPython.Eval import default_guarded_getitem, default_guarded_getiter
from RestrictedPython.Guards import (
    full_write_guard,
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    raise_,
    safer_getattr,
)
from RestrictedPython.PrintCollector import PrintCollector

from mastif.core.textclip import clip_text
from mastif.tools.algebra import (
    SYMPY,
    SYMPY_CPU_S,
    SYMPY_MEMORY_MB,
    SYMPY_OPERATIONS,
    SYMPY_TIMEOUT_S,
    compute_sympy,
    make_sympy_tool,
)
from mastif.tools.base import Tool, ToolError, object_schema, text_parameter
from mastif.tools.isolation import ChildLimitExceeded, ChildLimits, run_isolated

# the names other modules (web and knowledge tools, estimate, tests) import from here
_schema = object_schema

__all__ = [
    "BUILTIN_TOOLS", "DATETIME", "JSON_PARSER", "PYTHON_REPL", "SYMPY",
    "SYMPY_CPU_S", "SYMPY_MEMORY_MB", "SYMPY_OPERATIONS", "SYMPY_TIMEOUT_S",
    "ChildLimitExceeded", "ChildLimits", "compute_sympy", "execute_restricted",
    "make_datetime_tool", "make_json_parser_tool", "make_python_repl_tool",
    "make_sympy_tool", "parse_json_path", "run_isolated",
]  # fmt: skip


# --------------------------------------------------------------------------------------
# python_repl
# --------------------------------------------------------------------------------------

#: Pure, side-effect-free standard modules a snippet may import.
SAFE_MODULES: tuple[str, ...] = (
    "collections",
    "datetime",
    "decimal",
    "fractions",
    "itertools",
    "json",
    "math",
    "random",
    "re",
    "statistics",
)

#: Plain builtins RestrictedPython leaves out but that cannot reach outside the sandbox.
_EXTRA_BUILTINS: dict[str, Any] = {
    name: getattr(builtins, name)
    for name in (
        "all", "any", "dict", "enumerate", "filter", "list", "map", "max", "min",
        "reversed", "sorted", "sum", "zip",
    )
}  # fmt: skip

_INPLACE_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    "@=": operator.imatmul,
}

_REPL_FILENAME = "<python_repl>"
_REPL_MODULE = "python_repl"
_RESULT_NAME = "mastif_repl_last_value"


class _SandboxedModule:
    """Public, non-module attributes of a whitelisted module.

    Handing out the real module would leak its imports (``json.codecs.open`` reads files),
    so submodules and underscore names are left out.
    """

    def __init__(self, module: types.ModuleType) -> None:
        self._name = module.__name__
        for attr, value in vars(module).items():
            if not attr.startswith("_") and not isinstance(value, types.ModuleType):
                setattr(self, attr, value)

    def __getattr__(self, attr: str) -> Any:  # only called for names we did not copy
        raise AttributeError(f"module {self._name!r} has no attribute {attr!r}")

    def __repr__(self) -> str:
        return f"<module {self._name!r} (sandboxed)>"


def _shared_print_collector(buffer: list[str]) -> type[PrintCollector]:
    """A ``PrintCollector`` whose instances all write to ``buffer``.

    RestrictedPython gives every function its own collector, so prints inside a ``def``
    would otherwise be lost; sharing one buffer keeps output in order, as in a terminal.
    """

    class SharedPrintCollector(PrintCollector):
        def __init__(self, _getattr_: Any = None) -> None:
            super().__init__(_getattr_)
            self.txt = buffer

    return SharedPrintCollector


def _guarded_import(
    name: str,
    globals: dict[str, Any] | None = None,  # noqa: A002 - __import__'s signature
    locals: dict[str, Any] | None = None,  # noqa: A002
    fromlist: tuple[str, ...] = (),
    level: int = 0,
) -> _SandboxedModule:
    """``__import__`` for the sandbox: only :data:`SAFE_MODULES`, absolute, top-level."""
    if level != 0 or name not in SAFE_MODULES:
        raise ImportError(
            f"import of {name!r} is not allowed; importable modules: {', '.join(SAFE_MODULES)}"
        )
    return _SandboxedModule(__import__(name))


def _guarded_getattr(obj: Any, name: str, default: Any = raise_) -> Any:
    """``safer_getattr`` but raising on a missing attribute: RestrictedPython's own hook
    defaults to ``None``, which turns ``math.sqrtt(2)`` into a baffling "NoneType" error."""
    return safer_getattr(obj, name, default)


def _guarded_write(obj: Any) -> Any:
    """Allow attribute writes on classes (and their instances) defined in the snippet itself,
    so ``self.x = 1`` works; everything else goes through RestrictedPython's write guard."""
    cls = obj if isinstance(obj, type) else type(obj)
    if getattr(cls, "__module__", None) == _REPL_MODULE:
        return obj
    return full_write_guard(obj)


def _inplacevar(op: str, target: Any, value: Any) -> Any:
    """RestrictedPython rewrites ``x += y`` into a call to this guard."""
    return _INPLACE_OPS[op](target, value)


def _apply(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """RestrictedPython rewrites ``f(*a, **k)`` into a call to this guard."""
    return func(*args, **kwargs)


def _restricted_globals(printed: list[str]) -> dict[str, Any]:
    """Fresh globals for one snippet: safe builtins plus RestrictedPython's guard hooks;
    everything the snippet prints is appended to ``printed``."""
    allowed: dict[str, Any] = dict(safe_globals["__builtins__"])
    allowed.update(limited_builtins)
    allowed.update(utility_builtins)
    allowed.update(_EXTRA_BUILTINS)
    allowed["__import__"] = _guarded_import
    return {
        "__builtins__": allowed,
        "__name__": _REPL_MODULE,
        "__metaclass__": type,
        "_getattr_": _guarded_getattr,
        "_getitem_": default_guarded_getitem,
        "_getiter_": default_guarded_getiter,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_write_": _guarded_write,
        "_inplacevar_": _inplacevar,
        "_apply_": _apply,
        "_print_": _shared_print_collector(printed),
    }


def _capture_last_expression(tree: ast.Module) -> bool:
    """Turn a trailing bare expression into an assignment so its value can be shown,
    as an interactive interpreter would."""
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return False
    last = tree.body[-1]
    assign = ast.Assign(targets=[ast.Name(id=_RESULT_NAME, ctx=ast.Store())], value=last.value)
    tree.body[-1] = ast.fix_missing_locations(ast.copy_location(assign, last))
    return True


def _snippet_line(exc: BaseException) -> str:
    """`` (line N)`` of the snippet where ``exc`` was raised, so the model can fix it."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == _REPL_FILENAME]
    return f" (line {frames[-1].lineno})" if frames else ""


def execute_restricted(code: str) -> str:
    """Run ``code`` under RestrictedPython and return printed output plus the repr of a
    trailing expression. Runs in-process: callers wrap it in :func:`run_isolated`."""
    try:
        tree = ast.parse(code, _REPL_FILENAME)
    except SyntaxError as exc:
        raise ToolError(f"SyntaxError: {exc.msg} (line {exc.lineno})") from None
    has_value = _capture_last_expression(tree)
    compiled = compile_restricted_exec(tree, _REPL_FILENAME)
    if compiled.errors or compiled.code is None:
        raise ToolError("code rejected by the sandbox: " + "; ".join(compiled.errors))
    printed: list[str] = []
    glb = _restricted_globals(printed)
    try:
        exec(compiled.code, glb)  # noqa: S102 - restricted bytecode in a throwaway process
    except Exception as exc:  # noqa: BLE001 - becomes the tool's failure message
        message = f"{type(exc).__name__}: {clip_text(str(exc))}{_snippet_line(exc)}"
        if printed:  # what ran before the error helps the model locate it
            message += "\noutput before the error:\n" + clip_text("".join(printed))
        raise ToolError(message) from None
    output = "".join(printed)
    value = glb.get(_RESULT_NAME) if has_value else None
    if value is not None:
        output += repr(value) + "\n"
    return clip_text(output.rstrip("\n")) if output else "(no output)"


def make_python_repl_tool(timeout_s: float = 5.0, cpu_s: int = 5, memory_mb: int = 256) -> Tool:
    """Build ``python_repl``: RestrictedPython in a child process with a wall-clock limit
    (``timeout_s``), a CPU-time limit, a memory budget, a throw-away working directory and
    no network (:class:`ChildLimits`)."""
    limits = ChildLimits(cpu_s=cpu_s, memory_mb=memory_mb, workdir=True, network=False)

    def python_repl(code: str) -> str:
        return run_isolated(execute_restricted, (code,), timeout_s, limits)

    description = (
        "Use this tool when you need to run a short Python snippet to get an exact answer: "
        "arithmetic, loops over small data, string or list manipulation, statistics. "
        "print() what you want to see; the value of a final bare expression is shown too. "
        f"Every call starts from scratch (variables do not persist) and is stopped after "
        f"{timeout_s:g} seconds. Importable modules: {', '.join(SAFE_MODULES)}. "
        "Do NOT use it for files, network, shell or operating-system access (all blocked), "
        "for symbolic algebra (use sympy), for the current date or time (use datetime), "
        "or to pull values out of a JSON document (use json_parser)."
    )
    parameters = _schema(
        {"code": text_parameter("Python source code to execute.")},
        ["code"],
    )
    return Tool("python_repl", description, parameters, python_repl)


# --------------------------------------------------------------------------------------
# datetime
# --------------------------------------------------------------------------------------


def _resolve_timezone(name: str) -> dt.tzinfo:
    """IANA name to tzinfo; UTC works even without a tz database (bare Windows)."""
    if name.strip().upper() in {"UTC", "Z", "GMT"}:
        return dt.UTC
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ToolError(
            f"unknown timezone {name!r}; use an IANA name such as 'UTC', 'Europe/Paris' "
            "or 'America/New_York'"
        ) from None


def make_datetime_tool(clock: Callable[[dt.tzinfo], dt.datetime] | None = None) -> Tool:
    """Build ``datetime``; ``clock`` can be swapped for a fixed time to make runs replayable."""
    now_in = clock or (lambda tz: dt.datetime.now(tz))

    def datetime_tool(timezone: str = "UTC", format: str = "") -> str:  # noqa: A002
        tz = _resolve_timezone(timezone)
        now = now_in(tz)
        if format:
            return now.strftime(format)
        return f"{now.isoformat(timespec='seconds')} ({now:%A}, {timezone.strip()})"

    description = (
        "Use this tool when you need the current date or time, today's weekday, or the "
        "current time in a given IANA timezone such as 'Europe/Paris'. "
        "Do NOT use it for arithmetic on other dates or for parsing dates out of text "
        "(use python_repl with the datetime module), and do not guess today's date yourself."
    )
    parameters = _schema(
        {
            "timezone": text_parameter("IANA timezone name, e.g. 'UTC' (default) or 'Asia/Tokyo'."),
            "format": text_parameter(
                "Optional strftime format, e.g. '%Y-%m-%d'. Default: ISO 8601 plus weekday."
            ),
        },
        [],
    )
    return Tool("datetime", description, parameters, datetime_tool)


# --------------------------------------------------------------------------------------
# json_parser
# --------------------------------------------------------------------------------------

PathSegment = str | int
_PATH_NAME = re.compile(r"[^.\[\]]+")


def parse_json_path(query: str) -> list[PathSegment]:
    """Split ``items[0].name``, ``a.b.2`` or ``$["odd.key"]`` into keys and indices.

    Dotted segments stay strings (``"2"`` indexes a list or names a dict key, decided at
    lookup); bracketed integers become ints; bracketed quoted strings are literal keys.
    """
    text = query.strip()
    if text.startswith("$"):
        text = text[1:]
    segments: list[PathSegment] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char == ".":
            pos += 1
            if pos >= len(text) or text[pos] in ".[":
                raise ToolError(f"bad path {query!r}: empty segment at position {pos}")
        elif char == "[":
            end = text.find("]", pos)
            if end < 0:
                raise ToolError(f"bad path {query!r}: missing ']'")
            inner = text[pos + 1 : end].strip()
            if re.fullmatch(r"-?\d+", inner):
                segments.append(int(inner))
            elif len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
                segments.append(inner[1:-1])
            else:
                raise ToolError(f'bad path {query!r}: use [0] or ["key"] inside brackets')
            pos = end + 1
        else:
            match = _PATH_NAME.match(text, pos)
            if match is None:
                raise ToolError(f"bad path {query!r}: unexpected {char!r} at position {pos}")
            segments.append(match.group().strip())
            pos = match.end()
    return segments


def _format_where(segments: list[PathSegment]) -> str:
    return "$" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in segments)


def lookup_json_path(data: Any, segments: list[PathSegment]) -> Any:
    """Walk ``segments`` into ``data``; a miss names where it stopped and what was there."""
    current = data
    for depth, segment in enumerate(segments):
        where = _format_where(segments[:depth])
        if isinstance(current, dict):
            key = str(segment)
            if key not in current:
                keys = ", ".join(list(current)[:20]) or "none"
                raise ToolError(f"key {key!r} not found at {where}; available keys: {keys}")
            current = current[key]
        elif isinstance(current, list):
            if isinstance(segment, str) and not re.fullmatch(r"-?\d+", segment):
                raise ToolError(f"{where} is a list; use a numeric index, not {segment!r}")
            index = int(segment)
            if not -len(current) <= index < len(current):
                raise ToolError(f"index {index} out of range at {where} (length {len(current)})")
            current = current[index]
        else:
            kind = type(current).__name__
            raise ToolError(f"cannot look up {segment!r} in a {kind} value at {where}")
    return current


def make_json_parser_tool() -> Tool:
    """Build ``json_parser``."""

    def json_parser(json_string: str, query: str = "") -> str:
        try:
            data = json.loads(json_string)
        except json.JSONDecodeError as exc:
            raise ToolError(
                f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        value = lookup_json_path(data, parse_json_path(query)) if query.strip() else data
        return clip_text(json.dumps(value, indent=2, ensure_ascii=False))

    description = (
        "Use this tool when you have a JSON document as text and need to check that it is "
        "valid, pretty-print it, or extract one value by path, e.g. 'items[0].name' or "
        "'a.b.2'. Do NOT use it for computing with the values (use python_repl) or for "
        "text that is not JSON, such as YAML, CSV or HTML."
    )
    parameters = _schema(
        {
            "json_string": text_parameter("The JSON document, as text."),
            "query": text_parameter(
                "Optional path such as 'items[0].name' or 'a.b.2'; empty returns the whole "
                "document pretty-printed."
            ),
        },
        ["json_string"],
    )
    return Tool("json_parser", description, parameters, json_parser)


PYTHON_REPL: Tool = make_python_repl_tool()
DATETIME: Tool = make_datetime_tool()
JSON_PARSER: Tool = make_json_parser_tool()

BUILTIN_TOOLS: tuple[Tool, ...] = (PYTHON_REPL, SYMPY, DATETIME, JSON_PARSER)

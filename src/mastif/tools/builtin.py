"""The built-in tools every stack gets: ``python_repl``, ``sympy``, ``datetime``, ``json_parser``.

Each tool is a module-level :class:`~mastif.tools.base.Tool` made by a small factory, so a
run can build a variant (e.g. a shorter time limit) without touching the shared instance.
Descriptions are guidance-style ("Use this tool when ...; Do NOT use it for ...") because
small models pick tools from the description alone.

Code and algebra supplied by a model are untrusted: ``python_repl`` runs under
RestrictedPython and ``sympy`` parses through a node whitelist, and both run in a child
process (:func:`run_isolated`) with a CPU-time limit and a memory budget enforced by the
OS, killed at a wall-clock limit, so a runaway snippet can neither hang nor exhaust a run.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import datetime as dt
import functools
import json
import multiprocessing
import operator
import os
import re
import resource
import shutil
import signal
import socket
import sys
import tempfile
import tokenize
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
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

from mastif.textclip import head_at_word
from mastif.tools.base import Tool, ToolError

#: Longest output handed back to the model; tiny models have tiny context windows.
MAX_OUTPUT_CHARS = 8000


def _schema(properties: dict[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    """One place for the object-schema shape, so every tool rejects unknown arguments."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _truncate(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Cap output length, saying how much was dropped so the model knows it is partial.

    The cut falls between words (:func:`mastif.textclip.head_at_word`): a page listing cut
    inside the sandbox's ``127.0.0.1:PORT`` would differ between stack jobs past the
    response cache's stand-in for it."""
    if len(text) <= limit:
        return text
    head = head_at_word(text, limit)
    return f"{head}\n... [truncated {len(text) - len(head)} characters]"


# --------------------------------------------------------------------------------------
# Process isolation shared by python_repl and sympy
# --------------------------------------------------------------------------------------


def _mp_context() -> multiprocessing.context.BaseContext:
    """'fork' where available: the child inherits already-imported modules (sympy), so a
    call costs milliseconds; 'spawn' elsewhere, which works because targets are top-level."""
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


@dataclass(frozen=True)
class ChildLimits:
    """What the child process may use, enforced by the OS on top of the code's own sandbox.

    ``cpu_s``: CPU seconds (RLIMIT_CPU; the kernel kills a spinning child even if the
    parent's wall clock is held up); ``memory_mb``: address space the child may add to what
    it inherited at fork (RLIMIT_AS; a larger allocation fails with ``MemoryError``). Free
    space the parent's allocators still hold in mapped memory comes on top, so this is a
    floor, not an exact budget; a single allocation larger than that slack fails at once;
    ``workdir``: run in a fresh empty directory that is removed afterwards; ``network``:
    when False, opening or resolving a network connection raises ``PermissionError``.
    """

    cpu_s: int | None = None
    memory_mb: int | None = None
    workdir: bool = True
    network: bool = False


def _current_address_space() -> int:
    """Bytes of virtual memory this process maps now (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as fh:  # noqa: PTH123 - tiny read of a proc file
        return int(fh.read().split()[0]) * resource.getpagesize()


def _release_free_heap() -> None:
    """Unmap the free memory glibc's allocator keeps (``malloc_trim``); nothing elsewhere."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing kept to hand back
        pass


def _deny_network(*args: Any, **kwargs: Any) -> Any:
    raise PermissionError("network access is disabled in this tool")


def _apply_limits(limits: ChildLimits, workdir: str | None = None) -> None:
    """In the child, before the untrusted work: OS limits, an empty cwd, no network."""
    if workdir is not None:
        os.chdir(workdir)
    if limits.cpu_s is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    if limits.memory_mb is not None and sys.platform.startswith("linux"):
        # a fork child inherits the parent's mappings (frameworks, models' clients): the
        # budget is on top of those, not an absolute size that would already be exceeded;
        # the parent's freed but still mapped heap is handed back first, or the child
        # could use it on top of its budget
        _release_free_heap()
        cap = _current_address_space() + limits.memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    if not limits.network:
        socket.socket.connect = _deny_network  # type: ignore[method-assign]
        socket.socket.connect_ex = _deny_network  # type: ignore[method-assign]
        socket.socket.sendto = _deny_network  # type: ignore[method-assign]
        socket.create_connection = _deny_network  # type: ignore[assignment]
        socket.getaddrinfo = _deny_network  # type: ignore[assignment]


class ChildLimitExceeded(ToolError):
    """The child process hit one of its limits, so its work was stopped.

    ``kind`` is ``"cpu"`` (:attr:`ChildLimits.cpu_s`), ``"memory"`` (``MemoryError`` under
    :attr:`ChildLimits.memory_mb`) or ``"time"`` (the parent's wall clock); ``limit`` is the
    figure that was hit (seconds or MB), ``None`` for memory when no limit was set. Tools
    catch it to say, in their own words, what was too big."""

    def __init__(self, message: str, kind: str, limit: float | None) -> None:
        super().__init__(message)
        self.kind = kind
        self.limit = limit


#: Longest reply text (characters) a child may send back: room for an error message and
#: the output printed before it, each capped at :data:`MAX_OUTPUT_CHARS`.
_REPLY_CAP_CHARS = 2 * MAX_OUTPUT_CHARS + 1024
#: Longest reply the parent reads from the pipe: the JSON of ``_REPLY_CAP_CHARS``
#: characters (at most 6 bytes each, for ``\\uXXXX`` escapes) plus the envelope.
_REPLY_CAP_BYTES = 6 * _REPLY_CAP_CHARS + 64


def _child_main(
    target: Callable[..., str],
    args: tuple[Any, ...],
    conn: Connection,
    limits: ChildLimits | None = None,
    workdir: str | None = None,
) -> None:
    """Child-process entry: run ``target`` and send back ``[ok, text, kind]`` as JSON, never
    an exception object (those may not pickle, and unpickling a child's bytes would trust
    it). ``kind`` is ``"memory"`` when ``target`` ran out of memory (a ``MemoryError`` it
    let through), else null. The text is cut to :data:`_REPLY_CAP_CHARS` here, before it
    crosses into the parent."""
    memory = False
    try:
        if limits is not None:
            _apply_limits(limits, workdir)
        ok, text = True, str(target(*args))
    except MemoryError:
        ok, text, memory = False, "", True
    except ToolError as exc:
        ok, text = False, str(exc)
    except BaseException as exc:  # noqa: BLE001 - report everything, the parent decides
        ok, text = False, f"{type(exc).__name__}: {_truncate(str(exc))}"
    try:
        reply = [ok, _truncate(text, _REPLY_CAP_CHARS), "memory" if memory else None]
        conn.send_bytes(json.dumps(reply).encode())
    finally:
        conn.close()


def run_isolated(
    target: Callable[..., str],
    args: tuple[Any, ...],
    timeout_s: float,
    limits: ChildLimits | None = None,
) -> str:
    """Run ``target(*args)`` in a child process; kill it after ``timeout_s`` seconds.

    Threads cannot be interrupted in CPython, so a process is the only robust way to stop
    ``while True: pass``. ``limits`` adds OS limits in the child. The working directory is
    made and removed here, in the parent, so it goes on every exit path (a timeout or a
    kill never runs the child's cleanup). At most :data:`_REPLY_CAP_BYTES` are read from
    the child. Failures come back as :class:`ToolError`; a limit hit (wall clock, CPU,
    memory) as its subclass :class:`ChildLimitExceeded`.

    ``args`` reach the child without a copy through a pipe where processes fork (Linux,
    the platform the limits are enforced on): a downloaded PDF's bytes are inherited.
    """
    ctx = _mp_context()
    workdir = tempfile.mkdtemp(prefix="mastif-tool-") if limits and limits.workdir else None
    try:
        receiver, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=_child_main, args=(target, args, sender, limits, workdir), daemon=True
        )
        proc.start()
        sender.close()  # only the child writes; closing our copy lets a crash surface as EOF
        try:
            if not receiver.poll(timeout_s):
                raise ChildLimitExceeded(f"timed out after {timeout_s:g}s", "time", timeout_s)
            try:
                raw = receiver.recv_bytes(_REPLY_CAP_BYTES)
            except EOFError:
                proc.join(1)
                if limits is not None and proc.exitcode == -signal.SIGXCPU:
                    raise ChildLimitExceeded(
                        f"CPU time limit of {limits.cpu_s}s exceeded", "cpu", limits.cpu_s
                    ) from None
                raise ToolError(f"worker process died (exit code {proc.exitcode})") from None
            except OSError:  # multiprocessing: the announced length exceeds the cap
                raise ToolError(
                    f"worker reply exceeds {_REPLY_CAP_BYTES} bytes; not read"
                ) from None
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join(1)
            receiver.close()
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    try:
        ok, text, kind = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise ToolError(f"worker sent a malformed reply: {exc}") from None
    if kind == "memory":
        memory_mb = limits.memory_mb if limits is not None else None
        budget = f"its memory limit of {memory_mb} MB" if memory_mb is not None else "memory"
        raise ChildLimitExceeded(f"MemoryError: the work ran out of {budget}", "memory", memory_mb)
    if not ok:
        raise ToolError(str(text))
    return str(text)


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
        message = f"{type(exc).__name__}: {_truncate(str(exc))}{_snippet_line(exc)}"
        if printed:  # what ran before the error helps the model locate it
            message += "\noutput before the error:\n" + _truncate("".join(printed))
        raise ToolError(message) from None
    output = "".join(printed)
    value = glb.get(_RESULT_NAME) if has_value else None
    if value is not None:
        output += repr(value) + "\n"
    return _truncate(output.rstrip("\n")) if output else "(no output)"


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
        {"code": {"type": "string", "description": "Python source code to execute."}},
        ["code"],
    )
    return Tool("python_repl", description, parameters, python_repl)


# --------------------------------------------------------------------------------------
# sympy
# --------------------------------------------------------------------------------------

SYMPY_OPERATIONS: tuple[str, ...] = (
    "simplify",
    "solve",
    "expand",
    "factor",
    "diff",
    "integrate",
    "evaluate",
)

#: sympy names that turn strings into code, run programs or write files: never reachable.
_SYMPY_BLOCKED = frozenset(
    {
        "S", "sympify", "parse_expr", "lambdify", "var", "preview", "init_printing",
        "init_session", "interactive_traversal", "pprint", "pprint_use_unicode",
        "print_gtk", "print_tree", "textplot", "plot", "plot_implicit", "plot_parametric",
        "plot_backends", "source", "test", "doctest", "srepr", "sstr", "sstrrepr",
    }
)  # fmt: skip

#: Python syntax a maths expression needs after sympy's transformations; nothing else.
_SYMPY_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.Call, ast.Name, ast.Load, ast.Constant,
    ast.Tuple, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
    ast.USub, ast.UAdd, ast.Compare, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)  # fmt: skip

#: ``a = b`` but not ``==``, ``<=``, ``>=``, ``!=``.
_EQUALS = re.compile(r"(?<![<>=!])=(?!=)")


@functools.cache
def _sympy_namespace() -> dict[str, Any]:
    """sympy's public names minus :data:`_SYMPY_BLOCKED`, with no Python builtins, so a
    parsed expression can only call maths. Cached and built in the parent before forking."""
    import sympy

    namespace = {
        name: getattr(sympy, name)
        for name in sympy.__all__
        if name not in _SYMPY_BLOCKED and not isinstance(getattr(sympy, name), types.ModuleType)
    }
    namespace.update({"max": sympy.Max, "min": sympy.Min, "abs": sympy.Abs, "__builtins__": {}})
    return namespace


def _parse_sympy(text: str, local_dict: dict[str, Any]) -> Any:
    """Parse with sympy's parser (standard transformations, implicit multiplication, ``^``
    as power) after checking the rewritten code contains only whitelisted syntax.

    ``parse_expr`` evaluates its rewritten input, so the check is what keeps model text
    from becoming arbitrary Python (string literals, attributes, subscripts are refused).
    """
    from sympy.parsing.sympy_parser import (
        convert_xor,
        implicit_multiplication,
        parse_expr,
        standard_transformations,
        stringify_expr,
    )

    if any(ch in text for ch in "'\"`\\") or "__" in text:
        raise ToolError(f"could not parse {text!r}: quotes, backslashes and '__' are not allowed")
    namespace = _sympy_namespace()
    transformations = standard_transformations + (implicit_multiplication, convert_xor)
    try:
        code = stringify_expr(text, local_dict, namespace, transformations)
        tree = ast.parse(code, mode="eval")
    except (SyntaxError, tokenize.TokenError, ValueError) as exc:
        raise ToolError(f"could not parse {text!r}: {exc}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _SYMPY_ALLOWED_NODES):
            raise ToolError(f"could not parse {text!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Call) and not isinstance(node.func, ast.Name):
            raise ToolError(f"could not parse {text!r}: only plain function calls are allowed")
    try:
        return parse_expr(text, local_dict, transformations, namespace)
    except MemoryError:
        raise  # the child reports it as a memory-limit hit, not as a parse error
    except Exception as exc:  # noqa: BLE001 - sympy raises many types on bad input
        raise ToolError(f"could not parse {text!r}: {type(exc).__name__}: {exc}") from None


def _pick_variable(expr: Any, variable: str | None, local_dict: dict[str, Any]) -> Any:
    """The symbol to act on: the given one, else the expression's only free symbol."""
    if variable:
        return local_dict[variable]
    symbols = sorted(expr.free_symbols, key=str)
    if len(symbols) == 1:
        return symbols[0]
    if not symbols:
        raise ToolError("the expression has no variable; pass 'variable'")
    names = ", ".join(map(str, symbols))
    raise ToolError(f"the expression has several variables ({names}); pass 'variable'")


def compute_sympy(expression: str, operation: str, variable: str | None) -> str:
    """Do one sympy operation and return ``str`` of the result. Runs in a child process."""
    import sympy

    local_dict: dict[str, Any] = {}
    if variable:
        if not variable.isidentifier() or "__" in variable:
            raise ToolError(f"variable must be a plain name like 'x', got {variable!r}")
        local_dict[variable] = sympy.Symbol(variable)
    sides = _EQUALS.split(expression)
    if len(sides) > 2:
        raise ToolError("at most one '=' is allowed, as in 'x**2 - 4 = 0'")
    if len(sides) == 2 and operation != "solve":
        raise ToolError("'lhs = rhs' equations are only accepted with operation 'solve'")
    parsed = [_parse_sympy(side.strip(), local_dict) for side in sides]
    expr = parsed[0] - parsed[1] if len(parsed) == 2 else parsed[0]

    if operation == "simplify":
        result = sympy.simplify(expr)
    elif operation == "expand":
        result = sympy.expand(expr)
    elif operation == "factor":
        result = sympy.factor(expr)
    elif operation == "evaluate":
        result = sympy.N(expr)
    elif operation == "solve":
        result = sympy.solve(expr, local_dict[variable]) if variable else sympy.solve(expr)
    elif operation == "diff":
        result = sympy.diff(expr, _pick_variable(expr, variable, local_dict))
    elif operation == "integrate":
        result = sympy.integrate(expr, _pick_variable(expr, variable, local_dict))
    else:  # the schema's enum makes this unreachable through Tool.invoke
        choices = ", ".join(SYMPY_OPERATIONS)
        raise ToolError(f"unknown operation {operation!r}; use one of {choices}")
    return _truncate(str(result))


#: Wall-clock seconds one ``sympy`` call may take.
SYMPY_TIMEOUT_S = 10.0
#: CPU seconds one ``sympy`` call may use (RLIMIT_CPU), below the wall clock so an idle
#: machine reports the CPU limit; the slowest typical call measured (a non-elementary
#: integral sympy gives up on, ``exp(-x**2)*sin(x)``) used 3.4 s, the rest under 0.7 s.
SYMPY_CPU_S = 8
#: Memory (MB) one ``sympy`` call may add to what it inherits (RLIMIT_AS): typical calls
#: add 1-11 MB; ``2**(2**32)`` wanted ~1.7 GB before this limit.
SYMPY_MEMORY_MB = 256


def make_sympy_tool(
    timeout_s: float = SYMPY_TIMEOUT_S,
    cpu_s: int = SYMPY_CPU_S,
    memory_mb: int = SYMPY_MEMORY_MB,
) -> Tool:
    """Build ``sympy``: each call runs in a child process with a wall clock (``timeout_s``),
    a CPU-time limit and a memory budget (:class:`ChildLimits`, no network), which stop
    pathological inputs such as ``factorial(10**9)`` or ``2**(2**32)``."""
    limits = ChildLimits(cpu_s=cpu_s, memory_mb=memory_mb, workdir=False, network=False)

    def sympy_tool(
        expression: str, operation: str = "simplify", variable: str | None = None
    ) -> str:
        _sympy_namespace()  # import sympy here so a forked child starts warm
        try:
            return run_isolated(compute_sympy, (expression, operation, variable), timeout_s, limits)
        except ChildLimitExceeded as exc:
            if exc.kind == "memory":
                raise ToolError(
                    f"MemoryError: this {operation} needs more than the sympy tool's "
                    f"{memory_mb} MB of memory; use smaller numbers or a float estimate"
                ) from None
            if exc.kind == "cpu":
                raise ToolError(
                    f"this {operation} took more than the sympy tool's {cpu_s} s of CPU "
                    "time (CPU time limit exceeded); use smaller numbers or a simpler form"
                ) from None
            raise

    description = (
        "Use this tool when you need exact symbolic mathematics: simplify, expand or factor "
        "an expression, solve an equation such as 'x**2 - 4 = 0', differentiate, integrate, "
        "or evaluate an expression to a decimal number. Write maths in Python syntax "
        "(** for powers; ^ and implicit products like 2x are accepted too). "
        "Do NOT use it for general programming, loops or text processing (use python_repl), "
        "or for dates and times (use datetime)."
    )
    parameters = _schema(
        {
            "expression": {
                "type": "string",
                "description": "Maths expression, or 'lhs = rhs' equation for solve, "
                "e.g. 'x**2 - 4 = 0'.",
            },
            "operation": {
                "type": "string",
                "enum": list(SYMPY_OPERATIONS),
                "default": "simplify",
                "description": "What to do with the expression (default simplify).",
            },
            "variable": {
                "type": "string",
                "description": "Variable to solve for, differentiate or integrate by, e.g. 'x'. "
                "Optional when the expression has a single variable.",
            },
        },
        ["expression"],
    )
    return Tool("sympy", description, parameters, sympy_tool)


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
            "timezone": {
                "type": "string",
                "description": "IANA timezone name, e.g. 'UTC' (default) or 'Asia/Tokyo'.",
            },
            "format": {
                "type": "string",
                "description": "Optional strftime format, e.g. '%Y-%m-%d'. "
                "Default: ISO 8601 plus weekday.",
            },
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
        return _truncate(json.dumps(value, indent=2, ensure_ascii=False))

    description = (
        "Use this tool when you have a JSON document as text and need to check that it is "
        "valid, pretty-print it, or extract one value by path, e.g. 'items[0].name' or "
        "'a.b.2'. Do NOT use it for computing with the values (use python_repl) or for "
        "text that is not JSON, such as YAML, CSV or HTML."
    )
    parameters = _schema(
        {
            "json_string": {"type": "string", "description": "The JSON document, as text."},
            "query": {
                "type": "string",
                "description": "Optional path such as 'items[0].name' or 'a.b.2'; "
                "empty returns the whole document pretty-printed.",
            },
        },
        ["json_string"],
    )
    return Tool("json_parser", description, parameters, json_parser)


PYTHON_REPL: Tool = make_python_repl_tool()
SYMPY: Tool = make_sympy_tool()
DATETIME: Tool = make_datetime_tool()
JSON_PARSER: Tool = make_json_parser_tool()

BUILTIN_TOOLS: tuple[Tool, ...] = (PYTHON_REPL, SYMPY, DATETIME, JSON_PARSER)

"""The ``sympy`` tool: exact symbolic maths on a model's expression, which is untrusted.

Nothing the model writes is ever handed to Python's ``eval``, at any stage. sympy's own
``parse_expr`` and ``sympify`` evaluate their (rewritten) input as Python with the
builtins in reach, and sympy's printers turn expressions back into strings: an expression
with no quote and no ``__`` could build a string of code from printer output and have
``simplify`` sympify it (issue 37: it read ``OPENAI_API_KEY`` out of the environment). So:

1. sympy's tokeniser transformations (:func:`~sympy.parsing.sympy_parser.stringify_expr`:
   implicit products, ``^`` as power, ``5!``, numbers and unknown names made into
   ``Integer``/``Float``/``Symbol``) rewrite the text into Python source, without running
   it; ``ast.parse`` reads that source;
2. :func:`evaluate_tree` walks the tree itself: numbers, ``+ - * / // % **``, one
   comparison, tuples, and calls of a plain name from :func:`allowed_names`, an allowlist
   of maths functions and constants (no printer, parser, string, plotting, code-generation
   or file function is in it). A name the model writes directly before ``(`` must be one
   of those functions (:func:`_refuse_unknown_calls`, before the transformations, which
   would make ``isprime(7)`` the product ``7*isprime``). Strings exist only as the
   literal argument of ``Symbol`` (an identifier) and ``Float`` (a decimal numeral), and
   every value the walk produces must be a sympy object, so no string ever reaches a
   sympy function;
3. the child that does it (:func:`~mastif.tools.isolation.run_isolated`) has an empty
   environment, no network, an empty working directory and CPU, memory and wall-clock
   limits.
"""

from __future__ import annotations

import ast
import functools
import itertools
import operator
import re
import tokenize
from collections.abc import Callable
from typing import Any

from mastif.core.textclip import clip_text
from mastif.tools.base import Tool, ToolError, object_schema, text_parameter
from mastif.tools.isolation import ChildLimitExceeded, ChildLimits, run_isolated

SYMPY_OPERATIONS: tuple[str, ...] = (
    "simplify",
    "solve",
    "expand",
    "factor",
    "diff",
    "integrate",
    "evaluate",
)

#: Modules whose sympy ``Function`` classes are maths (elementary, combinatorial, special
#: functions): the walk may call these. ``Function`` itself (which makes a function from a
#: name), ``WildFunction`` and the integral transforms are left out.
_FUNCTION_MODULES = ("sympy.functions.", "sympy.core.mod")

#: Other sympy names an expression may use: constants, number constructors, relations,
#: unevaluated operators and a few operations that take and return expressions.
_EXTRA_NAMES = (
    "pi", "E", "I", "oo", "zoo", "nan", "EulerGamma", "Catalan", "GoldenRatio",
    "TribonacciConstant", "Integer", "Rational", "Eq", "Ne", "Lt", "Le", "Gt", "Ge",
    "Max", "Min", "sqrt", "root", "cbrt", "real_root", "Sum", "Product", "Integral",
    "Derivative", "Limit", "diff", "integrate", "limit", "summation", "product",
    "simplify", "expand", "factor", "cancel", "apart", "together", "trigsimp",
    "expand_trig", "expand_log", "powsimp", "N", "gcd", "lcm",
)  # fmt: skip

#: A few allowlisted functions, named when a call of an unknown name is refused.
_EXAMPLE_FUNCTIONS = "sqrt, exp, log, sin, cos, tan, Abs, factorial, binomial and gcd"

#: ``Float``'s literal, as sympy's number transformation writes it.
_DECIMAL = re.compile(r"(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z")

#: ``a = b`` but not ``==``, ``<=``, ``>=``, ``!=``.
_EQUALS = re.compile(r"(?<![<>=!])=(?!=)")

#: Deepest nesting of the expression tree the walk follows (each level is a Python frame).
MAX_DEPTH = 200

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


@functools.cache
def allowed_names() -> dict[str, Any]:
    """Name -> sympy object for every function and constant an expression may use.

    Built in the parent before forking (so a child starts warm) and cached. Python's
    ``max``, ``min`` and ``abs`` are sympy's ``Max``, ``Min`` and ``Abs``."""
    import sympy

    names: dict[str, Any] = {}
    for name in sympy.__all__:
        obj = getattr(sympy, name)
        if (
            isinstance(obj, type)
            and issubclass(obj, sympy.Function)
            and obj.__module__.startswith(_FUNCTION_MODULES)
            and name not in ("Function", "WildFunction")
        ):
            names[name] = obj
    names.update({name: getattr(sympy, name) for name in _EXTRA_NAMES})
    names.update({"max": sympy.Max, "min": sympy.Min, "abs": sympy.Abs})
    return names


@functools.cache
def _transformation_names() -> dict[str, Any]:
    """What sympy's transformations are told is defined: the allowlist plus the names they
    write themselves (``Symbol('x')``, ``Float('2.5')``, ``Function('f')`` for an unknown
    name applied to arguments), so they write calls of those and not products with them.
    Only :class:`_Walk` decides what those calls may do. (Implicit multiplication turns
    ``Function('f')`` before ``(`` into ``Symbol('f')*``: :func:`_refuse_unknown_calls`
    refuses such a name first.)"""
    import sympy

    return {
        **allowed_names(),
        "Symbol": sympy.Symbol,
        "Float": sympy.Float,
        "Function": sympy.Function,
    }


def _fail(text: str, why: str) -> ToolError:
    return ToolError(f"could not parse {text!r}: {why}")


def _refuse_unknown_calls(
    text: str, tokens: list[tuple[int, str]], local_dict: dict[str, Any], global_dict: Any
) -> list[tuple[int, str]]:
    """A sympy transformation, run first, on the tokens of the model's ``text``: refuses a
    name written directly before ``(`` (spaces between allowed) unless it is an allowlisted
    function, an allowlisted constant or the caller's variable (``local_dict``).

    Without it sympy makes an unknown name a ``Symbol`` and the call a product:
    ``isprime(7)`` was ``7*isprime`` and ``eval(x)`` ``eval*x``, wrong answers reported
    as success. A constant or the caller's variable before ``(`` stays a product, as
    ``2(x+1)`` is: ``pi(r+1)`` is ``pi*(r+1)``, and with ``variable='x'`` the caller has
    said ``x`` is a variable, so ``x(y+1)`` can only mean ``x*(y+1)``. Any other name,
    one letter included, is refused, since ``f(x)`` is far more often a function than
    ``f*x``, and a refusal that says how to write the product costs the model one retry
    where a silent product is a wrong answer. A name not before ``(`` (``rate*time``,
    ``eval + 1``) stays a plain variable."""
    names = allowed_names()
    for (kind, name), following in itertools.pairwise(tokens):
        if kind != tokenize.NAME or following != (tokenize.OP, "("):
            continue
        if name in local_dict or name in names:  # a function, or a constant times (...)
            continue
        if len(name) == 1:
            hint = f": write {name}*(...) for a product"
        else:
            hint = f" (known ones include {_EXAMPLE_FUNCTIONS})"
        raise _fail(text, f"{name!r} is not a known maths function{hint}")
    return tokens


class _Walk:
    """Evaluates one parsed expression (see the module docstring); ``local`` holds the
    caller's symbols (the ``variable`` argument)."""

    def __init__(self, text: str, local: dict[str, Any]) -> None:
        import sympy

        self.sympy = sympy
        self.text = text
        self.names = {**allowed_names(), **local}
        self.depth = 0

    def value(self, node: ast.AST) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _fail(self.text, f"nested more than {MAX_DEPTH} levels deep")
        try:
            result = self._value(node)
        finally:
            self.depth -= 1
        if not isinstance(result, self.sympy.Basic):
            raise _fail(self.text, f"{type(result).__name__} is not a sympy expression")
        return result

    def _value(self, node: ast.AST) -> Any:
        sympy = self.sympy
        if isinstance(node, ast.Expression):
            return self.value(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return sympy.true if node.value else sympy.false
            if isinstance(node.value, int):
                return sympy.Integer(node.value)
            raise _fail(self.text, f"the literal {node.value!r} is not a number")
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                raise _fail(self.text, f"{node.id!r} is not a known function or constant")
            obj = self.names[node.id]
            if not isinstance(obj, sympy.Basic):
                raise _fail(self.text, f"the function {node.id} must be called")
            return obj
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](self.value(node.left), self.value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](self.value(node.operand))
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._relation(node)
        if isinstance(node, ast.Tuple):
            return sympy.Tuple(*(self.value(item) for item in node.elts))
        if isinstance(node, ast.Call):
            return self._call(node)
        raise _fail(self.text, f"{type(node).__name__} is not allowed in an expression")

    def _relation(self, node: ast.Compare) -> Any:
        sympy = self.sympy
        relations: dict[type[ast.cmpop], Any] = {
            ast.Lt: sympy.Lt,
            ast.LtE: sympy.Le,
            ast.Gt: sympy.Gt,
            ast.GtE: sympy.Ge,
            ast.Eq: sympy.Eq,
            ast.NotEq: sympy.Ne,
        }
        relation = relations.get(type(node.ops[0]))
        if relation is None:
            raise _fail(self.text, f"{type(node.ops[0]).__name__} is not a maths comparison")
        return relation(self.value(node.left), self.value(node.comparators[0]))

    def _call(self, node: ast.Call) -> Any:
        sympy = self.sympy
        if not isinstance(node.func, ast.Name):
            if isinstance(node.func, ast.Call) and isinstance(node.func.func, ast.Name):
                unknown = _string_argument(node.func)  # Function('f')(x): f is not ours
                if node.func.func.id == "Function" and unknown is not None:
                    raise _fail(self.text, f"{unknown!r} is not a known maths function")
            raise _fail(self.text, "only plain function calls are allowed")
        if node.keywords:
            raise _fail(self.text, "keyword arguments are not allowed")
        name = node.func.id
        literal = _string_argument(node)
        if name == "Symbol" and literal is not None:
            if not _plain_name(literal):
                raise _fail(self.text, f"{literal!r} is not a plain variable name")
            return sympy.Symbol(literal)
        if name == "Float" and literal is not None:
            if not _DECIMAL.match(literal):
                raise _fail(self.text, f"{literal!r} is not a decimal number")
            return sympy.Float(literal)
        if name not in self.names or isinstance(self.names[name], sympy.Basic):
            raise _fail(self.text, f"{name!r} is not a known maths function")
        return self.names[name](*(self.value(arg) for arg in node.args))


def _plain_name(name: str) -> bool:
    """A variable name: an identifier without ``__`` (never a dunder attribute name)."""
    return name.isidentifier() and "__" not in name


def _string_argument(node: ast.Call) -> str | None:
    """The string of ``f('...')`` (one string literal, nothing else), else None."""
    if len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
        value = node.args[0].value
        if isinstance(value, str):
            return value
    return None


def evaluate_tree(tree: ast.Expression, text: str, local: dict[str, Any]) -> Any:
    """The sympy expression ``tree`` describes (see the module docstring); ``text`` is the
    model's input, for messages."""
    try:
        return _Walk(text, local).value(tree)
    except ToolError:
        raise
    except MemoryError:
        raise  # the child reports it as a memory-limit hit, not as a parse error
    except RecursionError:
        raise _fail(text, "too deeply nested") from None
    except Exception as exc:  # noqa: BLE001 - sympy raises many types on bad input
        raise _fail(text, f"{type(exc).__name__}: {exc}") from None


def parse_expression(text: str, local: dict[str, Any]) -> Any:
    """Parse the model's ``text`` into a sympy expression without evaluating any code.

    sympy's transformations: standard ones, implicit multiplication, ``^`` as power."""
    from sympy.parsing.sympy_parser import (
        convert_xor,
        implicit_multiplication,
        standard_transformations,
        stringify_expr,
    )

    if any(ch in text for ch in "'\"`\\"):
        raise _fail(text, "quotes and backslashes are not allowed")
    transformations = (
        functools.partial(_refuse_unknown_calls, text),
        *standard_transformations,
        implicit_multiplication,
        convert_xor,
    )
    try:
        code = stringify_expr(text, local, _transformation_names(), transformations)
        tree = ast.parse(code, mode="eval")
    except MemoryError:
        raise
    except (SyntaxError, tokenize.TokenError, ValueError, RecursionError) as exc:
        raise _fail(text, str(exc) or type(exc).__name__) from None
    return evaluate_tree(tree, text, local)


def _pick_variable(expr: Any, variable: str | None, local: dict[str, Any]) -> Any:
    """The symbol to act on: the given one, else the expression's only free symbol."""
    if variable:
        return local[variable]
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

    local: dict[str, Any] = {}
    if variable:
        if not _plain_name(variable):
            raise ToolError(f"variable must be a plain name like 'x', got {variable!r}")
        local[variable] = sympy.Symbol(variable)
    sides = _EQUALS.split(expression)
    if len(sides) > 2:
        raise ToolError("at most one '=' is allowed, as in 'x**2 - 4 = 0'")
    if len(sides) == 2 and operation != "solve":
        raise ToolError("'lhs = rhs' equations are only accepted with operation 'solve'")
    parsed = [parse_expression(side.strip(), local) for side in sides]
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
        result = sympy.solve(expr, local[variable]) if variable else sympy.solve(expr)
    elif operation == "diff":
        result = sympy.diff(expr, _pick_variable(expr, variable, local))
    elif operation == "integrate":
        result = sympy.integrate(expr, _pick_variable(expr, variable, local))
    else:  # the schema's enum makes this unreachable through Tool.invoke
        choices = ", ".join(SYMPY_OPERATIONS)
        raise ToolError(f"unknown operation {operation!r}; use one of {choices}")
    return clip_text(str(result))


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
    a CPU-time limit and a memory budget (:class:`ChildLimits`), an empty environment, no
    network and an empty working directory, which stop pathological inputs such as
    ``factorial(10**9)`` or ``2**(2**32)``."""
    limits = ChildLimits(cpu_s=cpu_s, memory_mb=memory_mb, workdir=True, network=False)

    def sympy_tool(
        expression: str, operation: str = "simplify", variable: str | None = None
    ) -> str:
        allowed_names()  # import sympy here so a forked child starts warm
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
    parameters = object_schema(
        {
            "expression": text_parameter(
                "Maths expression, or 'lhs = rhs' equation for solve, e.g. 'x**2 - 4 = 0'."
            ),
            "operation": text_parameter(
                "What to do with the expression (default simplify).",
                enum=list(SYMPY_OPERATIONS),
                default="simplify",
            ),
            "variable": text_parameter(
                "Variable to solve for, differentiate or integrate by, e.g. 'x'. Optional "
                "when the expression has a single variable."
            ),
        },
        ["expression"],
    )
    return Tool("sympy", description, parameters, sympy_tool)


SYMPY: Tool = make_sympy_tool()

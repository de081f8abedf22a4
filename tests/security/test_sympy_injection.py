"""Issue 37, item 1: the sympy tool runs no Python from its input, and its child sees no key.

sympy's ``parse_expr``/``sympify`` evaluate strings as Python with the builtins in reach,
and its printers turn expressions into strings. An expression with no quote and no ``__``
could therefore build a string of code out of printer output (``pycode(os)`` is ``'os'``,
``pycode(Tuple(a, b))`` is ``'(a, b)'``) and hand it to a function that sympifies it: the
tool's own ``simplify``, ``N``, ``expand`` ... Before the fix every payload of
:data:`ATTACKS` marked ``worked_before`` returned the canary key, created the directory or
connected to the listener.

Each payload here does one of three things if it runs: read a canary API key from the
environment into the result, create a directory, or connect to a loopback listener. Each
test asserts an error and none of the three.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mastif.tools.algebra import SYMPY, allowed_names, compute_sympy
from mastif.tools.isolation import ChildLimits, leave_network, run_isolated
from tests.security.payloads import connect, make_directory, read_key

CANARY = "sk-canary-" + secrets.token_hex(8)
KEY_VARIABLES = ("OPENAI_API_KEY", "MASTIF_TEST_SECRET")

# ------------------------------------------------------------------ the attacks


@dataclass(frozen=True)
class Attack:
    id: str
    expression: Callable[[Target], str]
    operation: str = "simplify"
    worked_before: bool = False
    variable: str | None = None


@dataclass(frozen=True)
class Target:
    """Where an attack that ran would leave a trace."""

    directory: Path
    port: int


def _in(sink: str, stage1: Callable[[Target], str]) -> Callable[[Target], str]:
    return lambda t: f"{sink}({stage1(t)})"


_KEY = lambda t: read_key("OPENAI_API_KEY")  # noqa: E731
ATTACKS = [
    # the payload: printer output concatenated, sympified by the simplify operation
    Attack("pycode-simplify-reads-key", _KEY, worked_before=True),
    Attack("second-key-name", lambda t: read_key("MASTIF_TEST_SECRET"), worked_before=True),
    Attack("jscode-printer", lambda t: read_key("OPENAI_API_KEY", "jscode"), worked_before=True),
    Attack("rust-printer", lambda t: read_key("OPENAI_API_KEY", "rust_code"), worked_before=True),
    Attack("julia-printer", lambda t: read_key("OPENAI_API_KEY", "julia_code"), worked_before=True),
    Attack("evaluate-op-N-of-string", _KEY, "evaluate", worked_before=True),
    Attack("expand-op", _KEY, "expand", worked_before=True),
    Attack("factor-op", _KEY, "factor", worked_before=True),
    Attack("N-of-string-inside", _in("N", _KEY), worked_before=True),
    Attack("expand-of-string-inside", _in("expand", _KEY), worked_before=True),
    Attack("Matrix-of-string", _in("Matrix", _KEY)),
    Attack("sympify-of-string", _in("sympify", _KEY)),
    Attack("S-of-string", _in("S", _KEY)),
    Attack("parse_expr-of-string", _in("parse_expr", _KEY)),
    Attack("lambdify-of-string", lambda t: f"lambdify(x,{_KEY(t)})"),
    Attack("Function-named-with-code", _in("Function", _KEY)),
    Attack("Symbol-named-with-code", _in("Symbol", _KEY), "solve", worked_before=True),
    Attack("nsimplify-of-string", _in("nsimplify", _KEY), worked_before=True),
    Attack(
        "makes-a-directory",
        lambda t: make_directory(list(t.directory.parts[1:])),
        worked_before=True,
    ),
    Attack("opens-a-socket", lambda t: connect(t.port), worked_before=True),
    Attack("attribute-access", lambda t: "x.func.func"),
    Attack("lambda-notation", lambda t: "lambda x: x"),
    Attack("dunder-in-variable", lambda t: "x", "diff", variable="__class__"),
    Attack("code-in-variable", lambda t: "x", "diff", variable="x)or(1"),
]


class _Listener:
    """A loopback TCP server that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def target(monkeypatch: pytest.MonkeyPatch) -> Iterator[Target]:
    for name in KEY_VARIABLES:
        monkeypatch.setenv(name, CANARY)
    directory = Path("/tmp") / f"mastif_canary_{secrets.token_hex(6)}"
    listener = _Listener()
    try:
        yield Target(directory, listener.port)
        time.sleep(0.1)  # a connection in flight is accepted before the count is read
        assert listener.accepted == 0, "the payload opened a socket"
    finally:
        listener.close()
        if directory.exists():
            directory.rmdir()
            pytest.fail(f"the payload created {directory}")


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
def test_sympy_payload_is_refused_and_does_nothing(attack: Attack, target: Target) -> None:
    expression = attack.expression(target)
    assert "'" not in expression and '"' not in expression and "__" not in expression
    arguments = {"expression": expression, "operation": attack.operation}
    if attack.variable is not None:
        arguments["variable"] = attack.variable
    result = SYMPY.invoke(arguments)
    assert not result.ok, result.output
    assert CANARY not in (result.error or "") + result.output
    assert not target.directory.exists()


class _UnknownNamesAreSymbols(dict):
    """Locals for reading stage 1 as sympy's parser read it: an unknown name is a Symbol."""

    def __missing__(self, name: str) -> object:
        from sympy import Symbol

        return Symbol(name)


def stage2(stage1: str) -> str:
    """The string stage 1 builds, computed here with sympy's printers (only stage 1, which
    this test wrote, is evaluated; stage 2 is just compared), without the trailing commas
    of one-element tuples (``f(a,)`` is ``f(a)``)."""
    import sympy

    names = {n: getattr(sympy, n) for n in ("pycode", "jscode", "rust_code", "julia_code",
                                            "Tuple", "Symbol")}  # fmt: skip
    code = eval(stage1, {"__builtins__": {}}, _UnknownNamesAreSymbols(names))  # noqa: S307
    return code.replace(",)", ")")


def test_the_payloads_build_the_code_they_claim() -> None:
    # the attacks are real: their stage 1 builds a string of working code
    get = "getattr(getattr(__import__(repr(os)), repr(environ)), repr(get))"
    assert stage2(read_key("OPENAI_API_KEY")) == f"Symbol({get}(repr(OPENAI_API_KEY)))"
    assert stage2(read_key("K", "jscode")) == f"Symbol({get}(repr(K)))"
    mkdir = "getattr(__import__(repr(os)), repr(mkdir))"
    join = "getattr(getattr(__import__(repr(os)), repr(path)), repr(join))"
    assert stage2(make_directory(["tmp", "d"])) == f"{mkdir}({join}(chr(47), repr(tmp), repr(d)))"
    create = "getattr(__import__(repr(socket)), repr(create_connection))"
    assert stage2(connect(80)) == f"{create}((repr(localhost), repr(80)))"


def test_typical_maths_still_works() -> None:
    cases = {
        ("x**2 - 4 = 0", "solve"): "[-2, 2]",
        ("2x^2 + 3x", "factor"): "x*(2*x + 3)",
        ("sin(x)^2 + cos(x)^2", "simplify"): "1",
        ("integrate(x, (x, 0, 1))", "simplify"): "1/2",
        ("summation(k, (k, 1, 10))", "simplify"): "55",
        ("0.[3]", "simplify"): "1/3",
        ("5!", "evaluate"): "120.000000000000",
        ("max(2, 3) + abs(-4)", "evaluate"): "7.00000000000000",
        ("N(pi, 20)", "simplify"): "3.1415926535897932385",
        ("x < 3", "simplify"): "x < 3",
        ("x == 3", "simplify"): "Eq(x, 3)",
        ("α^2", "diff"): "2*α",
        ("max(2, 3)", "evaluate"): "3.00000000000000",
        ("sqrt(2)", "evaluate"): "1.41421356237310",
        ("exp(-x**2)", "integrate"): "sqrt(pi)*erf(x)/2",
        ("log(x)", "diff"): "1/x",
        ("Abs(x)", "simplify"): "Abs(x)",
        ("2(x+1)", "expand"): "2*x + 2",
        ("(x+1)(x-1)", "expand"): "x**2 - 1",
        ("sin(x)cos(x)", "simplify"): "sin(2*x)/2",
        # a constant before a parenthesis is a product, as a number is
        ("pi(r+1)", "expand"): "pi*r + pi",
        # names that are not called are plain variables, whatever they are called
        ("rate*time", "simplify"): "rate*time",
        ("eval + 1", "simplify"): "eval + 1",
    }
    for (expression, operation), expected in cases.items():
        assert compute_sympy(expression, operation, None) == expected, expression
    # the caller's variable before a parenthesis is a product: the caller said it is one
    assert compute_sympy("x(y+1)", "expand", "x") == "x*y + x"
    assert compute_sympy("2x(x+1)", "factor", "x") == "2*x*(x + 1)"
    assert compute_sympy("x(x-2) = 0", "solve", "x") == "[0, 2]"


#: A name outside the allowlist written as a call, and the variable passed. Before the fix
#: sympy made the name a Symbol and the call a product and the tool answered with success:
#: ``isprime(7)`` was ``7*isprime``, ``eval(x)`` ``eval*x`` (issue 49).
UNKNOWN_CALLS = [
    ("isprime(7)", "isprime", None),
    ("eval(x)", "eval", None),
    ("factorint(12)", "factorint", None),
    ("print(x)", "print", None),
    ("open(x)", "open", None),
    ("exec(x)", "exec", None),
    ("nextprime (7)", "nextprime", None),
    ("sin(x) + isprime(x)", "isprime", "x"),
    ("2*divisors(x)^2", "divisors", "x"),
    ("f(x)", "f", "x"),  # one letter before ( that is not the caller's variable
    ("x(y+1)", "x", None),
    ("2x(x+1)", "x", "y"),
]


@pytest.mark.parametrize(("expression", "name", "variable"), UNKNOWN_CALLS)
def test_a_call_of_a_name_outside_the_allowlist_is_refused_by_name(
    expression: str, name: str, variable: str | None
) -> None:
    for operation in ("simplify", "diff"):
        arguments = {"expression": expression, "operation": operation}
        if variable is not None:
            arguments["variable"] = variable
        result = SYMPY.invoke(arguments)
        assert not result.ok, result.output
        assert result.output == ""
        assert f"'{name}' is not a known maths function" in (result.error or ""), result.error
        if len(name) == 1:
            assert f"write {name}*(...) for a product" in (result.error or ""), result.error


def test_the_namespace_holds_no_printer_parser_or_string_function() -> None:
    import sympy

    names = allowed_names()
    for name in ("sympify", "S", "parse_expr", "lambdify", "pycode", "srepr", "latex",
                 "Symbol", "Function", "Float", "Lambda", "Matrix", "symbols", "var",
                 "nsimplify", "preview", "plot", "python", "jscode"):  # fmt: skip
        assert name not in names, name
    for name, obj in names.items():
        module = getattr(obj, "__module__", "") or type(obj).__module__
        assert not module.startswith(
            (
                "sympy.printing",
                "sympy.parsing",
                "sympy.utilities",
                "sympy.plotting",
                "sympy.interactive",
                "builtins",
            )  # fmt: skip
        ), (name, module)
        assert isinstance(obj, sympy.Basic) or callable(obj), name


# ------------------------------------------------------------------ the child itself


def _environment() -> str:
    return json.dumps(dict(os.environ))


def _leave_network() -> str:
    return leave_network()


def _raw_connect(port: int) -> str:
    """Connect to ``port`` on loopback with a raw socket; say from which network namespace."""
    import _socket  # below Python's socket module, which the child's own block patches

    namespace = os.readlink("/proc/self/ns/net")
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        sock.settimeout(2)
        sock.connect(("127.0.0.1", port))
    except OSError as exc:
        return f"{namespace} refused ({exc})"
    finally:
        sock.close()
    return f"{namespace} connected"


@pytest.mark.parametrize("limits", [None, ChildLimits(), ChildLimits(network=True)])
def test_every_child_starts_with_an_empty_environment(monkeypatch, limits) -> None:
    # python_repl, sympy and pdf_reader all run through run_isolated; before the fix the
    # child inherited the whole environment of the harness, keys included
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert run_isolated(_environment, (), 10, limits) == "{}"


#: run in a Python started with the canary in its environment: what a child can read of
#: the environment block the process was started with
_PROC_ENVIRON_CHILD = """
from mastif.tools.isolation import ChildLimits, run_isolated

def read():
    with open("/proc/self/environ", "rb") as f:
        return f.read().decode("latin-1")

print(run_isolated(read, (), 10, ChildLimits()))
"""


def test_a_child_cannot_read_the_harness_environment_from_proc(tmp_path) -> None:
    # os.environ.clear() empties environ, but /proc/self/environ shows the block the
    # process started with, which a fork child inherits: before, the canary was there
    env = {"PATH": os.environ["PATH"], "OPENAI_API_KEY": CANARY}
    shown = subprocess.run(
        [sys.executable, "-c", _PROC_ENVIRON_CHILD],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert CANARY not in shown and "PATH=" not in shown, shown[:200]


def test_a_child_without_network_cannot_connect_even_with_a_raw_socket() -> None:
    # before the fix only Python's socket functions were replaced: a raw _socket reached
    # loopback (as the sympy payload did)
    listener = _Listener()
    try:
        granted = run_isolated(_leave_network, (), 10, ChildLimits(network=True))
        if granted == "none":
            pytest.skip("this kernel grants no network namespace; only the in-process block")
        outcome = run_isolated(_raw_connect, (listener.port,), 10, ChildLimits(network=False))
        assert not outcome.startswith(os.readlink("/proc/self/ns/net")), outcome
        assert outcome.endswith("refused ([Errno 101] Network is unreachable)"), outcome
        time.sleep(0.1)
        assert listener.accepted == 0
        # the same child with network allowed does connect: the test can see a connection
        allowed = run_isolated(_raw_connect, (listener.port,), 10, ChildLimits(network=True))
        assert allowed.endswith("connected"), allowed
    finally:
        listener.close()

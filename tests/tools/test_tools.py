"""Real (unmocked) tests of the built-in tools, the registry and the shared invoke contract."""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import time
from pathlib import Path

import pytest

from mastif.tools import REGISTRY, Tool, ToolResult, get_tools
from mastif.tools.base import ToolError
from mastif.tools.builtin import (
    DATETIME,
    JSON_PARSER,
    PYTHON_REPL,
    SYMPY,
    ChildLimits,
    make_datetime_tool,
    make_python_repl_tool,
    parse_json_path,
    run_isolated,
)


def _ok(result: ToolResult) -> str:
    assert result.ok, result.error
    assert result.error is None
    return result.output


def _fails(result: ToolResult, *fragments: str) -> str:
    assert not result.ok, f"expected failure, got output {result.output!r}"
    assert result.error
    for fragment in fragments:
        assert fragment in result.error, (fragment, result.error)
    return result.error


# ---------------------------------------------------------------- python_repl


def test_repl_captures_prints_and_last_expression() -> None:
    out = _ok(PYTHON_REPL.invoke({"code": "x = 6 * 7\nprint('answer', x)\nx + 1"}))
    assert out.splitlines() == ["answer 42", "43"]


def test_repl_arithmetic_loops_and_safe_imports() -> None:
    code = (
        "import math, statistics\n"
        "from collections import Counter\n"
        "total = 0\n"
        "for i in range(1, 11):\n"
        "    total += i\n"
        "print(total, math.factorial(5), statistics.mean([1, 2, 3, 6]))\n"
        "print(Counter('abca').most_common(1))\n"
        "a, b = divmod(17, 5)\n"
        "[a, b, sum(x * x for x in range(4))]"
    )
    assert _ok(PYTHON_REPL.invoke({"code": code})).splitlines() == [
        "55 120 3",
        "[('a', 2)]",
        "[3, 2, 14]",
    ]


def test_repl_prints_inside_functions_keep_order() -> None:
    code = "def f(n):\n    print('in f', n)\nprint('start')\nf(1)\nprint('end')"
    assert _ok(PYTHON_REPL.invoke({"code": code})).splitlines() == ["start", "in f 1", "end"]


def test_repl_own_classes_are_writable() -> None:
    code = "class C:\n    def __init__(self):\n        self.v = 2\nc = C()\nc.v = c.v * 21\nc.v"
    assert _ok(PYTHON_REPL.invoke({"code": code})) == "42"


def test_repl_no_output_is_explicit() -> None:
    assert _ok(PYTHON_REPL.invoke({"code": "y = 1"})) == "(no output)"


def test_repl_blocks_import_os() -> None:
    _fails(PYTHON_REPL.invoke({"code": "import os\nprint(os.getcwd())"}), "ImportError", "'os'")


def test_repl_blocks_submodule_leak_through_safe_module() -> None:
    # json imports codecs, whose open() reads files; the sandboxed module must not expose it
    code = "import json\njson.codecs.open('/etc/hostname').read()"
    _fails(PYTHON_REPL.invoke({"code": code}), "AttributeError", "no attribute 'codecs'")


def test_repl_blocks_open() -> None:
    _fails(PYTHON_REPL.invoke({"code": "open('/etc/passwd').read()"}), "open")


def test_repl_blocks_dunder_escape() -> None:
    _fails(PYTHON_REPL.invoke({"code": "().__class__.__bases__[0].__subclasses__()"}), "sandbox")


def test_repl_runtime_error_reports_type_and_line() -> None:
    code = "print('before')\nb = 1 / 0"
    _fails(PYTHON_REPL.invoke({"code": code}), "ZeroDivisionError", "line 2", "before")


def test_repl_syntax_error() -> None:
    _fails(PYTHON_REPL.invoke({"code": "def f(:\n  pass"}), "SyntaxError", "line 1")


@pytest.mark.parametrize("module", ["os", "subprocess", "socket", "shutil", "ctypes"])
def test_repl_blocks_system_modules(module: str) -> None:
    _fails(PYTHON_REPL.invoke({"code": f"import {module}"}), "ImportError", repr(module))


def test_repl_memory_bomb_fails_and_leaves_the_run_alive() -> None:
    result = PYTHON_REPL.invoke({"code": "x = [0] * (10**9)\nprint(len(x))"})
    _fails(result, "MemoryError")
    assert PYTHON_REPL.invoke({"code": "print(2 + 2)"}).output == "4"  # still works after


def test_child_limits_cpu_workdir_and_network() -> None:
    # the OS limits hold even for code outside RestrictedPython (the child's own work)
    with pytest.raises(ToolError, match="CPU time limit of 1s exceeded"):
        run_isolated(_spin, (), timeout_s=30, limits=ChildLimits(cpu_s=1))
    cwd = run_isolated(_write_here_and_report_cwd, (), 10, ChildLimits())
    assert cwd.startswith(tempfile.gettempdir()) and "mastif-tool-" in cwd
    assert not Path(cwd).exists()  # the throw-away directory, and what was written, are gone
    with pytest.raises(ToolError, match="PermissionError: network access is disabled"):
        run_isolated(_connect, (), 10, ChildLimits())


def _spin() -> str:
    while True:
        pass


def _write_here_and_report_cwd() -> str:
    Path("scratch.txt").write_text("ok")  # allowed: its own throw-away directory
    return os.getcwd()


def _connect() -> str:
    import socket

    socket.create_connection(("127.0.0.1", 9))
    return "connected"


def test_repl_file_write_outside_is_blocked(tmp_path) -> None:
    target = tmp_path / "evil.txt"
    code = f"f = open({str(target)!r}, 'w')\nf.write('x')"
    _fails(PYTHON_REPL.invoke({"code": code}), "open")
    assert not target.exists()


def test_repl_infinite_loop_times_out() -> None:
    tool = make_python_repl_tool(timeout_s=1.0)
    start = time.monotonic()
    result = tool.invoke({"code": "while True:\n    pass"})
    elapsed = time.monotonic() - start
    _fails(result, "timed out after 1s")
    assert elapsed < 3.0
    assert "1 seconds" in tool.description


# ---------------------------------------------------------------- sympy


def test_sympy_solve_equation() -> None:
    out = _ok(SYMPY.invoke({"expression": "x**2 - 4 = 0", "operation": "solve"}))
    assert out == "[-2, 2]"


def test_sympy_solve_for_named_variable_with_implicit_multiplication() -> None:
    out = _ok(SYMPY.invoke({"expression": "2a + b = 10", "operation": "solve", "variable": "a"}))
    assert out == "[5 - b/2]"


def test_sympy_solve_inequality() -> None:
    out = _ok(SYMPY.invoke({"expression": "2*x < 6", "operation": "solve"}))
    assert out == "(-oo < x) & (x < 3)"


def test_sympy_diff_integrate_expand_factor_evaluate() -> None:
    assert _ok(SYMPY.invoke({"expression": "x^3 + sin(x)", "operation": "diff"})) == (
        "3*x**2 + cos(x)"
    )
    assert _ok(SYMPY.invoke({"expression": "2*x", "operation": "integrate"})) == "x**2"
    assert _ok(SYMPY.invoke({"expression": "(x + 1)**2", "operation": "expand"})) == (
        "x**2 + 2*x + 1"
    )
    assert _ok(SYMPY.invoke({"expression": "x**2 - 1", "operation": "factor"})) == (
        "(x - 1)*(x + 1)"
    )
    assert _ok(SYMPY.invoke({"expression": "sqrt(2)", "operation": "evaluate"})).startswith(
        "1.41421356"
    )
    assert _ok(SYMPY.invoke({"expression": "sin(x)**2 + cos(x)**2"})) == "1"


def test_sympy_diff_needs_variable_when_ambiguous() -> None:
    _fails(SYMPY.invoke({"expression": "x*y", "operation": "diff"}), "variable")
    assert _ok(SYMPY.invoke({"expression": "x*y", "operation": "diff", "variable": "y"})) == "x"


def test_sympy_bad_expression_fails() -> None:
    _fails(SYMPY.invoke({"expression": "x +* (", "operation": "simplify"}), "could not parse")


def test_sympy_refuses_code_injection() -> None:
    _fails(SYMPY.invoke({"expression": "__import__('os').system('true')"}), "could not parse")
    _fails(SYMPY.invoke({"expression": "x.func"}), "could not parse")


# ---------------------------------------------------------------- datetime


def test_datetime_utc_is_now() -> None:
    out = _ok(DATETIME.invoke({}))
    stamp, rest = out.split(" ", 1)
    parsed = dt.datetime.fromisoformat(stamp)
    assert parsed.utcoffset() == dt.timedelta(0)
    assert abs((dt.datetime.now(dt.UTC) - parsed).total_seconds()) < 5
    assert rest == f"({parsed:%A}, UTC)"


def test_datetime_fixed_clock_timezone_and_format() -> None:
    fixed = make_datetime_tool(clock=lambda tz: dt.datetime(2024, 2, 29, 12, 0, tzinfo=tz))
    assert _ok(fixed.invoke({"format": "%Y-%m-%d %A"})) == "2024-02-29 Thursday"
    tokyo = _ok(DATETIME.invoke({"timezone": "Asia/Tokyo"}))
    assert "+09:00" in tokyo


def test_datetime_unknown_timezone_fails() -> None:
    _fails(DATETIME.invoke({"timezone": "Mars/Olympus_Mons"}), "unknown timezone")


# ---------------------------------------------------------------- json_parser

DOC = json.dumps({"items": [{"name": "apple", "qty": 3}, {"name": "pear"}], "a": {"b": [7, 8, 9]}})


def test_json_parser_paths() -> None:
    assert _ok(JSON_PARSER.invoke({"json_string": DOC, "query": "items[0].name"})) == '"apple"'
    assert _ok(JSON_PARSER.invoke({"json_string": DOC, "query": "a.b.2"})) == "9"
    assert _ok(JSON_PARSER.invoke({"json_string": DOC, "query": "$.items[-1]"})) == (
        '{\n  "name": "pear"\n}'
    )
    assert parse_json_path('x["odd.key"][3].y') == ["x", "odd.key", 3, "y"]


def test_json_parser_empty_query_pretty_prints() -> None:
    out = _ok(JSON_PARSER.invoke({"json_string": '{"k":[1,2]}'}))
    assert out == '{\n  "k": [\n    1,\n    2\n  ]\n}'


def test_json_parser_invalid_json() -> None:
    _fails(JSON_PARSER.invoke({"json_string": "{'single': quotes}"}), "invalid JSON", "line 1")


def test_json_parser_missing_key_and_index() -> None:
    _fails(JSON_PARSER.invoke({"json_string": DOC, "query": "items[0].colour"}), "'colour'", "qty")
    _fails(JSON_PARSER.invoke({"json_string": DOC, "query": "items[5]"}), "out of range")


# ---------------------------------------------------------------- schema validation


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (PYTHON_REPL, {"code": "1", "extra": True}),  # unknown argument
        (PYTHON_REPL, {}),  # missing required argument
        (PYTHON_REPL, {"code": 42}),  # wrong type
        (SYMPY, {"expression": "x", "operation": "transmogrify"}),  # not in enum
        (JSON_PARSER, {"query": "a"}),
        (DATETIME, {"timezone": 3}),
    ],
)
def test_invalid_arguments_are_rejected(tool: Tool, arguments: dict[str, object]) -> None:
    _fails(tool.invoke(arguments), f"invalid arguments for {tool.name}")


def test_non_dict_arguments_fail_without_raising() -> None:
    _fails(PYTHON_REPL.invoke("print(1)"), "JSON object")  # type: ignore[arg-type]


# ---------------------------------------------------------------- registry and schemas


def test_registry_and_get_tools() -> None:
    assert set(REGISTRY) == {"python_repl", "sympy", "datetime", "json_parser"}
    assert [t.name for t in get_tools(["sympy", "datetime"])] == ["sympy", "datetime"]


def test_get_tools_unknown_name() -> None:
    with pytest.raises(KeyError) as info:
        get_tools(["python_repl", "web_search"])
    message = str(info.value)
    assert "web_search" in message
    for name in REGISTRY:
        assert name in message


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_descriptions_and_openai_schema(name: str) -> None:
    tool = REGISTRY[name]
    assert tool.description.startswith("Use this tool when")
    assert "Do NOT" in tool.description
    schema = tool.openai_schema()
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == name
    assert function["description"] == tool.description
    params = function["parameters"]
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert set(params["required"]) <= set(params["properties"])
    for prop in params["properties"].values():
        assert prop["type"] == "string"
        assert prop["description"]
    json.dumps(schema)  # must be wire-serialisable


def test_null_optional_argument_means_not_given() -> None:
    from mastif.tools import get_tools

    (tool,) = get_tools(["json_parser"])
    result = tool.invoke({"json_string": '{"a": 1}', "query": None})
    assert result.ok, result.error
    missing = tool.invoke({"json_string": None})
    assert not missing.ok and "invalid arguments" in missing.error

"""Issue 18, items 7, 12, 13, 14: URL policy IPv6 ranges, python_repl and the sandbox app."""

from __future__ import annotations

import resource
import tempfile

import pytest

from mastif.tools.base import ToolError
from mastif.tools.builtin import (
    MAX_OUTPUT_CHARS,
    PYTHON_REPL,
    ChildLimits,
    make_python_repl_tool,
    run_isolated,
)
from mastif.tools.netpolicy import check_url


# Item 12. Before the fix each of these passed check_url as public (no ToolError raised).
@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
        "http://[64:ff9b:1::a00:1]/",  # local-use NAT64
        "http://[2002:7f00:1::1]/",  # 6to4 of 127.0.0.1
        "http://[2002:808:808::1]/",  # 6to4, even of a public address
        "http://[::7f00:1]/",  # IPv4-compatible ::127.0.0.1
        "http://[::10.0.0.1]/",
        "http://[fec0::1]/",  # site-local
    ],
)
def test_ipv6_special_ranges_are_refused(url):
    with pytest.raises(ToolError, match="refused"):
        check_url(url)


def test_ordinary_public_ipv6_still_allowed():
    assert check_url("http://[2001:4860:4860::8888]/") == ["2001:4860:4860::8888"]


# --------------------------------------------------------------------------- python_repl


def test_repl_timeout_removes_its_temporary_directory(tmp_path, monkeypatch):
    # Before the fix the child made the directory and the parent's kill skipped the
    # child's cleanup: a ``mastif-tool-*`` directory was left in tmp_path.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    repl = make_python_repl_tool(timeout_s=1.0)
    result = repl.invoke({"code": "while True:\n    pass"})
    assert not result.ok and "timed out" in result.error
    assert list(tmp_path.glob("mastif-tool-*")) == []


def test_repl_exception_text_is_cut_in_the_child():
    # Before the fix the whole 60 MB message reached the parent (and the trace): the
    # error was 60_000_012 characters long and the parent's peak RSS grew by ~180 MB.
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = PYTHON_REPL.invoke({"code": "raise ValueError('x' * 60_000_000)"})
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert not result.ok and result.error.startswith("ValueError: xxx")
    assert len(result.error) <= 2 * MAX_OUTPUT_CHARS + 1024
    assert "truncated" in result.error
    assert grown_mb < 20, f"parent peak RSS grew {grown_mb:.0f} MB"


def _huge_reply() -> str:
    return "y" * 5_000_000


def test_child_reply_is_capped_before_the_parent_reads_it():
    # Before the fix run_isolated returned all 5_000_000 characters.
    text = run_isolated(_huge_reply, (), 10, ChildLimits())
    assert len(text) <= 2 * MAX_OUTPUT_CHARS + 1024 + 100

"""Issue 18, items 7, 12, 13, 14: URL policy IPv6 ranges, python_repl and the sandbox app."""

from __future__ import annotations

import tempfile

import pytest

from mastif.tools.base import ToolError
from mastif.tools.builtin import (
    make_python_repl_tool,
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

"""Issue 18, items 7, 12, 13, 14: URL policy IPv6 ranges, python_repl and the sandbox app."""

from __future__ import annotations

import resource
import tempfile

import httpx
import pytest

from mastif.core.textclip import MAX_TEXT_CHARS
from mastif.tools import isolation
from mastif.tools.base import ToolError
from mastif.tools.builtin import (
    PYTHON_REPL,
    ChildLimits,
    make_python_repl_tool,
    run_isolated,
)
from mastif.tools.netpolicy import check_url
from mastif.web.server import SandboxServer
from mastif.web.store import SessionStore


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
    assert len(result.error) <= 2 * MAX_TEXT_CHARS + 1024
    assert "truncated" in result.error
    assert grown_mb < 20, f"parent peak RSS grew {grown_mb:.0f} MB"


def _huge_reply() -> str:
    return "y" * 5_000_000


def test_child_reply_is_capped_before_the_parent_reads_it():
    # Before the fix run_isolated returned all 5_000_000 characters.
    text = run_isolated(_huge_reply, (), 10, ChildLimits())
    assert len(text) <= 2 * MAX_TEXT_CHARS + 1024 + 100


# --------------------------------------------------------------------------- sandbox app


@pytest.fixture(scope="module")
def sandbox():
    with SandboxServer() as srv:
        yield srv


def test_session_store_is_bounded(sandbox):
    # Before the fix every cookie-less request added a session for good (4,000 requests:
    # 4,000 sessions); here 1,100 requests left 1,100 + the earlier ones.
    store = sandbox.store
    with httpx.Client(base_url=sandbox.base_url, trust_env=False, timeout=10) as http:
        for _ in range(store.max_sessions + 100):
            http.cookies.clear()
            assert http.get("/shop/deals").status_code == 200
    assert len(store.sessions()) <= store.max_sessions


def test_store_keeps_the_recently_used_session():
    store = SessionStore(max_sessions=3)
    mine = store.new_session()
    for _ in range(10):
        store.new_session()
        store.ensure(mine)  # a run touches its session on every request
    assert mine in store and len(store.sessions()) == 3


def test_oversized_body_is_refused_with_413(sandbox):
    # Before the fix a 32 MB urlencoded body was read whole (+86 MB) and answered 200/400.
    big = b"coupon=" + b"A" * (1024 * 1024)  # 1 MiB, above the 64 KiB cap
    with httpx.Client(base_url=sandbox.base_url, trust_env=False, timeout=10) as http:
        declared = http.post(
            "/shop/cart/coupon",
            content=big,
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert declared.status_code == 413

        def chunks():  # no Content-Length: counted as it streams
            for i in range(0, len(big), 8192):
                yield big[i : i + 8192]

        streamed = http.post(
            "/shop/cart/coupon",
            content=chunks(),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert streamed.status_code == 413
        assert "larger than" in streamed.text
        small = http.post("/shop/cart/coupon", data={"code": "NOPE"})
        assert small.status_code < 413


def test_parent_refuses_an_oversized_reply_unread(monkeypatch):
    # A child whose own cut is bypassed (here: _truncate made a no-op, inherited at fork)
    # still cannot push more than _REPLY_CAP_BYTES into the parent. Before the fix the
    # parent unpickled all 5_000_000 characters.
    monkeypatch.setattr(isolation, "clip_text", lambda text, limit=0: text)
    with pytest.raises(ToolError, match="exceeds .* bytes; not read"):
        run_isolated(_huge_reply, (), 10, ChildLimits())

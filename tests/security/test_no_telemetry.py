"""No framework's telemetry leaves the machine: every connection a run attempts, in any
thread and at exit, goes to loopback (the model endpoint, the gateway, the protocol
servers), with the environment set to invite telemetry (tests/support/outbound_probe.py)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from mastif.frameworks import FRAMEWORKS
from tests.support.paths import REPO

pytestmark = pytest.mark.slow

LOOPBACK_HOSTS = {"127.0.0.1", "::1", "localhost"}


def is_loopback(kind: str, where: str) -> bool:
    value = ast.literal_eval(where)
    if kind == "getaddrinfo":
        host = value.decode() if isinstance(value, bytes) else value
        return host in LOOPBACK_HOSTS
    if isinstance(value, str | bytes):  # an AF_UNIX path: this machine
        return True
    return value[0] in LOOPBACK_HOSTS


# in each framework's own environment (tests/conftest.py), where its runs are made in the
# probe's process
@pytest.mark.timeout(600)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_no_framework_connects_anywhere_but_loopback(framework, tmp_path):
    out = tmp_path / "outbound.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.outbound_probe", str(out), framework],
        cwd=REPO, capture_output=True, text=True, timeout=580,
    )  # fmt: skip
    assert out.exists(), proc.stderr[-3000:]
    record = json.loads(out.read_text())
    failed = [r for r in record["runs"] if r["status"] != "ok"]
    assert not failed, failed
    assert len(record["runs"]) == 3
    # the tool call happened in every run: the framework really ran its loop
    assert all(r["tool_calls"] >= 1 for r in record["runs"]), record["runs"]
    outside = sorted({(k, w) for k, w in record["events"] if not is_loopback(k, w)})
    assert not outside, f"connections beyond loopback: {outside}"
    assert any(k == "connect" for k, _ in record["events"])  # the hook saw the runs' traffic

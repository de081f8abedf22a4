"""Run stacks in this process and record every network connection it attempts.

``python -m tests.support.outbound_probe OUT.json framework [framework ...]`` runs each
framework under every protocol on one built-in task against a scripted model on loopback,
with a CPython audit hook (``sys.addaudithook``) that sees every ``socket.connect`` and
``socket.getaddrinfo`` of every thread, also those of exit handlers (a telemetry client's
last flush), and writes them with the runs' statuses to ``OUT.json`` as the interpreter
exits. It is a script, not a test: the hook cannot be removed again, so it gets a process
of its own (tests/security/test_no_telemetry.py).

The environment is set to *invite* telemetry (keys and switches that turn it on where an
adapter leaves the framework's default), so the probe fails unless the adapters switch it
off themselves.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from typing import Any

#: variables that would turn telemetry or trace export on if an adapter left it to them
INVITATIONS = {
    "HAYSTACK_TELEMETRY_ENABLED": "True",
    "OPENAI_API_KEY": "sk-probe-not-a-real-key",  # the Agents SDK exports traces with it
    "OPENAI_AGENTS_DISABLE_TRACING": "0",
    "ENABLE_OTEL": "true",
    "ENABLE_INSTRUMENTATION": "true",
    "ENABLE_SENSITIVE_DATA": "true",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://telemetry.invalid:4318",
    "OTEL_SDK_DISABLED": "false",
    "CREWAI_DISABLE_TELEMETRY": "false",
    "ANONYMIZED_TELEMETRY": "true",
}

_events: list[tuple[str, str]] = []
PROTOCOLS = ("standard", "mcp", "a2a")


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        _events.append(("connect", repr(args[1])))
    elif event == "socket.getaddrinfo":
        _events.append(("getaddrinfo", repr(args[0])))


def main(out: str, frameworks: list[str]) -> None:
    runs: list[dict[str, Any]] = []

    def write() -> None:  # registered first: runs after every other exit handler
        with open(out, "w") as fh:
            json.dump({"events": _events, "runs": runs}, fh)

    atexit.register(write)
    os.environ.update(INVITATIONS)
    sys.addaudithook(_audit)

    import copy
    import tempfile
    from pathlib import Path

    import yaml

    from tests.support.fakes import ScriptedChatServer, opens_interaction_round
    from tests.support.paths import REPO
    from tests.support.stackrun import run_stack

    def respond(payload: dict[str, Any]) -> dict[str, Any]:
        if opens_interaction_round(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    with ScriptedChatServer(respond) as srv, tempfile.TemporaryDirectory() as tmp:
        for framework in frameworks:
            for protocol in PROTOCOLS:
                cfg = copy.deepcopy(base)
                cfg["models"]["fake"] = {"provider": "openai_compatible", "model": "fake-model",
                                         "base_url": srv.base_url}  # fmt: skip
                cfg["agent_models"], cfg["tools"] = ["fake"], ["datetime"]
                cfg["protocols"], cfg["frameworks"] = [protocol], [framework]
                cfg["generation"].update(max_steps=1, max_tool_rounds=1)
                cfg["execution"] = {"concurrency": 1, "provider_retries": 1}
                work = Path(tmp) / f"{framework}-{protocol}"
                (trace,) = run_stack(cfg, work)
                runs.append({"framework": framework, "protocol": protocol,
                             "status": trace.status, "error": trace.error_message,
                             "tool_calls": len(trace.tool_calls)})  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

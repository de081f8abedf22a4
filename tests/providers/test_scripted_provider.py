"""provider: scripted (a scripted model for smoke tests) and the jobs' log set-up."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from mastif.core.config import ConfigError
from mastif.execution.experiment import parse_config
from mastif.providers.scripted import NODE_HEADER, ScriptedServer, ScriptError, load_script
from tests.support.paths import REPO

SCRIPT = {
    "rules": [
        {"when": {"node": "judge", "json": True}, "reply": {"content": {"TU_score": 1.0}}},
        {
            "when": {"node": "interact", "tool_result": False, "tools": True},
            "reply": {"tool_calls": [{"name": "sympy", "arguments": {"expression": "1+1"}}]},
        },
        {"when": {"user": "(?i)round \\d"}, "reply": {"content": "round text"}},
        {"when": {"system": "^Be brief"}, "reply": {"content": "brief"}},
    ]
}


def write(tmp_path: Path, script: dict[str, Any]) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(script))
    return path


def chat(server: ScriptedServer, node: str | None, **request: Any) -> httpx.Response:
    headers = {NODE_HEADER: node} if node else {}
    return httpx.post(f"{server.base_url}/chat/completions", json=request, headers=headers)


def test_the_first_matching_rule_answers_and_every_request_is_logged(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with ScriptedServer(write(tmp_path, SCRIPT), log) as server:
        assert httpx.get(f"{server.base_url}/models").status_code == 200
        judge = chat(server, "judge", messages=[{"role": "user", "content": "x"}],
                     response_format={"type": "json_object"})  # fmt: skip
        assert judge.json()["choices"][0]["message"]["content"] == '{"TU_score": 1.0}'
        usage = judge.json()["usage"]
        assert usage["prompt_tokens"] >= 1 and usage["completion_tokens"] >= 1
        user = [{"role": "user", "content": "interaction round 1"}]
        tools = [{"type": "function", "function": {"name": "sympy", "parameters": {}}}]
        call = chat(server, "interact", messages=user, tools=tools).json()["choices"][0]
        assert call["finish_reason"] == "tool_calls"
        assert call["message"]["tool_calls"][0]["function"] == {
            "name": "sympy", "arguments": '{"expression": "1+1"}'
        }  # fmt: skip
        # after the tool result the tool rule no longer holds: the next matching one answers
        after = [*user, call["message"], {"role": "tool", "tool_call_id": "c", "content": "2"}]
        reply = chat(server, "interact", messages=after, tools=tools).json()["choices"][0]
        assert reply["message"]["content"] == "round text"
        brief = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
        assert chat(server, None, messages=brief).json()["choices"][0]["message"]["content"] == (
            "brief"
        )
        nothing = chat(server, "report", messages=[{"role": "user", "content": "hi"}])
        assert nothing.status_code == 400 and "no rule" in nothing.json()["error"]["message"]
    lines = log.read_text().splitlines()
    assert sum(" node=" in line for line in lines) == 5 and "no rule matches" in lines[-2]
    assert lines[-1].endswith("stopped")


def test_latency_s_delays_every_answer_concurrently(tmp_path: Path) -> None:
    script = {"rules": [{"reply": {"content": "x"}}], "latency_s": 0.4}
    with ScriptedServer(write(tmp_path, script), tmp_path / "server.log") as server:
        start = time.perf_counter()
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(lambda _: chat(server, "observe", messages=[]), range(3)))
        elapsed = time.perf_counter() - start
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert 0.4 <= elapsed < 1.2  # each waited 0.4 s, side by side (one after another: 1.2 s)


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ({"rules": []}, "non-empty list 'rules'"),
        ({"rules": [{"reply": {"content": "x"}}], "extra": 1}, "unknown key"),
        ({"rules": [{"when": {"user": "("}, "reply": {"content": "x"}}]}, "rules.0.when.user"),
        ({"rules": [{"when": {"colour": "red"}, "reply": {"content": "x"}}]}, "rules.0.when"),
        ({"rules": [{"reply": {"content": "x"}}, {"reply": {}}]}, "rules.1.reply"),
        ({"rules": [{"when": {"json": "yes"}, "reply": {"content": "x"}}]}, "true or false"),
        ({"rules": [{"reply": {"content": "x"}}], "latency_s": -1}, "latency_s must be"),
        ({"rules": [{"reply": {"content": "x"}}], "latency_s": float("nan")}, "latency_s must"),
    ],
)
def test_a_malformed_script_is_refused_naming_the_place(
    tmp_path: Path, script: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScriptError, match=message.replace("(", r"\(")):
        load_script(write(tmp_path, script))


def test_config_checks_a_scripted_models_script(base_config: dict[str, Any], tmp_path: Path):
    script = tmp_path / "script.yaml"
    base_config["models"]["s"] = {"provider": "scripted", "model": str(script)}
    base_config["agent_models"] = ["s"]
    repo = REPO
    with pytest.raises(ConfigError, match="models.s.model: script file not found"):
        parse_config(base_config, base_dir=repo)
    write(tmp_path, {"rules": [{"reply": {}}]})
    with pytest.raises(ConfigError, match="models.s.model: .*rules.0.reply"):
        parse_config(base_config, base_dir=repo)
    write(tmp_path, SCRIPT)
    assert parse_config(base_config, base_dir=repo).models["s"].provider == "scripted"


def test_log_to_sends_logging_warnings_and_uncaught_exceptions_to_the_log(tmp_path: Path):
    log = tmp_path / "logs" / "job.log"
    script = textwrap.dedent(f"""
        import logging, threading, warnings
        from mastif.core.logsetup import log_to
        log_to({str(log)!r})
        logging.getLogger("httpx").info("one line per request")
        logging.getLogger("job").info("started")
        warnings.warn("careful")
        t = threading.Thread(target=lambda: 1 / 0, name="worker")
        t.start(); t.join()
        raise RuntimeError("boom")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 1 and "RuntimeError: boom" in proc.stderr  # still fails the job
    text = log.read_text()
    assert "started" in text and "one line per request" not in text
    assert "UserWarning: careful" in text
    assert "uncaught exception in thread worker" in text and "ZeroDivisionError" in text
    assert "uncaught exception" in text and "RuntimeError: boom" in text and "Traceback" in text

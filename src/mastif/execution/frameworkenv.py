"""Each framework's own environment: what it declares, where it is built, whether it is current.

The harness (``.venv``: sampling, model servers, judging, statistics, Snakemake) imports no
framework. A framework ``F`` declares its requirements in the workflow's
``envs/F/requirements.in`` (its own packages at their newest release, plus
``envs/runtime.in``, mastif's runtime part, and ``envs/testing.in``) and pins every package
with its hashes in ``envs/F/requirements.lock`` (``make lock``). :func:`build_env` makes
``.envs/F/`` from the lock with uv, then installs this mastif checkout into it (editable,
without dependencies), so a stack job of ``F`` runs mastif's runtime code beside the
framework at the framework's own openai, mcp and a2a versions
(:mod:`mastif.execution.stack_worker`).

A build goes into a temporary folder and is moved into place only when complete; a stamp
inside it records what it was built from (the lock and mastif's ``pyproject.toml``, which
registers the adapters: its version and entry points), so a changed lock rebuilds it and an interrupted build leaves
nothing that counts as built.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: the committed requirements, one folder per framework, under the project
REQUIREMENTS_DIR = "envs"
#: the built environments, one per framework, under the project
BUILT_DIR = ".envs"
#: written last into a built environment: the fingerprint it was built from
STAMP = ".mastif-env"


class FrameworkEnvError(RuntimeError):
    """A framework's environment cannot be found or built; the message says why."""


def project_root() -> Path:
    """The checkout this mastif runs from (whose ``envs/`` holds the requirements)."""
    return Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class FrameworkEnv:
    """Framework ``name``'s environment under ``root`` (a mastif checkout)."""

    name: str
    root: Path

    @property
    def requirements(self) -> Path:
        return self.root / REQUIREMENTS_DIR / self.name / "requirements.in"

    @property
    def lock(self) -> Path:
        return self.root / REQUIREMENTS_DIR / self.name / "requirements.lock"

    @property
    def prefix(self) -> Path:
        return self.root / BUILT_DIR / self.name

    @property
    def python(self) -> Path:
        return self.prefix / "bin" / "python"

    @property
    def stamp(self) -> Path:
        return self.prefix / STAMP

    def fingerprint(self) -> str:
        """What a build of this environment is made from: its lock and the adapters'
        registration (mastif's pyproject.toml)."""
        project = tomllib.loads((self.root / "pyproject.toml").read_text())["project"]
        # what an install without dependencies takes from pyproject: version, entry points
        installed = json.dumps(
            [project.get("version"), project.get("entry-points", {})], sort_keys=True
        )
        digest = hashlib.sha256(self.lock.read_bytes())
        digest.update(installed.encode())
        return digest.hexdigest()

    def is_built(self) -> bool:
        """Built from today's lock and pyproject (and its interpreter is there)."""
        try:
            return self.python.exists() and self.stamp.read_text() == self.fingerprint()
        except OSError:
            return False

    def is_running(self) -> bool:
        """This interpreter is the environment's own (its tests, its stack worker)."""
        return Path(sys.prefix).resolve() == self.prefix.resolve()


def framework_env(name: str, root: Path | None = None) -> FrameworkEnv:
    """Framework ``name``'s environment; :class:`FrameworkEnvError` when it declares none."""
    env = FrameworkEnv(name, Path(root) if root is not None else project_root())
    if not env.requirements.is_file():
        raise FrameworkEnvError(
            f"framework {name!r} declares no environment: {env.requirements} is missing "
            f"(docs/frameworks.md, 'Write your own')"
        )
    if not env.lock.is_file():
        raise FrameworkEnvError(
            f"framework {name!r} has no lock: {env.lock} is missing (make lock writes it)"
        )
    return env


def declared_envs(root: Path | None = None) -> tuple[str, ...]:
    """Every framework that declares an environment under ``root``, sorted."""
    base = (Path(root) if root is not None else project_root()) / REQUIREMENTS_DIR
    return tuple(sorted(p.parent.name for p in base.glob("*/requirements.in")))


def running_env() -> str | None:
    """The framework whose built environment this interpreter is; None: the harness."""
    prefix = Path(sys.prefix).resolve()
    return prefix.name if prefix.parent.name == BUILT_DIR else None


def _uv() -> str:
    """uv beside this interpreter (make setup installs it into .venv), else on PATH."""
    here = Path(sys.executable).parent / "uv"
    found = str(here) if here.exists() else shutil.which("uv")
    if found is None:
        raise FrameworkEnvError("uv is not installed (make setup installs it into .venv)")
    return found


def _base_python() -> str:
    """The interpreter environments are made from: the one under this venv, if any."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _run(
    command: list[str],
    what: str,
    log_file: Path | None = None,
    environ: dict[str, str] | None = None,
) -> str:
    """Run ``command`` (in ``environ``, else this process's environment); its standard
    output. :class:`FrameworkEnvError` naming ``what`` (and the last lines it printed) when
    it fails."""
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=environ)
    if log_file is not None:
        with log_file.open("a") as out:
            out.write(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise FrameworkEnvError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done.stdout


def build_env(env: FrameworkEnv, log_file: Path | None = None) -> bool:
    """Build ``env`` from its lock unless it is current; True when it was (re)built.

    One build at a time per environment (a file lock beside it); the new environment
    replaces the old one only once it is complete.
    """
    from filelock import FileLock

    built = env.prefix.parent
    built.mkdir(parents=True, exist_ok=True)
    with FileLock(str(built / f".{env.name}.lock")):
        if env.is_built():
            return False
        fingerprint = env.fingerprint()
        uv = _uv()
        tmp = Path(tempfile.mkdtemp(dir=built, prefix=f".{env.name}-"))
        try:
            # relocatable: the finished environment is moved from tmp into place
            _run([uv, "venv", "-q", "--allow-existing", "--relocatable",
                  "--python", _base_python(), str(tmp)], f"{env.name}: uv venv", log_file)  # fmt: skip
            python = str(tmp / "bin" / "python")
            # no --compile-bytecode: _compile_worker_modules compiles what a worker imports
            _run([uv, "pip", "sync", "-q", "--python", python, "--require-hashes",
                  str(env.lock)], f"{env.name}: installing {env.lock}", log_file)  # fmt: skip
            # the editable build writes src/mastif.egg-info: one at a time across envs
            with FileLock(str(built / ".mastif-install.lock")):
                _run([uv, "pip", "install", "-q", "--python", python, "--no-deps", "-e",
                      str(env.root)], f"{env.name}: installing mastif", log_file)  # fmt: skip
            _compile_worker_modules(env.name, python, log_file)
            (tmp / STAMP).write_text(fingerprint)
            if env.prefix.exists():
                shutil.rmtree(env.prefix)
            tmp.rename(env.prefix)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("framework %s: environment built in %s", env.name, env.prefix)
    return True


#: what a stack job's worker imports before its first run: mastif's runtime, the
#: framework's adapter (the framework), the protocols' servers and clients (MCP and A2A SDKs)
WORKER_IMPORTS = """
import sys
import mastif.execution.worker, mastif.execution.runner
import mastif.protocols.mcp, mastif.protocols.a2a, mastif.frameworks.mcp_transport
from mastif.frameworks import get_framework
get_framework(sys.argv[1])
"""


def _compile_worker_modules(name: str, python: str, log_file: Path | None) -> None:
    """Import what a worker imports, once, writing their bytecode into the environment.

    The environment is installed without ``--compile-bytecode`` (it compiled every module
    of ~110 packages: 12 s of a 13 s build, 20 s of CPU); where Python writes no bytecode
    (``PYTHONDONTWRITEBYTECODE``, set on these machines) every worker would otherwise
    compile the framework again at its start: CrewAI's imports took 8.5 s without bytecode
    and 4.4 s with it. This writes it for the modules a start needs (~the import's time).
    """
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    _run([python, "-c", WORKER_IMPORTS, name],
         f"{name}: importing the worker's modules", log_file, environ)  # fmt: skip


def installed_packages(env: FrameworkEnv) -> str:
    """``name==version`` of every distribution in the built ``env``, one a line, sorted."""
    return _run([_uv(), "pip", "freeze", "--python", str(env.python)],
                f"{env.name}: listing {env.prefix}")  # fmt: skip


#: environments built at once by :func:`ensure_envs`: each build is mostly one core's work
#: (installing from uv's cache, then compiling what a worker imports)
BUILD_JOBS = 2


def ensure_envs(
    names: list[str] | tuple[str, ...], root: Path | None = None, jobs: int = BUILD_JOBS
) -> list[str]:
    """Build every named framework's environment that is not current, ``jobs`` at a time;
    the names built. Every build is tried; the first failure is raised after the others
    have finished (what was built stays built)."""
    from concurrent.futures import ThreadPoolExecutor

    envs = [framework_env(name, root) for name in dict.fromkeys(names)]
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [(env.name, pool.submit(build_env, env)) for env in envs]
    built, failures = [], []
    for name, future in futures:
        error = future.exception()
        if error is not None:
            failures.append(error)
        elif future.result():
            built.append(name)
    if failures:
        raise failures[0]
    return built

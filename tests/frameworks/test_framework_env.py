"""Each framework in its own locked environment; the harness holds none (issue 50).

The tests with a ``framework`` parameter run inside that framework's environment
(tests/conftest.py); the others run in the harness (``.venv``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from mastif.core.provenance import PACKAGES, check_framework, package_version
from mastif.execution.frameworkenv import (
    WORKER_IMPORTS,
    FrameworkEnvError,
    declared_envs,
    framework_env,
    running_env,
)
from mastif.frameworks import FRAMEWORKS, get_framework
from tests.support.fakes import ScriptedChatServer
from tests.support.paths import REPO
from tests.support.stackrun import run_stack

#: the top-level modules of each framework's own packages (what the harness must not hold)
FRAMEWORK_MODULES: dict[str, tuple[str, ...]] = {
    "langgraph": ("langgraph", "langchain_mcp_adapters"),
    "langchain": ("langchain", "langchain_core", "langchain_openai"),
    "crewai": ("crewai",),
    "semantic_kernel": ("semantic_kernel",),
    "llamaindex": ("llama_index",),
    "smolagents": ("smolagents", "mcpadapt"),
    "agent_framework": ("agent_framework",),
    "pydantic_ai": ("pydantic_ai", "pydantic_graph"),
    "openai_agents": ("agents",),
    "haystack": ("haystack", "haystack_integrations"),
    "upsonic": ("upsonic",),
    "agno": ("agno",),
    "autogen": ("autogen_agentchat", "autogen_core", "autogen_ext"),
    "google_adk": ("google.adk",),
    "camel": ("camel",),
    "strands": ("strands",),
    "ag2": ("ag2",),
    "beeai": ("beeai_framework",),
    "langroid": ("langroid",),
}


#: SDKs a framework may name to choose their line (smolagents: mcp<2); the harness holds them too
SDKS = {"openai", "mcp", "a2a-sdk"}


def own_requirements(name: str) -> list[str]:
    """The distributions ``name``'s requirements.in names itself (not the shared parts, nor
    an SDK it only narrows)."""
    found = []
    for line in framework_env(name).requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):  # -r ../runtime.in, -c ...: the shared parts
            dist = Requirement(line).name
            if normal(dist) not in SDKS:
                found.append(dist)
    return found


def normal(name: str) -> str:
    """A distribution name as the registries compare them (PEP 503)."""
    return canonicalize_name(name)


@pytest.fixture(params=FRAMEWORKS)
def framework(request):
    return request.param


# ------------------------------------------------------------------ in each framework's env


def test_the_tests_run_in_the_frameworks_own_environment(framework):
    assert running_env() == framework
    assert sys.prefix == str(framework_env(framework).prefix)


def test_the_adapter_fits_the_library_installed_beside_it(framework):
    """Every private member the adapter relies on exists in this environment's release."""
    adapter = get_framework(framework)
    assert adapter.name == framework
    check_framework(adapter)
    for member in getattr(adapter, "private_members", ()):
        # its version is in every run row: a column of its own, or other_packages
        assert member.package in (*PACKAGES, *getattr(adapter, "packages", ())), member


def test_the_environment_holds_no_other_framework(framework):
    for other, modules in FRAMEWORK_MODULES.items():
        if other == framework or set(modules) & set(FRAMEWORK_MODULES[framework]):
            continue
        for module in modules:
            # langchain-core comes with langgraph; the frameworks' shared ground is not theirs
            if framework in ("langgraph", "langchain") and other in ("langgraph", "langchain"):
                continue
            found = subprocess.run(
                [sys.executable, "-c", f"import importlib.util as u; print(u.find_spec({module!r}) is not None)"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            assert found == "False", f"{module} ({other}) is installed in {framework}'s environment"


def test_the_environment_is_what_its_lock_pins(framework):
    """Every installed distribution is at the lock's version (uv pip sync installed nothing else)."""
    lock = framework_env(framework).lock.read_text()
    # a universal lock may pin one package at several versions, each under its own marker
    pinned: dict[str, set[str]] = {}
    for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==([^ \\;]+)", lock, re.MULTILINE):
        pinned.setdefault(normal(m.group(1)), set()).add(m.group(2))
    for dist in metadata.distributions():
        name = normal(dist.metadata["Name"])
        if name == "mastif":
            continue
        assert name in pinned, f"{name} is installed but not in {framework}'s lock"
        assert dist.version in pinned[name], (
            f"{name}: {dist.version} installed, lock {pinned[name]}"
        )


# ------------------------------------------------------------------------------ the harness


def test_the_environment_holds_the_bytecode_a_worker_imports(framework):
    """Built with the modules a worker imports compiled (frameworkenv.WORKER_IMPORTS), so a
    worker does not compile them again where Python writes no bytecode."""
    # modules Python's own source loader loaded (a package's own import hook, as beartype's
    # in py-key-value, keeps its bytecode its own way), from the environment
    listing = (
        "import json, sys\n"
        "from importlib.machinery import SourceFileLoader\n"
        "specs = [getattr(m, '__spec__', None) for m in list(sys.modules.values())]\n"
        "files = [s.origin for s in specs if s and type(s.loader) is SourceFileLoader]\n"
        "print(json.dumps(sorted(f for f in files if f.startswith(sys.prefix))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", WORKER_IMPORTS + listing, framework],
        capture_output=True, text=True, check=True, cwd=REPO,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},  # reads bytecode, writes none
    )  # fmt: skip
    sources = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(sources) > 100  # the framework, openai, mcp, a2a and their dependencies
    missing = [f for f in sources if not Path(importlib.util.cache_from_source(f)).is_file()]
    assert missing == [], f"{len(missing)} of {len(sources)} without bytecode: {missing[:5]}"


def test_every_framework_declares_a_hashed_lock():
    assert set(FRAMEWORKS) <= set(declared_envs())
    for name in FRAMEWORKS:
        env = framework_env(name)
        text = env.lock.read_text()
        pins = re.findall(r"^[A-Za-z0-9_.\-]+==\S+", text, re.MULTILINE)
        assert pins, f"{env.lock} pins nothing"
        # every pin is followed by its hashes (uv pip compile --generate-hashes)
        blocks = re.split(r"^(?=[A-Za-z0-9_.\-]+==)", text, flags=re.MULTILINE)[1:]
        assert all("--hash=sha256:" in b for b in blocks), f"{env.lock}: a pin without hashes"
        for dist in own_requirements(name):
            assert re.search(rf"^{re.escape(dist)}==", text, re.MULTILINE | re.IGNORECASE), (
                f"{dist} is in {env.requirements} but not pinned in {env.lock}"
            )


def test_the_harness_holds_no_framework():
    """Not installed in .venv, and not imported by anything the harness runs."""
    assert running_env() is None
    for name in FRAMEWORKS:
        for dist in own_requirements(name):
            assert package_version(dist) is None, f"{dist} ({name}) is installed in the harness"
    harness = (
        "mastif.cli mastif.execution.runner mastif.execution.stack_worker "
        "mastif.execution.judging mastif.evaluation.metrics mastif.evaluation.values "
        "mastif.analysis.stats mastif.analysis.mixed mastif.reporting.report "
        "mastif.reporting.viewer mastif.frameworks mastif.protocols.mcp mastif.protocols.a2a"
    ).split()
    code = (
        "import importlib, json, sys\n"
        f"for m in {harness!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = set(json.loads(subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout))  # fmt: skip
    for name, modules in FRAMEWORK_MODULES.items():
        assert not loaded & set(modules), f"the harness imported {name}"


def test_a_stack_job_runs_in_its_frameworks_environment(tmp_path, fake_model_config):
    """From the harness, a LangGraph run is made by LangGraph's environment: its row records
    that environment's versions, not the harness's."""
    lock = framework_env("langgraph").lock.read_text()

    def pinned(dist: str) -> str:
        return re.search(rf"^{dist}==(\S+)", lock, re.MULTILINE).group(1)  # type: ignore[union-attr]

    with ScriptedChatServer(lambda payload: {"content": "done."}) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path,
                             framework="langgraph")  # fmt: skip
    assert trace.status == "ok", trace.error_message
    assert trace.langgraph_version == pinned("langgraph")
    assert trace.openai_version == pinned("openai")
    assert package_version("langgraph") is None  # and this process has none


def test_an_unbuilt_environment_is_named_with_the_command_that_builds_it(
    tmp_path, monkeypatch, fake_model_config
):
    from mastif.execution import frameworkenv

    monkeypatch.setattr(frameworkenv, "BUILT_DIR", ".envs-nowhere")
    assert not framework_env("langgraph").is_built()
    with ScriptedChatServer(lambda payload: {"content": "done."}) as srv:
        with pytest.raises(FrameworkEnvError, match=r"mastif envs build langgraph"):
            run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path,
                      framework="langgraph")  # fmt: skip


def test_a_framework_without_an_environment_is_named():
    with pytest.raises(FrameworkEnvError, match="declares no environment"):
        framework_env("no_such_framework")

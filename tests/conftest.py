from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from mastif.execution.frameworkenv import declared_envs, running_env
from tests.support.env_tests import CONTRACT_MODULES, env_modules
from tests.support.paths import REPO

#: the framework whose environment runs this session (None: the harness, .venv)
RUNNING_ENV = running_env()
ADAPTER_MODULE = re.compile(r"tests/frameworks/test_(\w+)_adapter\.py")


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return path.as_posix()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The harness collects no framework's adapter tests (it has no framework); a framework's
    environment collects only its modules (tests/support/env_tests.py)."""
    if collection_path.suffix != ".py":
        return None
    rel = _relative(collection_path)
    if RUNNING_ENV is None:
        return True if ADAPTER_MODULE.fullmatch(rel) else None
    if rel.startswith("tests/") and rel.rsplit("/", 1)[-1].startswith("test_"):
        return True if rel not in env_modules(RUNNING_ENV) else None
    return None


def _env_of(item: pytest.Item) -> str | None:
    """The framework environment ``item`` runs in; None: the harness."""
    rel = _relative(Path(str(item.path)))
    found = ADAPTER_MODULE.fullmatch(rel)
    if found:
        return found.group(1)
    if rel not in CONTRACT_MODULES or REAL_MODEL_FIXTURE in getattr(item, "fixturenames", ()):
        return None
    callspec = getattr(item, "callspec", None)
    framework = callspec.params.get("framework") if callspec is not None else None
    # a plugin without an environment of its own runs where it is installed
    return framework if framework in declared_envs() else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the real model server is slow, whatever its file says; it must also
    carry ``@pytest.mark.xdist_group(REAL_MODEL_FIXTURE)`` (checked here), so under
    pytest-xdist (``make test``: ``-n 2 --dist loadgroup``) all of them run on one worker:
    one model server serves them one request at a time, on one of the two cores (llama.cpp's
    default), while the other worker runs the rest. (A marker added here would come too
    late: xdist reads the groups in its own hook.)

    Each item runs on one side: a framework's contract items in its environment, the rest in
    the harness (:func:`_env_of`); the other side deselects it."""
    kept = [item for item in items if _env_of(item) == RUNNING_ENV]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if _env_of(i) != RUNNING_ENV])
        items[:] = kept
    for item in items:
        if REAL_MODEL_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
            groups = [m.args[0] for m in item.iter_markers("xdist_group") if m.args]
            if groups != [REAL_MODEL_FIXTURE]:
                raise pytest.UsageError(
                    f"{item.nodeid} uses {REAL_MODEL_FIXTURE}: mark it "
                    f"@pytest.mark.xdist_group({REAL_MODEL_FIXTURE!r})"
                )


REAL_MODEL_FIXTURE = "smollm2_server"


@pytest.fixture(scope="session")
def smollm2_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The bundled SmolLM2 on a real llama.cpp server, one for the whole test session."""
    from mastif.execution.experiment import parse_config
    from mastif.providers.local import LocalServer

    with (REPO / "config" / "config.yaml").open() as fh:
        spec = parse_config(yaml.safe_load(fh)).models["smollm2"]
    with LocalServer(spec, tmp_path_factory.mktemp("srv") / "server.log") as server:
        yield server


@pytest.fixture
def base_config() -> dict[str, Any]:
    """The default experiment config as a raw dict (a fresh copy per test)."""
    with (REPO / "config" / "config.yaml").open() as fh:
        return copy.deepcopy(yaml.safe_load(fh))


@pytest.fixture
def fake_model_config(base_config: dict[str, Any]):  # type: ignore[no-untyped-def]
    """Factory: the default config with the agent model pointed at a fake endpoint."""

    def make(base_url: str, **generation: Any) -> dict[str, Any]:
        cfg = copy.deepcopy(base_config)
        cfg["models"]["fake"] = {
            "provider": "openai_compatible",
            "model": "fake-model",
            "base_url": base_url,
        }
        cfg["agent_models"] = ["fake"]
        # the contract tests script calls of the offline built-in tools (the web tools have
        # their own stack tests, tests/execution/test_web_stack.py)
        cfg["tools"] = ["python_repl", "sympy", "datetime", "json_parser"]
        # the contract tests are written for the paper's loop sizes, not the laptop default
        cfg["generation"].update({"max_steps": 3, "max_tool_rounds": 3, **generation})
        cfg["execution"] = {"concurrency": 1, "provider_retries": 1}
        return cfg

    return make


PIPELINE_FILES = ["Snakefile", "config", "workflow", "resources", "profiles"]


@pytest.fixture
def pipeline_copy(tmp_path: Path) -> Path:
    """The workflow (Snakefile, config, rules, resources, profiles) in a temp directory."""
    for name in PIPELINE_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name)
        else:
            shutil.copy2(src, tmp_path / name)
    return tmp_path

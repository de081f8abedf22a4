"""``pip install .`` (not editable) gives a mastif that finds its own schema and resources.

The wheel is built from a copy of the checkout and installed, without dependencies, into a
fresh venv that borrows this environment's site-packages for the dependencies only (a path
line, so the editable install's finder there is never run). Every command then runs from
an empty directory, outside any checkout.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.support.paths import REPO

LOGS = REPO / "tests" / "fixtures" / "mastif_logs"
pytestmark = pytest.mark.slow  # builds a wheel: ~20 s


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pkg")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for name in ("src", "config", "resources"):
        # symlinks kept: src/mastif/_data links to ../../../config and ../../../resources
        shutil.copytree(REPO / name, source / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(root / "dist"),
         str(source)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (wheel,) = (root / "dist").glob("mastif-*.whl")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", str(wheel)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir


def mastif(env_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env_dir / "bin" / "mastif"), *args], cwd=cwd, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_the_installed_package_is_a_copy_not_the_checkout(installed: Path, tmp_path: Path):
    out = subprocess.run(
        [str(installed / "bin" / "python"), "-c",
         "import mastif, mastif.core.paths as p; print(mastif.__file__); print(p.data_root())"],
        cwd=tmp_path, check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    assert all(str(installed) in line for line in out), out
    assert not (Path(out[1]) / "config").is_symlink()
    assert (Path(out[1]) / "config" / "schema" / "config.schema.yaml").is_file()


def test_validate_finds_the_schema_and_the_default_experiment(installed: Path, tmp_path: Path):
    done = mastif(installed, tmp_path, "validate")
    assert done.returncode == 0, done.stderr
    assert "valid; 12 stack(s)" in done.stdout
    # a user's override of the default, with a typo'd key, is named
    (tmp_path / "mine.yaml").write_text("tasks: {sample_sise: 3}\n")
    done = mastif(installed, tmp_path, "validate", "mine.yaml")
    assert done.returncode == 2 and "sample_sise" in done.stderr


def test_estimate_finds_prompts_rubric_and_builtin_tasks(installed: Path, tmp_path: Path):
    done = mastif(installed, tmp_path, "estimate")
    assert done.returncode == 0, done.stderr
    assert "ESTIMATE, not a measurement" in done.stdout and "| total |" in done.stdout


def test_import_mastif_writes_runs_outside_a_checkout(installed: Path, tmp_path: Path):
    log = tmp_path / "log.json"
    shutil.copy2(LOGS / "partial-fixture.json", log)
    done = mastif(installed, tmp_path, "import-mastif", str(log), "--out", "imported")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "imported" / "tasks.parquet").is_file()
    assert list((tmp_path / "imported" / "runs").rglob("*.parquet"))
    json.loads(log.read_text())  # the log is read, never rewritten


def test_the_trace_viewers_page_is_in_the_wheel(installed: Path, tmp_path: Path):
    code = (
        "from importlib import resources; from mastif.reporting.viewer.site import ASSETS; "
        "a = resources.files('mastif.reporting.viewer') / 'assets'; "
        "print(all((a / n).is_file() for n in ASSETS), len(ASSETS))"
    )
    out = subprocess.run(
        [str(installed / "bin" / "python"), "-c", code],
        cwd=tmp_path, check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    assert out == ["True", "5"], out

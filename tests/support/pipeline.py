"""Snakemake as the tests run it: this environment's ``snakemake`` in a workflow copy."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.paths import BIN


def snakemake(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``snakemake *args`` in ``cwd`` (``env``: the whole environment, default this one's),
    its output captured as text; fails after ``timeout`` seconds."""
    return subprocess.run(
        [str(BIN / "snakemake"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )

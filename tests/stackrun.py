"""One helper for the tests that execute a stack in-process (no Snakemake)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from mastif.config import parse_config
from mastif.runner import execute_stack
from mastif.tasks import Task, load_tasks
from mastif.trace import RunTrace

REPO = Path(__file__).resolve().parents[1]


def run_stack(
    cfg_dict: dict[str, Any],
    workdir: Path,
    tasks: list[Task] | None = None,
    *,
    framework: str | None = None,
) -> list[RunTrace]:
    """Execute the config's first stack on ``tasks`` (default: the first built-in task).

    The checkpoint and server log live in ``workdir``, so a second call with the same
    ``workdir`` resumes the first; ``framework`` replaces the config's frameworks.
    """
    cfg_dict = copy.deepcopy(cfg_dict)
    if framework is not None:
        cfg_dict["frameworks"] = [framework]
    cfg = parse_config(cfg_dict)
    workdir.mkdir(parents=True, exist_ok=True)
    return execute_stack(
        cfg, cfg.stacks()[0], tasks or load_tasks("builtin")[:1],
        workdir / "ckpt.jsonl", workdir / "server.log", REPO,
    )  # fmt: skip

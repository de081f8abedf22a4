"""One helper for the tests that execute a stack in-process (no Snakemake)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from mastif.core.trace import RunTrace
from mastif.execution.experiment import parse_config
from mastif.execution.runner import execute_stack
from mastif.tasks import Task, load_tasks
from tests.support.fakes import ScriptedChatServer, opens_interaction_round
from tests.support.paths import REPO


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


#: python_repl code slower than a datetime call (~0.07 s here), and what it prints: a reply
#: holding both shows whether a framework runs the calls of one reply concurrently. Light
#: on purpose: python_repl's wall-clock limit (5 s) still holds when the framework
#: environments' tests run at low priority beside the harness's (make test)
SLOW_CODE = "print(sum(1 for i in range(400) for j in range(400) for k in range(5)))"
SLOW_OUTPUT = "800000"


def run_with_one_reply_of_calls(
    calls: list[tuple[str, Any]], framework: str, workdir: Path, fake_model_config: Any
) -> tuple[RunTrace, list[dict[str, Any]]]:
    """One run (``max_steps`` 1) on a scripted model whose interaction round opens with one
    reply holding ``calls`` (name, arguments) and whose every other turn says "done.";
    returns the run and the requests the model received."""

    def respond(payload: dict[str, Any]) -> dict[str, Any]:
        return {"tool_calls": calls} if opens_interaction_round(payload) else {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(
            fake_model_config(srv.base_url, max_steps=1), workdir, framework=framework
        )
    return trace, srv.requests

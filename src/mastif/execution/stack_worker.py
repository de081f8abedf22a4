"""The process boundary of a stack job: its agents run in their framework's environment.

The harness's side of a stack job (:func:`mastif.execution.runner.execute_stack`) finds the
runs still to do and opens the model endpoint (a local model's server runs in the harness);
the rest -- the gateway, the web tools and sandbox, the protocol's servers, the framework --
runs in the framework's own environment (:mod:`mastif.execution.frameworkenv`), started as
``<env>/bin/python -m mastif.execution.worker ORDER RESULT``. They meet only at boundaries
the job has anyway: the endpoint's URL on loopback, and files -- the work order (JSON:
config, runs to do, endpoint without its key), the checkpoint JSONL the worker appends each
finished run to, the job's log, and a result file (a budget's refusal, or the error that
stopped the job). The endpoint's API key travels in the worker's environment only
(:data:`API_KEY_ENV`), never in a file.

When this interpreter is the framework's environment (its contract tests), the same work
runs in this process: :func:`run_work` decides.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import pickle
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mastif.core.config import ExperimentConfig, Stack
from mastif.core.provenance import IncompatibleLibraryError
from mastif.core.trace import RunTrace
from mastif.execution.budget import BudgetGate
from mastif.execution.checkpoint import Checkpoint
from mastif.execution.frameworkenv import FrameworkEnvError, declared_envs, framework_env
from mastif.providers.endpoint import Endpoint
from mastif.tasks import Task

log = logging.getLogger(__name__)

#: the worker's environment variable holding the endpoint's API key
API_KEY_ENV = "MASTIF_WORKER_API_KEY"
#: how long a stopped worker gets to close its servers before it is killed
STOP_GRACE_S = 20.0


@dataclass(frozen=True)
class WorkOrder:
    """What the worker needs to run a stack job's pending runs."""

    config: ExperimentConfig
    stack: Stack
    #: (task, repeat, run id) of each run to do, in order
    runs: list[tuple[Task, int, str]]
    #: how many runs the shard has in all, and how many were already done (progress bar)
    total: int
    done: int
    checkpoint: Path
    shard: tuple[int, int]
    #: (model server, its version) as the harness, which runs it, knows them
    model_server: tuple[str | None, str | None]
    base_dir: Path | None = None
    log: Path | None = None

    def to_json(self, endpoint: Endpoint, budget: BudgetGate | None) -> str:
        return json.dumps(
            {
                "config": self.config.model_dump(mode="json", by_alias=True),
                "stack": [self.stack.model, self.stack.protocol, self.stack.framework],
                "runs": [[t.model_dump(mode="json"), r, rid] for t, r, rid in self.runs],
                "total": self.total,
                "done": self.done,
                "checkpoint": str(self.checkpoint),
                "shard": list(self.shard),
                "model_server": list(self.model_server),
                "base_dir": None if self.base_dir is None else str(self.base_dir),
                "log": None if self.log is None else str(self.log),
                # the key stays out of the file (API_KEY_ENV)
                "endpoint": dataclasses.asdict(dataclasses.replace(endpoint, api_key="")),
                # the gate's ledger is a file both processes share; its state is small
                "budget": None
                if budget is None
                else base64.b64encode(pickle.dumps(budget)).decode(),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> tuple[WorkOrder, Endpoint, BudgetGate | None]:
        raw = json.loads(text)
        order = cls(
            config=ExperimentConfig.model_validate(raw["config"]),
            stack=Stack(*raw["stack"]),
            runs=[(Task.model_validate(t), r, rid) for t, r, rid in raw["runs"]],
            total=raw["total"],
            done=raw["done"],
            checkpoint=Path(raw["checkpoint"]),
            shard=tuple(raw["shard"]),  # type: ignore[arg-type]
            model_server=tuple(raw["model_server"]),  # type: ignore[arg-type]
            base_dir=None if raw["base_dir"] is None else Path(raw["base_dir"]),
            log=None if raw["log"] is None else Path(raw["log"]),
        )
        endpoint = Endpoint(**{**raw["endpoint"], "api_key": os.environ.get(API_KEY_ENV, "")})
        budget = None if raw["budget"] is None else pickle.loads(base64.b64decode(raw["budget"]))
        return order, endpoint, budget


class WorkerFailed(RuntimeError):
    """The framework's process stopped without finishing its work; the message says why."""


#: the framework's side of the work (:func:`mastif.execution.runner.run_pending`)
Work = Callable[[WorkOrder, Endpoint, "BudgetGate | None"], list[RunTrace]]


def run_work(
    order: WorkOrder, endpoint: Endpoint, budget: BudgetGate | None, work: Work
) -> list[RunTrace]:
    """Run ``order`` in its framework's environment; the traces of the runs it finished.

    In this process when it is that environment, else in a worker process of it. A budget's
    refusal is set on ``budget`` (as the in-process gate sets it); an adapter that no longer
    fits its library raises :class:`IncompatibleLibraryError` here as there.
    """
    name = order.stack.framework
    if name not in declared_envs():
        # a plugin installed beside mastif without an environment of its own
        log.info("framework %s declares no environment: its runs run in this process", name)
        return work(order, endpoint, budget)
    env = framework_env(name)
    if env.is_running():
        return work(order, endpoint, budget)
    if not env.is_built():
        raise FrameworkEnvError(
            f"framework {order.stack.framework!r}: its environment {env.prefix} is not built "
            f"from {env.lock} (mastif envs build {order.stack.framework}, or make setup)"
        )
    with tempfile.TemporaryDirectory(prefix="mastif-work-") as tmp:
        order_file, result_file = Path(tmp) / "order.json", Path(tmp) / "result.json"
        order_file.write_text(order.to_json(endpoint, budget))
        _run_worker(env.python, order_file, result_file, endpoint.api_key, order)
        result = json.loads(result_file.read_text()) if result_file.exists() else None
    if result is None:
        raise WorkerFailed(
            f"stack {order.stack.path}: the worker in {env.prefix} stopped without a result "
            f"(see {order.log or 'its log'})"
        )
    if result.get("error"):
        kind, message = result["error"]
        if kind == "IncompatibleLibraryError":
            raise IncompatibleLibraryError(message)
        raise WorkerFailed(f"stack {order.stack.path}: {kind}: {message}")
    if budget is not None and result.get("refusal"):
        budget.refusal = result["refusal"]
    # the worker appended each run it finished to this job's own file
    found = Checkpoint(order.checkpoint).load_own()
    return [found[rid] for _, _, rid in order.runs if rid in found]


def _run_worker(
    python: Path, order_file: Path, result_file: Path, api_key: str, order: WorkOrder
) -> None:
    env = {**os.environ, API_KEY_ENV: api_key}
    command = [str(python), "-m", "mastif.execution.worker", str(order_file),
               str(result_file)]  # fmt: skip
    log.info("stack %s: worker %s", order.stack.path, " ".join(command[:3]))
    process = subprocess.Popen(command, env=env)
    try:
        process.wait()
    finally:
        if process.poll() is None:  # the harness is stopping (SIGTERM, an error)
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def worker_main(argv: list[str], work: Work) -> int:
    """The worker process (``python -m mastif.execution.worker ORDER RESULT``): do the work
    of the order in ``argv[0]``, write the result to ``argv[1]``."""
    from mastif.core.logsetup import log_to

    order_file, result_file = Path(argv[0]), Path(argv[1])
    result: dict[str, Any] = {"error": None, "refusal": None}
    try:
        order, endpoint, budget = WorkOrder.from_json(order_file.read_text())
        if order.log is not None:
            log_to(order.log)
        work(order, endpoint, budget)
        result["refusal"] = budget.refusal if budget is not None else None
    except Exception as exc:  # noqa: BLE001 - the harness raises it again, named
        log.exception("the stack job's worker stopped")
        result["error"] = [type(exc).__name__, str(exc)]
    result_file.write_text(json.dumps(result))
    return 0

"""The MASTIF log's records checked one by one (mastif.importers.mastif_records) and a
checked record as a run (mastif.importers.mastif_runs, built by RunTrace.of_task)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mastif.importers import MastifLogError
from mastif.importers.mastif_records import Where, check_run, check_runs, read_log
from mastif.importers.mastif_runs import ORIGIN, run_trace
from mastif.tasks import Task

RUN = {
    "model_name": " org/Model-1 ",
    "protocol": "MCP",
    "framework": "SemanticKernel",
    "task_index": 3,
    "task": "Website: shop\nDomain: Shopping\nGoal: Buy a red pen",
    "response": '{"protocol": "MCP/1.0", "content": "It costs 2."}',
    "success": True,
    "latency": 1.5,
}


def write(tmp_path: Path, log: object) -> Path:
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    return path


def test_a_run_is_checked_with_names_stripped_and_ids_mapped(tmp_path: Path) -> None:
    entry, fields = check_run(dict(RUN), 0, Where(tmp_path / "log.json"))
    assert (entry.model_name, entry.protocol_id, entry.framework_id) == (
        "org/Model-1", "mcp", "semantic_kernel",
    )  # fmt: skip
    assert entry.task_id == fields["task_id"] == "task-003"
    assert (fields["website"], fields["domain"], fields["confirmed_task"]) == (
        "shop", "Shopping", "Buy a red pen",
    )  # fmt: skip
    assert entry.steps == [] and entry.error is None and entry.reasoning_tokens is None


def test_the_last_occurrence_of_a_run_is_kept_in_the_order_of_last_occurrences(
    tmp_path: Path,
) -> None:
    other = dict(RUN, task_index=4, task="Goal: another")
    again = dict(RUN, latency=9.0)
    checked = check_runs([RUN, other, again], Where(tmp_path / "log.json"))
    assert [e.index for e in checked.runs.values()] == [1, 2]
    assert sorted(checked.occurrences.values()) == [1, 2]
    assert set(checked.tasks) == {"task-003", "task-004"}


def test_one_task_id_for_two_tasks_names_the_first(tmp_path: Path) -> None:
    clash = dict(RUN, task="Goal: something else")
    with pytest.raises(MastifLogError, match=r"results\[1\]: task: .*results\[0\]"):
        check_runs([RUN, clash], Where(tmp_path / "log.json"))


def test_the_log_identity_survives_a_growing_partial_log(tmp_path: Path) -> None:
    log = {"yaml_file": "exp/x.yaml", "started_at": "t0", "results": [RUN]}
    info, results = read_log(write(tmp_path, log))
    grown, _ = read_log(write(tmp_path, {**log, "results": [RUN, RUN]}))
    assert info.key == grown.key and info.sha256 != grown.sha256
    assert info.experiment == "x" and results == [RUN]
    assert info.header["file"] == "log.json" and info.header["started_at"] == "t0"


def test_a_checked_record_becomes_a_run_of_its_task_and_stack(tmp_path: Path) -> None:
    info, results = read_log(write(tmp_path, {"results": [RUN]}))
    entry, fields = check_run(results[0], 0, Where(info.path))
    task = Task.model_validate({**fields, "level": None})
    run, kind = run_trace(entry, info, task, "org-model-1", 1, "unknown")
    assert kind == "mcp" and run.final_answer == "It costs 2."
    assert run.raw_final_answer == RUN["response"]
    assert (run.model, run.protocol, run.framework) == ("org-model-1", "mcp", "semantic_kernel")
    assert (run.task_id, run.task_text, run.website, run.domain, run.level) == (
        "task-003", "Buy a red pen", "shop", "Shopping", None,
    )  # fmt: skip
    assert run.origin == ORIGIN and run.status == "ok" and run.prompt_format is True
    assert run.prompt_tokens is None and run.temperature is None  # not recorded: null
    assert [o.output_key for o in run.node_outputs] == ["final_answer"]

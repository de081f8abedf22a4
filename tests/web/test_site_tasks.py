"""The sandbox's task set: every site task is solvable and its check discriminates.

Every task in ``resources/sandbox/tasks/sites.jsonl`` gets two scripted runs
(:mod:`tests.web.solutions`) against a real :class:`SandboxServer`: a correct one that
drives the site over HTTP (forms found by their labels, values read from the returned
HTML, PDF or search API) and must pass the task's check, and a plausible wrong one that
must fail it. That proves each task is solvable through the site as built and that its
check discriminates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mastif.tasks import TaskLoadError, load_tasks, resources_dir
from mastif.tasks.checks import (
    CheckResult,
    evaluate_check,
    validate_check,
)
from mastif.tasks.model import Task
from mastif.web.server import SandboxServer
from tests.web.browser import Browser
from tests.web.recipes import Solution
from tests.web.solutions import RIGHT, WRONG

SITES_FILE = resources_dir() / "sandbox" / "tasks" / "sites.jsonl"
SITE_TASKS = [
    Task.model_validate(json.loads(line))
    for line in SITES_FILE.read_text(encoding="utf-8").splitlines()
    if line.strip()
]


def test_site_tasks_have_both_solutions() -> None:
    ids = {t.task_id for t in SITE_TASKS}
    assert len(SITE_TASKS) >= 30
    assert set(RIGHT) == ids, sorted(ids ^ set(RIGHT))
    assert set(WRONG) == ids, sorted(ids ^ set(WRONG))


def _run(server: SandboxServer, task: Task, solution: Solution) -> CheckResult:
    with Browser(server) as browser:
        answer = solution(browser)
        assert task.check is not None
        return evaluate_check(task.check, answer, browser.state())


@pytest.mark.parametrize("task", SITE_TASKS, ids=lambda t: t.task_id)
def test_correct_solution_passes(server: SandboxServer, task: Task) -> None:
    result = _run(server, task, RIGHT[task.task_id])
    assert result.success, result.detail


@pytest.mark.parametrize("task", SITE_TASKS, ids=lambda t: t.task_id)
def test_wrong_solution_fails(server: SandboxServer, task: Task) -> None:
    result = _run(server, task, WRONG[task.task_id])
    assert not result.success, result.detail


def test_site_tasks_are_well_formed() -> None:
    levels = {t.level for t in SITE_TASKS}
    assert levels == {"easy", "medium", "hard"}
    for task in SITE_TASKS:
        assert task.start_url and task.start_url.startswith("/")
        assert task.check is not None
        validate_check(task.check)
        assert task.website in task.confirmed_task or "LoopSearch" in task.confirmed_task

    def kinds(check: dict[str, Any]) -> set[str]:
        if check["kind"] == "all":
            return set().union(*(kinds(c) for c in check["checks"]))
        return {check["kind"]}

    with_state = [t for t in SITE_TASKS if t.check and "state" in kinds(t.check)]
    assert len(with_state) >= 12


def test_load_sandbox_source() -> None:
    tasks = load_tasks("sandbox")
    ids = [t.task_id for t in tasks]
    assert len(tasks) >= 30 and len(ids) == len(set(ids))
    assert {t.task_id for t in SITE_TASKS} <= set(ids)
    for task in tasks:
        if task.check is not None:
            validate_check(task.check)
    with pytest.raises(ValueError, match="takes no path"):
        load_tasks("sandbox", "x.jsonl")


def _task_line(task_id: str, check: Any = None) -> str:
    record = {
        "task_id": task_id,
        "confirmed_task": "Do it.",
        "website": "w",
        "domain": "d",
        "subdomain": "s",
        "reference_steps": ["[button] Go -> CLICK"],
    }
    if check is not None:
        record["check"] = check
    return json.dumps(record) + "\n"


def test_sandbox_source_order_duplicates_and_bad_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks_dir = tmp_path / "sandbox" / "tasks"
    tasks_dir.mkdir(parents=True)
    monkeypatch.setenv("MASTIF_RESOURCES", str(tmp_path))
    (tasks_dir / "b.jsonl").write_text(_task_line("t2"))
    (tasks_dir / "a.jsonl").write_text(_task_line("t1", {"kind": "answer", "any": ["x"]}))
    assert [t.task_id for t in load_tasks("sandbox")] == ["t1", "t2"]

    (tasks_dir / "b.jsonl").write_text(_task_line("t1"))
    with pytest.raises(
        TaskLoadError, match=r"b\.jsonl:1: duplicate task_id 't1' \(first at .*a\.jsonl:1\)"
    ):
        load_tasks("sandbox")

    (tasks_dir / "b.jsonl").write_text(
        _task_line("t2") + _task_line("t3", {"kind": "answer", "any": []})
    )
    with pytest.raises(TaskLoadError, match=r"b\.jsonl:2: invalid check of task 't3'"):
        load_tasks("sandbox")

    (tasks_dir / "a.jsonl").unlink()
    (tasks_dir / "b.jsonl").unlink()
    with pytest.raises(TaskLoadError, match="no sandbox task files"):
        load_tasks("sandbox")

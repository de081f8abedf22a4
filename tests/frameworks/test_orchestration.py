"""The orchestrator's reading of a decomposer's reply."""

from __future__ import annotations

import pytest

from mastif.frameworks.orchestration import parse_subtasks


@pytest.mark.parametrize(
    ("reply", "limit", "subtasks"),
    [
        ("1. Open the page.\n2) Compare prices.\n3. Report.", 3,
         ["Open the page.", "Compare prices.", "Report."]),
        ("1. a\n2. b\n3. c", 2, ["a", "b"]),  # at most max_subtasks
        ('"1. Open the flights page.\n2. Pick a date."', 3,  # a small model's quotes
         ["Open the flights page.", "Pick a date."]),
        ("Plan:\n**1.** Search\n- Filter\n* Sort\nThen 4. is prose", 5, ["Search", "Filter", "Sort"]),
        ("I will need to know more about the task.", 3, []),  # no list: caller uses the task
        ("1.\n2. real", 3, ["real"]),  # an empty item is no subtask
    ],
)  # fmt: skip
def test_parse_subtasks(reply, limit, subtasks):
    assert parse_subtasks(reply, limit) == subtasks

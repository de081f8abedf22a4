"""Workflows the framework and protocol tests run, and the node visits they expect of them."""

from __future__ import annotations

from typing import Any

#: (node, step) of every visit of the linear workflow (navigate, observe <-> interact,
#: report) when observe says TASK COMPLETE in its third round: the loop ends at once
EARLY_STOP_VISITS: list[tuple[str, int]] = [
    ("navigate", 1),
    ("observe", 1), ("interact", 1),
    ("observe", 2), ("interact", 2),
    ("observe", 3),
    ("report", 1),
]  # fmt: skip


def hierarchical_workflow() -> dict[str, Any]:
    """The hierarchical workflow (decompose, a worker per subtask with tools, synthesise) on
    the shipped prompts, at most 2 subtasks: a config's ``workflow`` section (a fresh copy)."""
    return {
        "shape": "hierarchical",
        "max_subtasks": 2,
        "nodes": [
            {"name": "decompose", "prompt": "config/prompts/decompose.md",
             "output_key": "subtasks"},
            {"name": "worker", "prompt": "config/prompts/worker.md",
             "output_key": "worker_report", "use_tools": True},
            {"name": "synthesise", "prompt": "config/prompts/synthesise.md",
             "output_key": "final_report"},
        ],
    }  # fmt: skip

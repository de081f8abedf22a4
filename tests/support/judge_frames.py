"""Runs and tasks tables with just what the judge reads, for the judging tests."""

from __future__ import annotations

import polars as pl

from tests.support.runs import runs_table

NODE_OUTPUT = pl.Struct({"node": pl.String, "step": pl.Int64, "text": pl.String})
TOOL_CALL = pl.Struct({"name": pl.String, "arguments": pl.String, "ok": pl.Boolean,
                       "output": pl.String, "error": pl.String})  # fmt: skip


def judgeable_runs(
    rows: list[tuple[str, str, str, str]], domain: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(runs, tasks) of one stack's completed runs without steps or tool calls, one per
    ``(run_id, task_id, task text, final answer)``."""
    tasks = pl.DataFrame(
        [{"task_id": t, "confirmed_task": text, "website": "site", "domain": domain,
          "subdomain": None, "reference_steps": None} for _, t, text, _ in rows]
    )  # fmt: skip
    runs = runs_table(
        [{"run_id": r, "task_id": t, "error_class": None, "error_message": None,
          "final_answer": answer, "node_outputs": [], "tool_calls": []}
         for r, t, _, answer in rows],
        schema_overrides={"node_outputs": pl.List(NODE_OUTPUT), "tool_calls": pl.List(TOOL_CALL)},
    )  # fmt: skip
    return runs, tasks

"""The results layout (mastif.core.results): the patterns the rule files declare and the
paths the package reads are the same strings."""

from __future__ import annotations

from pathlib import Path

from mastif.core import results
from mastif.core.config import Stack


def test_patterns_are_the_documented_layout():
    assert results.tasks() == "results/tasks.parquet"
    assert results.tasks_allocation("csv") == "results/tasks_allocation.csv"
    assert results.shard() == "results/shards/{model}/{protocol}/{framework}/{scatteritem}.parquet"
    assert results.checkpoint() == (
        "results/checkpoints/{model}/{protocol}/{framework}/{scatteritem}.jsonl"
    )
    assert results.judge_checkpoint() == (
        "results/checkpoints/judged/{model}/{protocol}/{framework}.jsonl"
    )
    assert results.runs() == "results/runs/{model}/{protocol}/{framework}.parquet"
    assert results.judged() == "results/judged/{model}/{protocol}/{framework}.parquet"
    assert results.values() == "results/values/{model}/{protocol}/{framework}.parquet"
    assert results.metrics("identical_answers", "csv") == "results/metrics/identical_answers.csv"
    assert results.stats("judge_validity") == "results/stats/judge_validity.parquet"
    assert results.plot("violin_{metric}", "svg") == "results/plots/violin_{metric}.svg"
    assert results.table("{table}", "md") == "results/tables/{table}.md"
    assert results.LEDGER == "results/checkpoints/budget.jsonl"
    assert results.VIEWER == "results/viewer"


def test_a_stack_and_a_root_fill_the_pattern(tmp_path):
    stack = Stack("m", "mcp", "langgraph")
    assert results.runs(stack.path) == "results/runs/m/mcp/langgraph.parquet"
    assert results.shard(stack.path, "2-of-3") == "results/shards/m/mcp/langgraph/2-of-3.parquet"
    assert Path(results.shard(stack.path, "1-of-1")).parent == Path(results.shard_dir(stack.path))
    assert Path(results.checkpoint(stack.path, "1-of-1")).parent == Path(
        results.checkpoint_dir(stack.path)
    )
    assert (
        Path(results.runs(stack.path, root=tmp_path)) == tmp_path / "runs/m/mcp/langgraph.parquet"
    )
    assert Path(results.tasks(root=tmp_path)) == tmp_path / "tasks.parquet"

"""What each framework adds by itself, from one real run of the pipeline.

Reads results/runs/**.parquet (all stacks of one experiment) and prints, per framework,
LLM calls per run, prompt tokens per call, completion tokens per run and wall seconds per
run, with ratios against LangGraph (the leanest mapping of the workflow: one model call
per node plus one per tool round). Same tasks, same model, same prompts: the differences
are what the framework adds (its own system prompts, extra calls, retries).

    .venv/bin/python bench/framework_overhead.py [results]
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl


def overhead(results: Path) -> pl.DataFrame:
    runs = pl.concat([pl.read_parquet(p) for p in sorted((results / "runs").rglob("*.parquet"))])
    per_call = runs.select("framework", "llm_calls").explode("llm_calls").unnest("llm_calls")
    calls = per_call.group_by("framework").agg(
        pl.col("prompt_tokens").mean().alias("prompt_tokens_per_call"),
    )
    per_run = runs.group_by("framework").agg(
        pl.len().alias("runs"),
        pl.col("n_llm_calls").mean().alias("llm_calls_per_run"),
        pl.col("prompt_tokens").mean().alias("prompt_tokens_per_run"),
        pl.col("completion_tokens").mean().alias("completion_tokens_per_run"),
        pl.col("wall_seconds").mean().alias("wall_seconds_per_run"),
        pl.col("tool_calls").list.len().mean().alias("tool_calls_per_run"),
        (pl.col("status") != "ok").sum().alias("failed_runs"),
    )
    table = per_run.join(calls, on="framework").sort("framework")
    base = table.filter(pl.col("framework") == "langgraph")
    if base.height:
        for col in ("llm_calls_per_run", "prompt_tokens_per_call", "prompt_tokens_per_run",
                    "wall_seconds_per_run"):  # fmt: skip
            table = table.with_columns(
                (pl.col(col) / base[col][0]).round(2).alias(f"{col}_vs_langgraph")
            )
    return table


if __name__ == "__main__":
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "results")
    table = overhead(results)
    # one column per framework reads better than 13 columns per row
    view = (
        table.drop("framework")
        .cast(pl.Float64)
        .transpose(include_header=True, header_name="measure", column_names=table["framework"])
    )
    with pl.Config(tbl_rows=40, tbl_cols=10, float_precision=2, tbl_hide_dataframe_shape=True):
        print(view)

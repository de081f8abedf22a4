"""What each protocol adds, from one real run of the pipeline.

Reads results/runs/**.parquet (all stacks of one experiment) and prints, per protocol
(pooled over frameworks) and per protocol x framework: HTTP requests, protocol messages,
tool calls or agent messages over the protocol, KiB on the wire, protocol overhead (the
seconds the protocol clients waited on exchanges minus the tool's or agent's own work, the
same definition for MCP and A2A; mean over runs where it is known, the others counted),
seconds in the model,
wall seconds per run, and ratios against ``standard`` (same tasks, same model, same
prompts: the differences are what the protocol adds).

    .venv/bin/python bench/protocol_overhead.py [results]
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

from mastif.evaluation.measures import model_seconds, protocol_kib

MEASURES = [
    pl.len().alias("runs"),
    pl.col("protocol_requests").mean().alias("requests_per_run"),
    pl.col("protocol_messages").mean().alias("messages_per_run"),
    pl.col("protocol_calls").mean().alias("calls_per_run"),
    protocol_kib().mean().alias("kib_per_run"),
    pl.col("protocol_seconds").mean().alias("protocol_s_per_run"),
    pl.col("protocol_seconds").is_null().sum().alias("protocol_s_unknown"),
    pl.col("model_s").mean().alias("model_s_per_run"),
    pl.col("wall_seconds").mean().alias("wall_s_per_run"),
    pl.col("n_llm_calls").mean().alias("llm_calls_per_run"),
    pl.col("prompt_tokens").mean().alias("prompt_tokens_per_run"),
    (pl.col("status") != "ok").sum().alias("failed_runs"),
]


def load_runs(results: Path) -> pl.DataFrame:
    runs = pl.concat(
        [pl.read_parquet(p) for p in sorted((results / "runs").rglob("*.parquet"))],
        how="diagonal_relaxed",
    )
    return runs.with_columns(model_seconds().alias("model_s"))


def overhead(runs: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    table = runs.group_by(by).agg(MEASURES).sort(by)
    table = table.with_columns(
        (pl.col("protocol_s_per_run") / pl.col("wall_s_per_run")).alias("protocol_share")
    )
    base = runs.filter(pl.col("protocol") == "standard")
    if base.height:
        keys = [c for c in by if c != "protocol"]
        ref = base.group_by(keys or pl.lit(0)).agg(
            pl.col("wall_seconds").mean().alias("_wall"),
            pl.col("prompt_tokens").mean().alias("_tokens"),
        )
        table = (
            (table.join(ref, on=keys, how="left") if keys else table.join(ref, how="cross"))
            .with_columns(
                (pl.col("wall_s_per_run") / pl.col("_wall")).alias("wall_vs_standard"),
                (pl.col("prompt_tokens_per_run") / pl.col("_tokens")).alias(
                    "prompt_tokens_vs_standard"
                ),
            )
            .drop("_wall", "_tokens", "literal", strict=False)
        )
    return table


def show(table: pl.DataFrame, label: str) -> None:
    names = [" / ".join(str(v) for v in row) for row in table.select(label.split("+")).rows()]
    view = (
        table.drop(label.split("+"))
        .cast(pl.Float64)
        .transpose(include_header=True, header_name="measure", column_names=names)
    )
    with pl.Config(tbl_rows=40, tbl_cols=14, float_precision=3, tbl_hide_dataframe_shape=True,
                   tbl_width_chars=200):  # fmt: skip
        print(view)


if __name__ == "__main__":
    runs = load_runs(Path(sys.argv[1] if len(sys.argv) > 1 else "results"))
    show(overhead(runs, ["protocol"]), "protocol")
    show(overhead(runs, ["protocol", "framework"]), "protocol+framework")

"""Which runs count for each metric: one rule (mastif.evaluation.measures.counted), the same
in the stack table, the bootstrap and the significance tests; and the one dollar formula."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from mastif.analysis.bootstrap import bootstrap_effects
from mastif.analysis.stats import metric_runs
from mastif.core.config import ModelPrice
from mastif.core.pricing import usd, usd_of
from mastif.evaluation.measures import counted, pareto_ineligible
from mastif.evaluation.metrics import RUN_METRICS_SCHEMA, stack_metrics

RUNS = [
    # status, judge_status, has_final_answer, IVS, CT, TCR
    ("ok", "ok", True, 0.2, 10.0, 1.0),
    ("ok", "judge_failed", True, 0.4, 20.0, None),
    ("timeout", "ok", False, 0.8, 30.0, 0.5),
    # answered by its flag but cut short: no final answer counts for SVS
    ("error", "ok", True, 1.0, 40.0, 0.0),
]


def _run_table(rows: list[tuple[Any, ...]] = RUNS, tasks: int = 3) -> pl.DataFrame:
    data = [
        {
            "run_id": f"r{t}-{i}", "model": "m", "protocol": "standard", "framework": "f",
            "task_id": f"t{t}", "repeat": 0, "status": status, "judge_status": judge,
            "has_final_answer": answer, "IVS": ivs, "CT": ct, "TCR": tcr, "V": 5,
            "n_tool_calls": 0, "n_tool_ok": 0,
        }
        for t in range(tasks)
        for i, (status, judge, answer, ivs, ct, tcr) in enumerate(rows)
    ]  # fmt: skip
    frame = pl.DataFrame(data)
    return frame.select(
        (pl.col(c) if c in frame.columns else pl.lit(None)).cast(t).alias(c)
        for c, t in RUN_METRICS_SCHEMA.items()
    )


def _kept(metric: str, columns: list[str] | None = None) -> list[int]:
    frame = pl.DataFrame(
        {
            "status": [r[0] for r in RUNS],
            "judge_status": [r[1] for r in RUNS],
            "has_final_answer": [r[2] for r in RUNS],
        }
    ).with_row_index("i")
    if columns is not None:
        frame = frame.select("i", *columns)
    names = None if columns is None else frame.columns
    return frame.filter(counted(metric, names))["i"].to_list()


@pytest.mark.parametrize(
    ("metric", "kept"),
    [
        ("TCR", [0, 2, 3]),
        ("TU", [0, 2, 3]),
        ("CT", [0, 1]),
        ("V", [0, 1]),
        ("IVS", [0, 1]),
        ("SVS", [0, 1]),
        ("TUSR", [0, 1, 2, 3]),
        ("success", [0, 1, 2, 3]),
    ],
)
def test_counted_runs_per_metric(metric: str, kept: list[int]) -> None:
    assert _kept(metric) == kept


def test_counted_leaves_out_conditions_on_missing_columns() -> None:
    assert _kept("IVS", ["status"]) == [0, 1]  # no flag: the completed runs
    assert _kept("IVS", ["has_final_answer"]) == [0, 1, 3]  # no status: the flagged runs
    assert _kept("CT", []) == [0, 1, 2, 3]
    assert _kept("TCR", ["status"]) == [0, 1, 2, 3]


def test_svs_counts_the_same_runs_in_stack_table_bootstrap_and_tests() -> None:
    table = _run_table()
    expected = (0.2 + 0.4) / 2  # the completed runs with a final answer, not the errored one
    stack = stack_metrics(table).row(0, named=True)
    assert stack["SVS"] == pytest.approx(expected)
    assert stack["n_no_final_answer"] == 2 * 3
    effects = bootstrap_effects(table, resamples=50, metrics=("SVS",))
    assert effects.filter(pl.col("metric") == "SVS")["mean"].item() == pytest.approx(expected)
    tested = metric_runs(table, "IVS")["IVS"]
    assert tested.mean() == pytest.approx(expected)


def test_pareto_ineligible_runs() -> None:
    frame = pl.DataFrame(
        {
            "status": ["ok", "ok", "timeout", None],
            "judge_status": ["ok", "judge_failed", "ok", "ok"],
        }
    )
    assert frame.select(pareto_ineligible())["status"].to_list() == [False, True, True, True]


def test_one_dollar_formula_for_numbers_and_columns() -> None:
    price = ModelPrice(input_per_mtok=0.5, output_per_mtok=2.0)
    assert usd(2_000_000, 1_000_000, 0.5, 2.0) == pytest.approx(3.0)
    assert usd_of(2_000_000, 1_000_000, price) == pytest.approx(3.0)
    assert usd_of(10, 10, None) is None  # unpriced: unknown, never 0
    frame = pl.DataFrame({"p": [2_000_000, 0], "c": [1_000_000, 4], "i": [0.5, None]})
    dollars = frame.select(usd(pl.col("p"), pl.col("c"), pl.col("i"), 2.0).alias("usd"))["usd"]
    assert dollars.to_list()[0] == pytest.approx(3.0) and dollars.to_list()[1] is None


def test_a_failed_judgement_is_off_the_front_in_stack_table_and_bootstrap() -> None:
    """One rule for an unknown judgement: stack "a" beats "b" on TCR at equal CT and V, but
    one of its judgements failed. The stack table keeps it off the front; so does every
    bootstrap resample (share 0), including those that skip the failed task, and "b" is
    never pushed off (share 1)."""
    good = [("ok", "ok", True, 0.5, 10.0, 0.5)]
    a = _run_table([("ok", "ok", True, 0.5, 10.0, 1.0)], tasks=12)
    a = a.with_columns(
        pl.when(pl.col("task_id") == "t0")
        .then(pl.lit("judge_failed"))
        .otherwise(pl.col("judge_status"))
        .alias("judge_status"),
        pl.when(pl.col("task_id") == "t0").then(None).otherwise(pl.col("TCR")).alias("TCR"),
    )
    b = _run_table(good, tasks=12).with_columns(model=pl.lit("b"), run_id="b" + pl.col("run_id"))
    table = pl.concat([a.with_columns(model=pl.lit("a")), b])
    stacks = stack_metrics(table).sort("model")
    assert stacks["pareto_optimal"].to_list() == [False, True]
    effects = bootstrap_effects(table, resamples=200, metrics=("TCR",), min_n=5)
    shares = effects.filter(metric="pareto").sort("model")["mean"].to_list()
    assert shares == [0.0, 1.0]

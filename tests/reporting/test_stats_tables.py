"""The statistics tables beyond the paper's, and the judge gate on every judge-based table."""

from __future__ import annotations

import polars as pl

from mastif.analysis.inference import MIN_TASKS_FOR_CI, gate_verdict
from mastif.reporting.stats_tables import (
    GATE_COLUMN,
    JUDGE_TABLES,
    effects_table,
    with_gate,
    with_judge_gates,
)


def validity(
    kappa: float | None, n: int = 40, n_tasks: int = 20, check: tuple[int, int] = (20, 20)
) -> pl.DataFrame:
    """A judge-validity table's pooled row (the gate reads nothing else)."""
    ok, failed = check
    return pl.DataFrame(
        {"scope": ["pooled"], "n": [n], "n_tasks": [n_tasks], "n_check_success": [ok],
         "n_check_failure": [failed], "n_judge_success": [n // 2], "n_judge_failure": [n // 2],
         "kappa": [kappa], "min_kappa": [0.4], "gate_min_tasks": [15],
         "gate_min_per_class": [10]},
        schema_overrides={"kappa": pl.Float64},
    )  # fmt: skip


def test_with_gate_puts_the_verdict_on_the_rows_of_judge_scores() -> None:
    table = pl.DataFrame({"metric": ["success", "TCR", "TU", "TA", "CT", None]})
    verdict = gate_verdict(validity(0.1))
    out = with_gate(table, verdict, "metric")
    assert out[GATE_COLUMN].to_list() == [None, *[verdict.label] * 3, None, None]
    assert verdict.label == "NOT validated: κ 0.10 < 0.4"
    six = pl.DataFrame({"Metric": ["Task completion (TCR)", "Convergence time (CT)"]})
    assert with_gate(six, verdict, "Metric")[GATE_COLUMN].to_list() == [verdict.label, None]
    assert with_gate(six, verdict)[GATE_COLUMN].to_list() == [verdict.label] * 2


def test_every_judge_based_table_gets_the_one_verdict() -> None:
    tables = {name: pl.DataFrame({"metric": ["TCR", "CT"], "Metric": ["TCR", "CT"]})
              for name in (*JUDGE_TABLES, "table4_tool_use", "repeats")}  # fmt: skip
    for case, status in (
        (validity(0.62), "validated"),
        (validity(0.12), "NOT validated"),
        # every check failed: κ 0 or undefined by arithmetic, never "NOT validated: κ 0.00"
        (validity(0.0, check=(0, 40)), "not assessable"),
        (validity(0.9, n_tasks=2), "not assessable"),
        (validity(0.9, check=(3, 37)), "not assessable"),
        (pl.DataFrame(), "not assessable"),
    ):
        verdict = gate_verdict(case)
        assert verdict.status == status
        out, lines = with_judge_gates(tables, case)
        assert set(lines) == set(JUDGE_TABLES)
        for name in JUDGE_TABLES:
            assert verdict.label in out[name][GATE_COLUMN].to_list(), name
            assert lines[name] == f"Judge gate: {verdict.text}."
        assert GATE_COLUMN not in out["table4_tool_use"].columns
    one_class = gate_verdict(validity(0.0, check=(0, 40)))
    assert one_class.label == "not assessable: the checks have one class"
    assert "0.00 < 0.4" not in one_class.text and "all 40 failed" in one_class.text


def test_effects_table_shows_mean_and_interval_per_metric_and_the_pareto_share() -> None:
    rows = [
        ("m", "p", "f", "TCR", 30, 0.5, 0.3, 0.7),
        ("m", "p", "f", "CT", 30, 12.345, 10.0, 15.0),
        # an interval over fewer than MIN_TASKS_FOR_CI tasks is not a CI: the mean alone
        ("m", "p", "f", "V", MIN_TASKS_FOR_CI - 1, 500.0, 400.0, 600.0),
        ("m", "p", "f", "success", 1, 1.0, None, None),  # one task: mean alone
        ("m", "p", "f", "pareto", 2000, 0.25, None, None),
    ]
    effects = pl.DataFrame(
        rows,
        schema=["model", "protocol", "framework", "metric", "n_tasks", "mean", "ci_low",
                "ci_high"],
        orient="row",
    )  # fmt: skip
    row = effects_table(effects).row(0, named=True)
    assert row["TCR"] == "0.500 [0.300, 0.700]"
    assert row["CT"] == "12.3 [10.0, 15.0]"
    assert row["success"] == "1.000"
    assert row["V"] == "500.0"
    assert row["pareto_share"] == 0.25 and row["n_tasks"] == 30
    assert row["TUSR"] is None  # a metric without rows stays empty

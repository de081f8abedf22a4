"""The statistics tables beyond the paper's, and the judge's validity gate on Table 2."""

from __future__ import annotations

import polars as pl

from mastif.analysis.inference import MIN_TASKS_FOR_CI
from mastif.reporting.stats_tables import effects_table, judge_gate, with_judge_gate


def validity(kappa: float | None, validated: bool | None, n: int = 40) -> pl.DataFrame:
    return pl.DataFrame(
        {"scope": ["pooled"], "model": [None], "protocol": [None], "framework": [None],
         "n": [n], "kappa": [kappa], "min_kappa": [0.4], "validated": [validated],
         "note": [None]},
        schema_overrides={"model": pl.String, "protocol": pl.String, "framework": pl.String,
                          "kappa": pl.Float64, "validated": pl.Boolean, "note": pl.String},
    )  # fmt: skip


def test_the_gate_warns_below_min_kappa_and_when_kappa_is_unknown() -> None:
    status, warning = judge_gate(validity(0.62, True))
    assert status.startswith("yes") and warning is None
    status, warning = judge_gate(validity(0.12, False))
    assert status == "no: pooled κ 0.12 < 0.4 (n = 40)"
    assert warning is not None and "not validated" in warning and "0.12" in warning
    status, warning = judge_gate(validity(None, None))
    assert status.startswith("no: pooled κ unknown") and warning is not None
    status, warning = judge_gate(validity(0.5, True).clear())
    assert status == "unknown" and warning is not None


def test_table2_gets_the_gates_status_on_every_row() -> None:
    table2 = pl.DataFrame({"Stack": ["a", "b"], "TCR": [0.5, 0.7]})
    out = with_judge_gate(table2, validity(0.1, False))
    assert out["judge_validated"].to_list() == ["no: pooled κ 0.10 < 0.4 (n = 40)"] * 2


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

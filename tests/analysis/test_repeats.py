"""pass@k, pass^k, flip rate and ICC(1) across repeats (mastif.analysis.repeats), by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from mastif.analysis.repeats import NEEDS_REPEATS, REPEATS_SCHEMA, icc1, repeat_reliability
from tests.support.runs import runs_table


def _runs(outcomes: dict[str, list[bool | None]], tcr: dict[str, list[float]] | None = None):
    return runs_table(
        {"task_id": task, "repeat": r, "judge_status": "ok", "success": ok,
         "TCR": (tcr or {}).get(task, [0.5] * len(results))[r]}
        for task, results in outcomes.items()
        for r, ok in enumerate(results)
    )  # fmt: skip


def _value(out: pl.DataFrame, metric: str, k: int | None = None) -> float | None:
    rows = out.filter(pl.col("metric") == metric)
    if k is not None:
        rows = rows.filter(pl.col("k") == k)
    assert rows.height == 1
    return rows["value"][0]


def test_pass_at_k_pass_hat_k_and_flip_rate_by_hand() -> None:
    # t1: 1 of 3, t2: 3 of 3, t3: 0 of 3
    out = repeat_reliability(
        _runs({"t1": [True, False, False], "t2": [True] * 3, "t3": [False] * 3})
    )
    assert out.schema == pl.Schema(REPEATS_SCHEMA)
    # pass@k per task: t1 1 - C(2,k)/C(3,k) = 1/3, 2/3, 1; t2 1; t3 0
    assert _value(out, "pass@k", 1) == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert _value(out, "pass@k", 2) == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert _value(out, "pass@k", 3) == pytest.approx((1 + 1 + 0) / 3)
    # pass^k per task: t1 C(1,k)/C(3,k) = 1/3, 0, 0; t2 1; t3 0
    assert _value(out, "pass^k", 1) == pytest.approx(4 / 9)
    assert _value(out, "pass^k", 2) == pytest.approx(1 / 3)
    assert _value(out, "pass^k", 3) == pytest.approx(1 / 3)
    assert _value(out, "flip_rate") == pytest.approx(1 / 3)  # only t1 flips
    assert out.filter(pl.col("metric") == "pass@k")["n_tasks"].to_list() == [3, 3, 3]


def test_missing_checks_leave_tasks_out_of_the_larger_k() -> None:
    out = repeat_reliability(_runs({"t1": [True, None, False], "t2": [True, True, True]}))
    # t1 has 2 checked runs: in k = 1, 2, not in k = 3
    assert out.filter(pl.col("metric") == "pass@k")["n_tasks"].to_list() == [2, 2, 1]
    assert _value(out, "pass@k", 2) == pytest.approx((1.0 + 1.0) / 2)  # t1: 1 - C(1,2)/C(2,2)
    assert _value(out, "pass^k", 3) == pytest.approx(1.0)
    assert _value(out, "flip_rate") == pytest.approx(1 / 2)


def _anova_icc1(groups: list[list[float]]) -> float:
    """ICC(1) = (MSB - MSW) / (MSB + (k - 1) MSW), balanced one-way ANOVA, by hand."""
    k, g = len(groups[0]), len(groups)
    grand = np.mean([x for grp in groups for x in grp])
    msb = k * sum((np.mean(grp) - grand) ** 2 for grp in groups) / (g - 1)
    msw = sum((x - np.mean(grp)) ** 2 for grp in groups for x in grp) / (g * (k - 1))
    return (msb - msw) / (msb + (k - 1) * msw)


def test_icc_equals_the_one_way_anova_icc() -> None:
    tcr = {"t1": [0.9, 1.0, 0.7], "t2": [0.1, 0.3, 0.0], "t3": [0.5, 0.7, 0.5],
           "t4": [0.0, 0.3, 0.1], "t5": [1.0, 0.7, 1.0]}  # fmt: skip
    success = {"t1": [True, True, False], "t2": [False, False, False], "t3": [True, False, True],
               "t4": [False, True, False], "t5": [True, True, True]}  # fmt: skip
    out = repeat_reliability(_runs(success, tcr))
    assert _value(out, "ICC_TCR") == pytest.approx(_anova_icc1(list(tcr.values())))
    as_float = [[float(x) for x in v] for v in success.values()]
    assert _value(out, "ICC_success") == pytest.approx(_anova_icc1(as_float))


def test_icc_unbalanced_uses_the_adjusted_group_size() -> None:
    groups = [[1.0, 2.0, 3.0], [6.0, 7.0], [2.0, 2.5, 3.5, 4.0]]
    values = np.array([x for g in groups for x in g])
    labels = np.array([i for i, g in enumerate(groups) for _ in g])
    n, sizes = values.size, np.array([len(g) for g in groups])
    grand = values.mean()
    msb = sum(len(g) * (np.mean(g) - grand) ** 2 for g in groups) / (len(groups) - 1)
    msw = sum((x - np.mean(g)) ** 2 for g in groups for x in g) / (n - len(groups))
    k0 = (n - (sizes**2).sum() / n) / (len(groups) - 1)
    value, note = icc1(values, labels)
    assert value == pytest.approx((msb - msw) / (msb + (k0 - 1) * msw))
    assert note is None


def test_planted_reliability_is_detected() -> None:
    rng = np.random.default_rng(4)
    stable = {f"t{i}": [bool(i % 2)] * 4 for i in range(20)}  # each task always the same
    coin = {f"t{i}": [bool(x) for x in rng.random(4) < 0.5] for i in range(200)}
    out_stable = repeat_reliability(_runs(stable))
    assert _value(out_stable, "flip_rate") == 0.0
    assert _value(out_stable, "ICC_success") == 1.0
    out_coin = repeat_reliability(_runs(coin))
    assert abs(_value(out_coin, "ICC_success")) < 0.15
    assert _value(out_coin, "flip_rate") > 0.7


def test_no_variance_is_undefined_not_a_number() -> None:
    out = repeat_reliability(_runs({"t1": [True, True], "t2": [True, True]}))
    row = out.filter(pl.col("metric") == "ICC_success")
    assert row["value"][0] is None and row["note"][0].startswith("undefined")


def test_one_repeat_gives_null_rows_with_a_note() -> None:
    out = repeat_reliability(_runs({"t1": [True], "t2": [False]}))
    assert out.height == 5
    assert out["value"].is_null().all()
    assert (out["note"] == NEEDS_REPEATS).all()


def test_table_without_repeat_column() -> None:
    runs = _runs({"t1": [True, False], "t2": [True, True]}).drop("repeat")
    out = repeat_reliability(runs)
    assert _value(out, "pass@k", 2) == pytest.approx(1.0)
    single = _runs({"t1": [True]}).drop("repeat")
    assert (repeat_reliability(single)["note"] == NEEDS_REPEATS).all()

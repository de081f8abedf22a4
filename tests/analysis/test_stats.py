"""The stats procedure agrees with direct scipy / scikit-posthocs calls; degenerate cases skip."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import scikit_posthocs as sp
from scipy import stats as st

from mastif.analysis.inference import small_sample_reason
from mastif.analysis.stats import (
    GROUPS_SCHEMA,
    POSTHOC_SCHEMA,
    TESTS_SCHEMA,
    best_levels,
    significance_stars,
    test_factors,
)
from tests.support.runs import runs_table

LEVELS = ["alpha", "beta", "gamma"]


def _table(samples: dict[str, np.ndarray], metric: str = "CT") -> pl.DataFrame:
    """One run per value; the i-th value of every level is task i (the stacks share tasks)."""
    rows = [
        {
            "model": lvl,
            "protocol": "standard",
            "framework": "lg",
            "task_id": f"t{i:03d}",
            metric: float(x),
        }
        for lvl, xs in samples.items()
        for i, x in enumerate(xs)
    ]
    return pl.DataFrame(rows)


def _one(out: dict[str, pl.DataFrame], name: str, metric: str, factor: str) -> pl.DataFrame:
    return out[name].filter((pl.col("metric") == metric) & (pl.col("factor") == factor))


@pytest.fixture
def skewed() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {lvl: rng.lognormal(mean=i * 0.4, sigma=1.2, size=40) for i, lvl in enumerate(LEVELS)}


@pytest.fixture
def normal() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {lvl: rng.normal(loc=i * 0.6, scale=1.0, size=30) for i, lvl in enumerate(LEVELS)}


def test_skewed_data_uses_kruskal_and_matches_scipy(skewed: dict[str, np.ndarray]) -> None:
    assert any(st.shapiro(x).pvalue <= 0.05 for x in skewed.values())  # precondition
    out = test_factors(_table(skewed), metrics=["CT"], factors=["model"])
    assert out["tests"].schema == pl.Schema(TESTS_SCHEMA)
    assert out["groups"].schema == pl.Schema(GROUPS_SCHEMA)
    assert out["posthoc"].schema == pl.Schema(POSTHOC_SCHEMA)
    t = out["tests"].row(0, named=True)
    ref = st.kruskal(*skewed.values())
    assert (t["test"], t["all_normal"], t["n_levels"], t["note"]) == ("kruskal", False, 3, None)
    assert t["statistic"] == pytest.approx(ref.statistic, rel=1e-12)
    assert t["p_value"] == pytest.approx(ref.pvalue, rel=1e-12)

    # groups: descriptive stats, Shapiro, and mean ranks over all values of the metric
    allv = np.concatenate(list(skewed.values()))
    ranks = st.rankdata(allv)
    g = out["groups"].sort("level")
    assert g["level"].to_list() == LEVELS
    start = 0
    for row, (lvl, x) in zip(g.iter_rows(named=True), skewed.items(), strict=True):
        assert row["level"] == lvl
        assert row["n"] == x.size
        assert row["mean"] == pytest.approx(x.mean())
        assert row["std"] == pytest.approx(x.std(ddof=1))
        assert row["median"] == pytest.approx(np.median(x))
        assert row["mean_rank"] == pytest.approx(ranks[start : start + x.size].mean())
        sw = st.shapiro(x)
        assert row["shapiro_W"] == pytest.approx(sw.statistic)
        assert row["shapiro_p"] == pytest.approx(sw.pvalue)
        start += x.size

    # Dunn: every pair, level_a < level_b, same p as scikit-posthocs
    ref_dunn = sp.posthoc_dunn(
        _table(skewed).to_pandas(), val_col="CT", group_col="model", p_adjust="holm"
    )
    ph = out["posthoc"]
    assert list(zip(ph["level_a"], ph["level_b"], strict=True)) == [
        ("alpha", "beta"),
        ("alpha", "gamma"),
        ("beta", "gamma"),
    ]
    assert set(ph["p_adjust"]) == {"holm"}
    for r in ph.iter_rows(named=True):
        assert r["p_adj"] == pytest.approx(ref_dunn.loc[r["level_a"], r["level_b"]], rel=1e-12)


def test_normal_data_uses_anova(normal: dict[str, np.ndarray]) -> None:
    assert all(st.shapiro(x).pvalue > 0.05 for x in normal.values())  # precondition
    out = test_factors(_table(normal), metrics=["CT"], factors=["model"])
    t = out["tests"].row(0, named=True)
    ref = st.f_oneway(*normal.values())
    assert (t["test"], t["all_normal"]) == ("anova", True)
    assert t["statistic"] == pytest.approx(ref.statistic, rel=1e-12)
    assert t["p_value"] == pytest.approx(ref.pvalue, rel=1e-12)
    assert out["posthoc"].height == 3  # Dunn is reported in the ANOVA branch too


def test_small_group_is_not_shown_normal(normal: dict[str, np.ndarray]) -> None:
    data = dict(normal)
    data["gamma"] = normal["gamma"][:2]  # n < 3: Shapiro impossible
    out = test_factors(_table(data), metrics=["CT"], factors=["model"], min_n=2)
    gamma = _one(out, "groups", "CT", "model").filter(pl.col("level") == "gamma").row(0, named=True)
    assert gamma["shapiro_W"] is None and gamma["shapiro_p"] is None
    t = out["tests"].row(0, named=True)
    ref = st.kruskal(*data.values())
    assert (t["test"], t["all_normal"]) == ("kruskal", False)
    assert t["statistic"] == pytest.approx(ref.statistic)


def test_nulls_dropped_and_unadjusted_dunn(skewed: dict[str, np.ndarray]) -> None:
    table = pl.concat(
        [
            _table(skewed),
            pl.DataFrame(
                {
                    "model": ["alpha"],
                    "protocol": ["standard"],
                    "framework": ["lg"],
                    "task_id": ["t999"],
                    "CT": [None],
                },
                schema=_table(skewed).schema,
            ),
        ]
    )
    out = test_factors(table, metrics=["CT"], factors=["model"], p_adjust=None)
    t = out["tests"].row(0, named=True)
    assert t["statistic"] == pytest.approx(st.kruskal(*skewed.values()).statistic)
    ref = sp.posthoc_dunn(_table(skewed).to_pandas(), val_col="CT", group_col="model")
    ph = out["posthoc"].row(0, named=True)
    assert ph["p_adjust"] == "none"
    assert ph["p_adj"] == pytest.approx(ref.loc["alpha", "beta"])


def test_single_level_factor_is_skipped(skewed: dict[str, np.ndarray]) -> None:
    out = test_factors(_table(skewed), metrics=["CT"], factors=["model", "protocol"])
    t = _one(out, "tests", "CT", "protocol").row(0, named=True)
    assert (t["test"], t["n_levels"], t["statistic"], t["p_value"], t["all_normal"]) == (
        "skipped",
        1,
        None,
        None,
        None,
    )
    assert "one protocol level" in t["note"]
    assert _one(out, "groups", "CT", "protocol").height == 1  # still described
    assert _one(out, "posthoc", "CT", "protocol").height == 0
    assert _one(out, "tests", "CT", "model")["test"].item() == "kruskal"


def test_constant_values_are_skipped() -> None:
    table = _table({"alpha": np.ones(5), "beta": np.ones(4)}, metric="TUSR")
    with np.errstate(all="raise"):
        out = test_factors(table, metrics=["TUSR"], factors=["model"])
    t = out["tests"].row(0, named=True)
    assert (t["test"], t["n_levels"]) == ("skipped", 2)
    assert "identical" in t["note"]
    assert out["posthoc"].height == 0
    assert out["groups"]["mean_rank"].to_list() == [5.0, 5.0]


def test_all_null_metric_and_empty_table() -> None:
    table = pl.DataFrame(
        {"model": ["a", "b"], "protocol": ["p", "p"], "framework": ["f", "f"], "TCR": [None, None]},
        schema={
            "model": pl.String,
            "protocol": pl.String,
            "framework": pl.String,
            "TCR": pl.Float64,
        },
    )
    out = test_factors(table, metrics=["TCR"])
    assert out["tests"]["test"].to_list() == ["skipped"] * 3
    assert all("no non-null" in n for n in out["tests"]["note"])
    assert out["groups"].height == 0 and out["groups"].schema == pl.Schema(GROUPS_SCHEMA)
    empty = test_factors(table.head(0), metrics=["TCR"], factors=["model"])
    assert empty["tests"]["n_levels"].to_list() == [0]


@pytest.mark.parametrize(
    ("p", "stars"),
    [
        (0.0, "***"),
        (0.000999, "***"),
        (0.001, "**"),
        (0.00999, "**"),
        (0.01, "*"),
        (0.0499, "*"),
        (0.05, ""),
        (0.7, ""),
        (None, ""),
        (math.nan, ""),
    ],
)
def test_significance_stars(p: float | None, stars: str) -> None:
    assert significance_stars(p) == stars


def test_best_levels_direction() -> None:
    groups = pl.DataFrame(
        {
            "metric": ["TCR", "TCR", "CT", "CT", "V", "V", "IVS"],
            "factor": ["model"] * 7,
            "level": ["a", "b", "a", "b", "b", "a", "a"],
            "mean_rank": [10.0, 20.0, 10.0, 20.0, 3.0, 3.0, None],
        }
    )
    best = best_levels(groups, {"TCR": True, "CT": False, "V": False, "IVS": True})
    got = {r["metric"]: (r["level"], r["mean_rank"]) for r in best.iter_rows(named=True)}
    assert got == {"TCR": ("b", 20.0), "CT": ("a", 10.0), "V": ("a", 3.0)}  # V tie → "a"
    with pytest.raises(ValueError, match="TCR"):
        best_levels(groups, {"CT": False, "V": False})


def test_best_levels_from_test_factors(skewed: dict[str, np.ndarray]) -> None:
    # gamma has the largest location: highest ranks, so best for IVS and worst for CT.
    table = _table(skewed).with_columns(IVS=pl.col("CT"))
    out = test_factors(table, metrics=["CT", "IVS"], factors=["model"])
    best = best_levels(out["groups"])
    got = dict(zip(best["metric"], best["level"], strict=True))
    g = out["groups"].filter(pl.col("metric") == "CT").sort("mean_rank")
    assert got == {"CT": g["level"][0], "IVS": g["level"][-1]}
    assert got["CT"] != got["IVS"]


def test_alpha_decides_normality(normal: dict[str, np.ndarray]) -> None:
    # Normal means Shapiro p > alpha (strict): at alpha == the smallest p that level fails.
    max_p = max(float(st.shapiro(x).pvalue) for x in normal.values())
    min_p = min(float(st.shapiro(x).pvalue) for x in normal.values())
    below = test_factors(_table(normal), metrics=["CT"], factors=["model"], alpha=max_p * 0.999)
    at = test_factors(_table(normal), metrics=["CT"], factors=["model"], alpha=min_p)
    loose = test_factors(_table(normal), metrics=["CT"], factors=["model"], alpha=min_p * 0.999)
    assert below["tests"]["test"].item() == "kruskal"
    assert at["tests"]["test"].item() == "kruskal"
    assert loose["tests"]["test"].item() == "anova"


def test_zero_range_group_is_not_shown_normal(normal: dict[str, np.ndarray]) -> None:
    # scipy returns W = p = 1 (with a warning) for a constant sample; that is no evidence of
    # normality, so the level gets null W/p and the factor goes to Kruskal-Wallis.
    data = {**normal, "gamma": np.full(10, 2.5)}
    out = test_factors(_table(data), metrics=["CT"], factors=["model"])
    gamma = out["groups"].filter(pl.col("level") == "gamma").row(0, named=True)
    assert (gamma["shapiro_W"], gamma["shapiro_p"], gamma["std"]) == (None, None, 0.0)
    assert out["tests"]["test"].item() == "kruskal"
    assert out["tests"]["statistic"].item() == pytest.approx(st.kruskal(*data.values()).statistic)


def test_ct_and_v_are_tested_over_completed_runs_only(skewed: dict[str, np.ndarray]) -> None:
    # timed-out runs at a 0.001 s "wall time" and 1 token would rank best; they must not enter
    ok = _table(skewed).with_columns(status=pl.lit("ok"), V=pl.col("CT"), TCR=pl.col("CT"))
    cut = ok.head(20).with_columns(
        status=pl.lit("timeout"), CT=pl.lit(0.001), V=pl.lit(1.0), TCR=pl.lit(0.0)
    )
    out = test_factors(pl.concat([ok, cut]), metrics=["CT", "V", "TCR"], factors=["model"])
    expected = st.kruskal(*skewed.values()).statistic
    for metric in ("CT", "V"):
        t = _one(out, "tests", metric, "model").row(0, named=True)
        assert t["statistic"] == pytest.approx(expected)
        assert _one(out, "groups", metric, "model")["n"].to_list() == [40, 40, 40]
    # other metrics keep every run: TCR has the 20 timed-out runs in level alpha
    assert _one(out, "groups", "TCR", "model")["n"].to_list() == [60, 40, 40]


def test_small_level_is_insufficient_with_null_p(skewed: dict[str, np.ndarray]) -> None:
    data = {**skewed, "gamma": skewed["gamma"][:3]}
    out = test_factors(_table(data), metrics=["CT"], factors=["model"], min_n=5)
    ct = out["tests"].row(0, named=True)
    assert ct["test"] == "kruskal"
    assert (ct["statistic"], ct["p_value"], ct["p_adjusted"], ct["effect"]) == (None,) * 4
    # the guard counts tasks (here one run per task and level), not runs
    assert ct["note"] == "insufficient: n = 3 tasks < min_n 5 (model gamma: 3)"
    assert ct["n_tasks"] == 40
    # the Dunn pairs are listed without a p, with the same note
    assert out["posthoc"].height == 3 and out["posthoc"]["p_adj"].null_count() == 3
    assert set(out["posthoc"]["note"]) == {ct["note"]}
    assert out["groups"].filter(pl.col("metric") == "CT").height == 3  # still described
    ok = test_factors(_table(data), metrics=["CT"], factors=["model"], min_n=3)
    assert ok["tests"]["p_value"].item() == pytest.approx(st.kruskal(*data.values()).pvalue)


def test_ordinal_scores_always_get_kruskal_with_epsilon2(normal: dict[str, np.ndarray]) -> None:
    # the same normal data that picks ANOVA for CT gets Kruskal-Wallis for TU, TA, TCR
    table = _table(normal).with_columns(TU=pl.col("CT"), TA=pl.col("CT"), TCR=pl.col("CT"))
    out = test_factors(table, metrics=["CT", "TU", "TA", "TCR"], factors=["model"])
    tests = {r["metric"]: r for r in out["tests"].iter_rows(named=True)}
    assert tests["CT"]["test"] == "anova"
    f = st.f_oneway(*normal.values()).statistic
    n, k = sum(x.size for x in normal.values()), len(normal)
    assert tests["CT"]["effect_name"] == "eta2"
    assert tests["CT"]["effect"] == pytest.approx(f * (k - 1) / (f * (k - 1) + n - k))
    h = st.kruskal(*normal.values()).statistic
    for metric in ("TU", "TA", "TCR"):
        t = tests[metric]
        assert (t["test"], t["all_normal"], t["effect_name"]) == ("kruskal", None, "epsilon2")
        assert t["statistic"] == pytest.approx(h)
        assert t["effect"] == pytest.approx((h - k + 1) / (n - k))


@pytest.mark.parametrize("method", ["holm", "fdr_bh"])
def test_family_adjustment_across_omnibus_rows(skewed: dict[str, np.ndarray], method: str) -> None:
    table = _table(skewed).with_columns(V=pl.col("CT") * 2, TUSR=pl.lit(0.5))
    out = test_factors(table, metrics=["CT", "V", "TUSR"], factors=["model"], family_adjust=method)
    tests = out["tests"]
    with_p = tests.filter(pl.col("p_value").is_not_null())
    assert with_p.height == 2  # TUSR is constant: skipped, no p, no p_adjusted
    from statsmodels.stats.multitest import multipletests

    expected = multipletests(with_p["p_value"].to_list(), method=method)[1]
    assert with_p["p_adjusted"].to_list() == pytest.approx(list(expected))
    assert tests.filter(pl.col("metric") == "TUSR")["p_adjusted"].item() is None


def _crossed(n_tasks: int, repeats: int, effect: float, seed: int) -> pl.DataFrame:
    """3 models on the same tasks, ``repeats`` runs each; a task effect; model "m3" is
    ``effect`` slower (log scale)."""
    rng = np.random.default_rng(seed)
    task = rng.normal(3.0, 0.6, n_tasks)
    rows = [
        {
            "model": m,
            "task_id": f"t{t:02d}",
            "repeat": r,
            "CT": float(np.exp(task[t] + effect * (m == "m3") + rng.normal(0, 0.3))),
            "TCR": float(rng.integers(0, 5) / 4),
        }
        for t in range(n_tasks)
        for r in range(repeats)
        for m in ("m1", "m2", "m3")
    ]
    return runs_table(rows)


def test_two_tasks_give_no_p_value_however_many_runs() -> None:
    # 2 tasks x 20 repeats: 40 runs per level (the old guard counted runs: p-values and
    # Dunn pairs from 2 tasks); the tasks are the independent unit
    out = test_factors(_crossed(2, 20, 1.0, 3), metrics=["CT", "TCR"], factors=["model"])
    reason = small_sample_reason(2, 5)
    tests, posthoc = out["tests"], out["posthoc"]
    assert tests["test"].to_list() == ["kruskal", "kruskal"]
    for col in ("statistic", "p_value", "p_adjusted", "effect"):
        assert tests[col].null_count() == 2, col
    assert set(tests["note"]) == {reason} and set(tests["n_tasks"]) == {2}
    assert posthoc.height == 6 and posthoc["p_adj"].null_count() == 6
    assert set(posthoc["note"]) == {reason} and set(posthoc["n_tasks"]) == {2}
    assert set(out["groups"]["n"]) == {40}  # still described
    # no task column: the independent unit is unknown, so no p either
    blind = test_factors(_crossed(30, 1, 1.0, 3).drop("task_id"), metrics=["CT"])
    assert blind["tests"]["p_value"].null_count() == blind["tests"].height


def test_thirty_tasks_with_a_planted_effect_give_adjusted_p() -> None:
    out = test_factors(_crossed(30, 1, 1.0, 3), metrics=["CT", "TCR"], factors=["model"])
    ct = _one(out, "tests", "CT", "model").row(0, named=True)
    assert ct["n_tasks"] == 30 and ct["note"] is None
    assert ct["p_value"] < 0.05 and ct["p_adjusted"] < 0.05
    dunn = _one(out, "posthoc", "CT", "model")
    assert dunn["p_adj"].null_count() == 0 and dunn["note"].null_count() == 3
    m3 = dunn.filter(pl.col("level_b") == "m3")
    assert (m3["p_adj"] < 0.05).all()

"""Task-blocked tests (mastif.analysis.blocked) agree with scipy / statsmodels on synthetic crossed data."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from scipy import stats as st
from statsmodels.stats.multitest import multipletests

from mastif.analysis import blocked
from mastif.analysis.blocked import (
    PAIRS_SCHEMA,
    TESTS_SCHEMA,
    blocked_tests,
    kendalls_w,
    rank_biserial,
)
from mastif.analysis.inference import small_sample_reason

MODELS = ["m1", "m2"]
PROTOCOLS = ["a2a", "mcp", "standard"]
FRAMEWORKS = ["crewai", "langchain", "langgraph", "sk"]


def _runs(
    n_tasks: int = 12,
    repeats: int = 1,
    seed: int = 0,
    ct_effect: dict[str, float] | None = None,
    success_effect: dict[str, float] | None = None,
    models: list[str] = MODELS,
) -> pl.DataFrame:
    """A crossed experiment: every stack runs every task and repeat; task effects + noise."""
    rng = np.random.default_rng(seed)
    ct_effect = ct_effect or {}
    success_effect = success_effect or {}
    task_ct = rng.lognormal(3.0, 0.6, n_tasks)
    task_p = rng.uniform(0.2, 0.8, n_tasks)
    rows = []
    for t, r, m, p, f in itertools.product(
        range(n_tasks), range(repeats), models, PROTOCOLS, FRAMEWORKS
    ):
        ct = task_ct[t] * rng.lognormal(0.0, 0.3) * ct_effect.get(p, 1.0)
        prob = min(1.0, task_p[t] + success_effect.get(p, 0.0))
        rows.append(
            {
                "run_id": f"{m}-{p}-{f}-{t}-{r}",
                "model": m,
                "protocol": p,
                "framework": f,
                "task_id": f"t{t:02d}",
                "repeat": r,
                "status": "ok",
                "CT": float(ct),
                "TCR": float(rng.integers(1, 6) / 5),
                "success": bool(rng.random() < prob),
            }
        )
    return pl.DataFrame(rows)


def _row(df: pl.DataFrame, metric: str, factor: str) -> dict:
    return df.filter((pl.col("metric") == metric) & (pl.col("factor") == factor)).row(0, named=True)


def _matrix(runs: pl.DataFrame, metric: str, factor: str) -> tuple[np.ndarray, list[str]]:
    """Reference collapse written independently: per task and level, the mean over the
    task's runs at that level (repeats and the other factors' stacks; balanced design)."""
    levels = sorted(runs[factor].unique().to_list())
    values: dict[tuple[str, str], list[float]] = {}
    for t, lv, v in zip(runs["task_id"], runs[factor], runs[metric], strict=True):
        values.setdefault((t, lv), []).append(float(v))
    tasks = sorted({t for t, _ in values})
    return np.array([[np.mean(values[(t, lv)]) for lv in levels] for t in tasks]), levels


def test_friedman_and_kendalls_w_match_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocked, "PERMUTATIONS", 1999)  # the reference loops in Python
    runs = _runs(seed=1)
    out = blocked_tests(runs, metrics=["CT"], factors=["protocol", "framework"])
    assert out["tests"].schema == pl.Schema(TESTS_SCHEMA)
    assert out["pairs"].schema == pl.Schema(PAIRS_SCHEMA)
    for factor in ("protocol", "framework"):
        x, levels = _matrix(runs, "CT", factor)
        ref = st.friedmanchisquare(*x.T)
        row = _row(out["tests"], "CT", factor)
        n, k = x.shape
        assert (row["test"], row["n_blocks"], row["n_levels"], row["note"]) == (
            "friedman",
            12,
            len(levels),
            None,
        )
        assert row["statistic"] == pytest.approx(ref.statistic, rel=1e-12)
        # 12 blocks < PERMUTATION_BELOW: the p is a within-block permutation p, equal to one
        # computed with Friedman's own statistic on the same shuffles
        perm = st.permutation_test(
            tuple(x.T), lambda *s: st.friedmanchisquare(*s).statistic,
            permutation_type="samples", vectorized=False, n_resamples=1999,
            alternative="greater", random_state=0,
        )  # fmt: skip
        assert row["p_method"].startswith("permutation")
        assert row["p_value"] == pytest.approx(perm.pvalue, rel=1e-12)
        assert row["p_value"] == pytest.approx(ref.pvalue, abs=0.05)  # near the chi2 one
        assert row["df"] == k - 1
        # Kendall's W by hand, from the rank sums (no ties in continuous CT)
        ranks = np.apply_along_axis(st.rankdata, 1, x)
        s = ((ranks.sum(axis=0) - n * (k + 1) / 2) ** 2).sum()
        w = 12 * s / (n**2 * (k**3 - k))
        assert row["effect_name"] == "kendalls_w"
        assert row["effect"] == pytest.approx(w, rel=1e-12)
        assert kendalls_w(ref.statistic, n, k) == pytest.approx(w, rel=1e-12)


def test_two_levels_use_wilcoxon_as_omnibus_with_rank_biserial() -> None:
    runs = _runs(seed=2)
    out = blocked_tests(runs, metrics=["CT"], factors=["model"])
    x, _ = _matrix(runs, "CT", "model")
    row = _row(out["tests"], "CT", "model")
    ref = st.wilcoxon(x[:, 0], x[:, 1])
    assert row["test"] == "wilcoxon (2 levels)"
    assert row["statistic"] == pytest.approx(ref.statistic)
    assert row["p_value"] == pytest.approx(ref.pvalue, rel=1e-12)
    # rank-biserial by hand: (R+ - R-) / total rank sum
    d = x[:, 0] - x[:, 1]
    r = st.rankdata(np.abs(d))
    assert row["effect"] == pytest.approx((r[d > 0].sum() - r[d < 0].sum()) / r.sum())
    pair = out["pairs"].row(0, named=True)
    assert (pair["level_a"], pair["level_b"], pair["n_pairs"]) == ("m1", "m2", 12)
    assert pair["p_value"] == pytest.approx(ref.pvalue, rel=1e-12)
    assert pair["p_adjusted"] == pytest.approx(ref.pvalue, rel=1e-12)  # a family of one


def test_rank_biserial_extremes() -> None:
    a = np.array([3.0, 4.0, 5.0, 6.0])
    assert rank_biserial(a, a - 1) == 1.0
    assert rank_biserial(a - 1, a) == -1.0
    assert rank_biserial(a, a) is None


def test_success_is_tested_as_the_tasks_success_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocked, "PERMUTATIONS", 1999)
    runs = _runs(seed=3, repeats=2)
    out = blocked_tests(runs, metrics=["success"], factors=["protocol"])
    # one block per task: the success rate over repeats and the model x framework stacks
    x, levels = _matrix(
        runs.with_columns(pl.col("success").cast(pl.Float64)), "success", "protocol"
    )
    assert levels == PROTOCOLS and x.shape == (12, 3)
    row = _row(out["tests"], "success", "protocol")
    assert (row["test"], row["n_blocks"], row["n_tasks"], row["n_levels"]) == (
        "friedman",
        12,
        12,
        3,
    )
    assert row["statistic"] == pytest.approx(st.friedmanchisquare(*x.T).statistic, rel=1e-12)
    assert row["df"] == 2 and row["effect_name"] == "kendalls_w"
    assert row["p_method"].startswith("permutation")
    assert row["p_value"] == pytest.approx(blocked.permutation_p(x, seed=0), rel=1e-12)

    # pairs: Wilcoxon signed-rank on the tasks' rates, difference in success rate, Holm
    pairs = out["pairs"].sort("level_a", "level_b")
    raw = []
    for r in pairs.iter_rows(named=True):
        a, b = x[:, PROTOCOLS.index(r["level_a"])], x[:, PROTOCOLS.index(r["level_b"])]
        ref = st.wilcoxon(a, b)
        assert (r["test"], r["n_pairs"], r["n_tasks"]) == ("wilcoxon", 12, 12)
        assert r["statistic"] == pytest.approx(ref.statistic)
        assert r["p_value"] == pytest.approx(ref.pvalue, rel=1e-12)
        assert r["effect_name"] == "diff_success_rate"
        assert r["effect"] == pytest.approx(a.mean() - b.mean())
        raw.append(ref.pvalue)
    expected = multipletests(raw, method="holm")[1]
    assert pairs["p_adjusted"].to_list() == pytest.approx(list(expected), rel=1e-12)

    # two levels: the Wilcoxon test is the omnibus, effect the difference in success rate
    two = blocked_tests(runs, metrics=["success"], factors=["model"])
    xm, _ = _matrix(runs.with_columns(pl.col("success").cast(pl.Float64)), "success", "model")
    row = _row(two["tests"], "success", "model")
    assert (row["test"], row["effect_name"]) == ("wilcoxon (2 levels)", "diff_success_rate")
    assert row["p_value"] == pytest.approx(st.wilcoxon(xm[:, 0], xm[:, 1]).pvalue, rel=1e-12)
    assert row["effect"] == pytest.approx(xm[:, 0].mean() - xm[:, 1].mean())


def test_the_task_is_the_block_whatever_the_repeats() -> None:
    # 6 tasks x 5 repeats x 24 stacks: 6 blocks, each the task's mean (not 30 task x repeat
    # blocks, nor 6 x 5 x 8 success blocks of the other factors' stacks)
    runs = _runs(n_tasks=6, repeats=5, seed=10)
    out = blocked_tests(runs, metrics=["CT", "success"], factors=["protocol", "framework"])
    tests = out["tests"]
    assert tests.height == 4
    assert tests["n_blocks"].to_list() == tests["n_tasks"].to_list() == [6] * 4
    assert set(out["pairs"]["n_pairs"]) == set(out["pairs"]["n_tasks"]) == {6}
    x, _ = _matrix(runs, "CT", "framework")
    assert _row(tests, "CT", "framework")["statistic"] == pytest.approx(
        st.friedmanchisquare(*x.T).statistic, rel=1e-12
    )
    # repeats of a stack are averaged before the stacks: a stack with more repeats does not
    # weigh more (drop 4 of 5 repeats of one stack on one task: the task's mean is the
    # mean of the stacks' means)
    drop = (
        (pl.col("task_id") == "t00") & (pl.col("model") == "m1") & (pl.col("framework") == "sk")
        & (pl.col("protocol") == "mcp") & (pl.col("repeat") > 0)
    )  # fmt: skip
    wide, key = blocked.block_matrix(runs.filter(~drop), "CT", "protocol")
    assert key == ["task_id"] and wide.height == 6
    t0 = runs.filter(~drop & (pl.col("task_id") == "t00") & (pl.col("protocol") == "mcp"))
    stack_means = t0.group_by("model", "framework").agg(pl.col("CT").mean())["CT"]
    got = wide.filter(pl.col("task_id") == "t00")["mcp"].item()
    assert got == pytest.approx(stack_means.mean(), rel=1e-12)


def test_planted_effect_is_detected_and_null_factor_is_not() -> None:
    runs = _runs(
        n_tasks=20, seed=4, ct_effect={"mcp": 1.3}, success_effect={"mcp": 0.3}, models=["m1"]
    )
    out = blocked_tests(runs, metrics=["CT", "success"], factors=["protocol"])
    ct = _row(out["tests"], "CT", "protocol")
    assert ct["p_value"] < 0.05 and ct["p_adjusted"] < 0.05
    assert _row(out["tests"], "success", "protocol")["p_value"] < 0.05
    pairs = out["pairs"].filter(pl.col("metric") == "CT")
    mcp = pairs.filter((pl.col("level_a") == "a2a") & (pl.col("level_b") == "mcp")).row(
        0, named=True
    )
    assert mcp["p_adjusted"] < 0.05 and mcp["effect"] < 0  # a2a faster than mcp
    # the model factor has a single level: no row
    assert out["tests"].filter(pl.col("factor") == "model").height == 0


def test_small_n_is_insufficient_with_null_p() -> None:
    runs = _runs(n_tasks=3, seed=5)
    reason = small_sample_reason(3, 5)
    out = blocked_tests(runs, metrics=["CT", "TCR"], factors=["protocol"], min_n=5)
    for metric in ("CT", "TCR"):
        row = _row(out["tests"], metric, "protocol")
        assert row["test"] == "friedman"
        assert (row["statistic"], row["p_value"], row["p_adjusted"], row["effect"]) == (
            None,
            None,
            None,
            None,
        )
        assert row["note"] == reason and row["n_tasks"] == 3
    assert out["pairs"].height == 6
    assert out["pairs"]["p_value"].null_count() == 6
    assert set(out["pairs"]["note"]) == {reason}
    # success: 3 tasks are 3 blocks (before issue 51 (task, repeat, model, framework) made
    # 24 blocks, which before issue 38 passed the guard: a p-value)
    few = blocked_tests(runs, metrics=["success"], factors=["protocol"], min_n=5)
    row = _row(few["tests"], "success", "protocol")
    assert (row["n_blocks"], row["n_tasks"], row["p_value"]) == (3, 3, None)
    assert row["note"] == reason
    assert few["pairs"]["p_value"].null_count() == few["pairs"].height == 3
    ok = blocked_tests(_runs(n_tasks=5, seed=5), metrics=["success"], factors=["protocol"])
    assert _row(ok["tests"], "success", "protocol")["p_value"] is not None
    # lowering min_n lets the test run
    low = blocked_tests(runs, metrics=["CT"], factors=["protocol"], min_n=3)
    assert _row(low["tests"], "CT", "protocol")["p_value"] is not None


def test_ct_uses_completed_runs_and_incomplete_blocks_are_dropped() -> None:
    runs = _runs(seed=6)
    # every run of task t00 on protocol mcp times out: that block lacks a level for CT
    cut = (pl.col("task_id") == "t00") & (pl.col("protocol") == "mcp")
    runs = runs.with_columns(
        status=pl.when(cut).then(pl.lit("timeout")).otherwise(pl.col("status")),
        CT=pl.when(cut).then(0.001).otherwise(pl.col("CT")),
    )
    out = blocked_tests(runs, metrics=["CT", "TCR"], factors=["protocol"])
    assert _row(out["tests"], "CT", "protocol")["n_blocks"] == 11
    assert _row(out["tests"], "TCR", "protocol")["n_blocks"] == 12  # all runs for TCR
    x, _ = _matrix(runs.filter(pl.col("task_id") != "t00"), "CT", "protocol")
    assert _row(out["tests"], "CT", "protocol")["statistic"] == pytest.approx(
        st.friedmanchisquare(*x.T).statistic
    )
    pairs = out["pairs"].filter(pl.col("metric") == "CT")
    keys = zip(pairs["level_a"], pairs["level_b"], strict=True)
    n_pairs = dict(zip(keys, pairs["n_pairs"], strict=True))
    assert n_pairs == {("a2a", "mcp"): 11, ("a2a", "standard"): 12, ("mcp", "standard"): 11}


@pytest.mark.parametrize("method", ["holm", "fdr_bh"])
def test_family_adjustment_equals_multipletests(method: str) -> None:
    runs = _runs(n_tasks=15, repeats=2, seed=7, ct_effect={"mcp": 1.2})
    out = blocked_tests(runs, metrics=["CT", "TCR", "success"], family_adjust=method)
    tests = out["tests"]
    assert tests.height == 9 and tests["p_value"].null_count() == 0
    assert _row(tests, "CT", "protocol")["n_blocks"] == 15  # tasks, repeats averaged
    expected = multipletests(tests["p_value"].to_list(), method=method)[1]
    assert tests["p_adjusted"].to_list() == pytest.approx(list(expected), rel=1e-12)
    assert (tests["p_adjusted"] >= tests["p_value"]).all()


def test_degenerate_and_empty_inputs() -> None:
    runs = _runs(seed=8).with_columns(TUSR=pl.lit(1.0), IVS=pl.lit(None, pl.Float64))
    out = blocked_tests(runs, metrics=["TUSR", "IVS"], factors=["protocol"])
    tusr = _row(out["tests"], "TUSR", "protocol")
    assert tusr["p_value"] is None and "identical" in tusr["note"]
    ivs = _row(out["tests"], "IVS", "protocol")
    assert ivs["n_blocks"] == 0 and ivs["n_tasks"] == 0
    assert ivs["note"].startswith(small_sample_reason(0, 5))
    assert "(no IVS data for protocol a2a, mcp, standard)" in ivs["note"]
    assert out["pairs"].filter(pl.col("metric") == "TUSR")["p_value"].null_count() == 3
    empty = blocked_tests(runs.head(0))
    assert empty["tests"].height == 0 and empty["tests"].schema == pl.Schema(TESTS_SCHEMA)
    assert empty["pairs"].height == 0 and empty["pairs"].schema == pl.Schema(PAIRS_SCHEMA)
    with pytest.raises(ValueError, match="family_adjust"):
        blocked_tests(runs, family_adjust="bonferroni")


def test_the_rank_sum_permutation_p_is_friedmans_permutation_p_with_ties() -> None:
    # task-level success rates tie often: the shuffles keep each block's ties, so the sum of
    # squared rank sums orders them as Friedman's tie-corrected chi2 does
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(15, 3)) / 3
    x = x[x.min(axis=1) != x.max(axis=1)]

    def chi2(*samples: np.ndarray) -> float:
        return st.friedmanchisquare(*samples).statistic

    ref = st.permutation_test(
        tuple(x.T), chi2, permutation_type="samples", vectorized=False, n_resamples=999,
        alternative="greater", random_state=5,
    )  # fmt: skip
    assert blocked.permutation_p(x, seed=5, n_resamples=999) == pytest.approx(ref.pvalue)


def test_repeats_are_not_independent_tasks() -> None:
    # 2 tasks x 6 repeats: 2 blocks (before issue 51: 12 (task, repeat) blocks >= min_n)
    runs = _runs(n_tasks=2, repeats=6, seed=9, ct_effect={"mcp": 2.0}, success_effect={"mcp": 0.5})
    out = blocked_tests(runs, metrics=["CT", "TCR", "success"], min_n=5)
    tests, pairs = out["tests"], out["pairs"]
    assert tests.height == 9 and set(tests["n_tasks"]) == {2}
    assert (tests["n_blocks"] == 2).all()
    for frame in (tests, pairs):
        assert frame["p_value"].null_count() == frame.height
        assert frame["p_adjusted"].null_count() == frame.height
        assert frame["statistic"].null_count() == frame.height
        assert set(frame["note"]) == {small_sample_reason(2, 5)}
    # the same design with 30 tasks and the planted effect: p-values, adjusted, significant
    big = blocked_tests(
        _runs(n_tasks=30, seed=9, ct_effect={"mcp": 2.0}, success_effect={"mcp": 0.5}),
        metrics=["CT", "success"],
        factors=["protocol"],
    )["tests"]
    assert big["p_value"].null_count() == 0 and (big["p_adjusted"] < 0.05).all()
    assert set(big["n_tasks"]) == {30} and big["note"].null_count() == big.height


def test_fast_sign_flip_wilcoxon_equals_scipys() -> None:
    # ties and zeros (task-level success rates) with n <= 13: scipy's exact sign-flip p,
    # computed vectorised; other inputs are left to scipy (None)
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(40):  # scipy's reference takes ~0.3 s a call
        n = int(rng.integers(2, 14))
        a, b = rng.integers(0, 5, n) / 4, rng.integers(0, 5, n) / 4
        if np.all(a == b):
            continue
        fast = blocked._sign_flip_wilcoxon(a - b)
        if fast is None:
            continue
        ref = st.wilcoxon(a, b)
        assert fast == (ref.statistic, pytest.approx(ref.pvalue, rel=1e-12, abs=1e-15))
        assert blocked._wilcoxon(a, b)[:2] == fast
        checked += 1
    assert checked > 25
    assert blocked._sign_flip_wilcoxon(np.array([0.5, -1.5, 2.5, 3.0])) is None  # no ties
    assert blocked._sign_flip_wilcoxon(np.r_[np.arange(14.0), 1.0]) is None  # n > 13
    assert blocked._sign_flip_wilcoxon(np.zeros(5)) is None

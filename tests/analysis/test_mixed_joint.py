"""Within a factor: its levels' means and pairwise contrasts (mastif.analysis.mixed_joint),
what Table 6 names a best level from, and the joint tests' effect size D."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
from scipy import stats as st

from mastif.analysis.inference import MIN_TASKS_FOR_CI, small_sample_reason
from mastif.analysis.mixed_joint import (
    JOINT_KINDS,
    JOINT_LEVELS_SCHEMA,
    JOINT_PAIRS_SCHEMA,
    joint_contrasts,
    joint_tests,
)


def runs(n_tasks: int, seed: int = 5, effect: float = 0.3) -> pl.DataFrame:
    """2 models x 3 frameworks x 1 protocol, 2 repeats, every task; framework ``c`` scores
    ``effect`` higher (TCR, TUSR) and takes twice as long (CT)."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        base, ct = rng.uniform(0.1, 0.6), rng.lognormal(3.0, 0.5)
        for model, framework, repeat in itertools.product(("m1", "m2"), "abc", range(2)):
            planted = framework == "c"
            rows.append(
                {
                    "task_id": f"t{t}", "model": model, "protocol": "standard",
                    "framework": framework, "repeat": repeat, "status": "ok",
                    "judge_status": "ok", "has_final_answer": True,
                    "TCR": float(np.clip(base + effect * planted + rng.normal(0, 0.05), 0, 1)),
                    "TU": 0.5, "TA": 0.5, "success": bool(rng.random() < base),
                    "CT": float(ct * (2.0 if planted else 1.0) * rng.lognormal(0, 0.1)),
                    "V": 100.0,
                    "TUSR": float(np.clip(base + effect * planted + rng.normal(0, 0.05), 0, 1)),
                    "IVS": float(rng.uniform(0, 1)),
                }
            )  # fmt: skip
    return pl.DataFrame(rows)


def test_levels_are_task_means_averaged_over_the_other_factors() -> None:
    data = runs(20)
    levels, pairs = joint_contrasts(data, min_n=5)
    assert levels.schema == pl.Schema(JOINT_LEVELS_SCHEMA)
    assert pairs.schema == pl.Schema(JOINT_PAIRS_SCHEMA)
    assert set(levels["metric"]) == set(JOINT_KINDS)
    # TCR of framework a by hand: per task the cell means (repeats averaged), then the mean
    # over the models, then over the tasks
    by_hand = (
        data.filter(pl.col("framework") == "a")
        .group_by("task_id", "model")
        .agg(pl.col("TCR").mean())
        .group_by("task_id")
        .agg(pl.col("TCR").mean())["TCR"]
    )
    row = levels.filter(
        (pl.col("metric") == "TCR") & (pl.col("factor") == "framework") & (pl.col("level") == "a")
    ).row(0, named=True)
    assert math.isclose(row["mean"], by_hand.mean(), rel_tol=1e-12)
    half = st.t.ppf(0.975, 19) * by_hand.std() / math.sqrt(20)
    assert math.isclose(row["ci_high"] - row["mean"], half, rel_tol=1e-9)
    # CT: the geometric mean (exp of the mean of log task-level cell means)
    ct = levels.filter((pl.col("metric") == "CT") & (pl.col("factor") == "framework"))
    means = dict(zip(ct["level"], ct["mean"], strict=True))
    assert 1.8 < means["c"] / means["a"] < 2.2


def test_pairs_find_the_planted_level_and_adjust_within_the_factor() -> None:
    _, pairs = joint_contrasts(runs(20), min_n=5)
    tcr = pairs.filter((pl.col("metric") == "TCR") & (pl.col("factor") == "framework"))
    assert tcr.select("level", "other").rows() == [("a", "b"), ("a", "c"), ("b", "c")]
    by_pair = {(r["level"], r["other"]): r for r in tcr.iter_rows(named=True)}
    assert by_pair[("a", "c")]["p_adjusted"] < 1e-6 and by_pair[("a", "c")]["difference"] < 0
    assert by_pair[("a", "b")]["p_adjusted"] > 0.05
    # Holm over the three pairs of the factor
    from statsmodels.stats.multitest import multipletests

    raw = tcr["p_value"].to_list()
    assert np.allclose(tcr["p_adjusted"].to_list(), multipletests(raw, method="holm")[1])
    # the paired t by hand for (a, c)
    row = by_pair[("a", "c")]
    assert row["df"] == 19 and row["n_tasks"] == 20


def test_below_min_n_no_p_and_below_the_interval_floor_no_interval() -> None:
    levels, pairs = joint_contrasts(runs(4), min_n=5)
    assert pairs["p_value"].null_count() == pairs.height
    assert set(pairs["note"]) == {small_sample_reason(4, 5)}
    assert levels["mean"].null_count() == 0
    assert levels["ci_low"].null_count() == levels.height
    assert levels["note"].str.contains(f"< {MIN_TASKS_FOR_CI}").all()
    # from min_n on a p, still no interval below MIN_TASKS_FOR_CI
    levels, pairs = joint_contrasts(runs(8), min_n=5)
    assert pairs.filter(pl.col("metric") == "TCR")["p_value"].null_count() == 0
    assert levels["ci_low"].null_count() == levels.height


def test_joint_effect_size_is_the_mahalanobis_length() -> None:
    data = runs(20)
    out = joint_tests(data, min_n=5, metrics=["TCR"])
    row = out.filter(pl.col("term") == "model").row(0, named=True)
    # one df: D = |mean difference| / sd of the differences (Cohen's d_z), T^2 = F = n D^2
    cell = data.group_by("task_id", "model").agg(pl.col("TCR").mean()).sort("task_id", "model")
    m = cell.pivot(on="model", index="task_id", values="TCR")
    d = (m["m1"] - m["m2"]).to_numpy() / math.sqrt(2)  # the orthonormal Helmert contrast
    assert math.isclose(row["effect"], abs(d.mean()) / d.std(ddof=1), rel_tol=1e-9)
    assert math.isclose(row["statistic"], 20 * row["effect"] ** 2, rel_tol=1e-9)


def test_tusr_and_ivs_have_joint_tests() -> None:
    out = joint_tests(runs(20), min_n=5)
    tusr = out.filter((pl.col("metric") == "TUSR") & (pl.col("term") == "framework"))
    assert tusr["p_adjusted"][0] < 0.001
    ivs = out.filter((pl.col("metric") == "IVS") & (pl.col("term") == "framework"))
    assert ivs["p_value"][0] is not None and ivs["p_value"][0] > 0.001

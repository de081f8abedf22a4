"""mastif.analysis.mixed: mixed-effects / GEE models on synthetic crossed, task-blocked data."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

from mastif.analysis import mixed
from mastif.analysis.inference import small_sample_reason
from mastif.analysis.mixed import MIXED_SCHEMA, mixed_models
from mastif.analysis.mixed_joint import JOINT_KINDS, MIXED_JOINT_SCHEMA, joint_tests

ANCHORS = np.array([0.0, 0.3, 0.5, 0.7, 1.0])
PROTOCOL_EFFECT = 0.3  # on log CT
SUCCESS_EFFECT = 1.5  # on the log-odds of success
SCORE_EFFECT = 1.5  # on the latent score


def crossed(n_tasks: int = 30, repeats: int = 1, seed: int = 7) -> pl.DataFrame:
    """2 protocols x 2 frameworks, one model, every stack on every task; task intercepts."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        u_ct, u_ok = rng.normal(0, 0.5), rng.normal(0, 0.7)
        for protocol in ("a2a", "mcp"):
            for framework in ("crewai", "langgraph"):
                for r in range(repeats):
                    mcp = protocol == "mcp"
                    log_ct = 3 + u_ct + PROTOCOL_EFFECT * mcp + rng.normal(0, 0.15)
                    eta = -0.7 + u_ok + SUCCESS_EFFECT * mcp
                    latent = u_ok + SCORE_EFFECT * mcp + rng.logistic()
                    score = float(ANCHORS[np.digitize(latent, [-1.5, -0.5, 0.5, 1.5])])
                    rows.append(
                        {
                            "run_id": f"{t}-{protocol}-{framework}-{r}",
                            "model": "m",
                            "protocol": protocol,
                            "framework": framework,
                            "task_id": f"t{t:02d}",
                            "repeat": r,
                            "status": "ok",
                            "CT": float(np.exp(log_ct)),
                            "V": int(round(np.exp(log_ct + 3))),
                            "success": bool(rng.random() < 1 / (1 + np.exp(-eta))),
                            "TU": score,
                            "TA": score,
                            "TCR": score,
                        }
                    )
    return pl.DataFrame(rows)


@pytest.fixture(scope="module")
def data() -> pl.DataFrame:
    return crossed(repeats=2)


@pytest.fixture(scope="module")
def table(data: pl.DataFrame) -> pl.DataFrame:
    return mixed_models(data)


def row(table: pl.DataFrame, metric: str, term: str) -> dict:
    rows = table.filter((pl.col("metric") == metric) & (pl.col("term") == term))
    assert rows.height == 1, (metric, term, table)
    return rows.row(0, named=True)


def test_schema_and_kinds(table: pl.DataFrame) -> None:
    assert table.schema == pl.Schema(MIXED_SCHEMA)
    kinds = dict(table.select("metric", "model_kind").unique().iter_rows())
    assert kinds == {
        "CT": "lmm",
        "V": "lmm",
        "success": "gee_binomial",
        "TU": "ordinal_gee",
        "TA": "ordinal_gee",
        "TCR": "ordinal_gee",
    }
    assert table["converged"].all()
    assert set(table["n_obs"]) == {240} and set(table["n_groups"]) == {30}
    empty = mixed_models(pl.DataFrame(), metrics=[])
    assert empty.height == 0 and empty.schema == pl.Schema(MIXED_SCHEMA)


def test_planted_protocol_effect_on_log_ct(table: pl.DataFrame) -> None:
    r = row(table, "CT", "protocol[T.mcp]")
    assert abs(r["estimate"] - PROTOCOL_EFFECT) < 3 * r["std_error"]
    assert r["estimate"] > 5 * r["std_error"]
    # no planted framework effect: its estimate is within its noise of 0
    f = row(table, "CT", "framework[T.langgraph]")
    assert abs(f["estimate"]) < 3 * f["std_error"]
    assert "log scale" in r["note"]
    assert "factor model dropped: one level (m)" in r["note"]


def test_lmm_equals_direct_statsmodels_fit(data: pl.DataFrame, table: pl.DataFrame) -> None:
    import statsmodels.formula.api as smf

    df = data.with_columns(pl.col("CT").log().alias("y")).to_pandas()
    ref = smf.mixedlm("y ~ protocol * framework", df, groups=df["task_id"]).fit(reml=True)
    for term in ref.fe_params.index:
        r = row(table, "CT", term)
        assert r["estimate"] == pytest.approx(ref.fe_params[term], rel=1e-6, abs=1e-9)
        assert r["std_error"] == pytest.approx(ref.bse_fe[term], rel=1e-6)
    assert row(table, "CT", "task variance")["estimate"] == pytest.approx(
        ref.cov_re.iloc[0, 0], rel=1e-6
    )
    assert row(table, "CT", "residual variance")["estimate"] == pytest.approx(ref.scale)
    tv = row(table, "CT", "task variance")
    assert tv["ci_low"] is None and tv["p_value"] is None
    # V is log(V): the planted log-ratio is there too
    v = row(table, "V", "protocol[T.mcp]")
    assert abs(v["estimate"] - PROTOCOL_EFFECT) < 3 * v["std_error"]


def test_coefficients_are_descriptive(table: pl.DataFrame) -> None:
    # issue 51: Wald p's and intervals of these coefficients are anti-conservative with
    # 10-20 tasks; the estimates and standard errors stay, no p and no interval anywhere
    for col in ("ci_low", "ci_high", "p_value"):
        assert table[col].null_count() == table.height, col
    assert table["estimate"].null_count() == 0 and table["std_error"].null_count() < table.height
    assert all(n.startswith(mixed.DESCRIPTIVE) for n in table["note"])
    with pytest.raises(TypeError):
        mixed_models(table, confidence=0.95)  # no interval, so no level to choose


def test_gee_binomial_detects_planted_effect(data: pl.DataFrame, table: pl.DataFrame) -> None:
    import statsmodels.formula.api as smf
    from statsmodels.genmod import cov_struct, families

    r = row(table, "success", "protocol[T.mcp]")
    assert r["estimate"] > 2 * r["std_error"] > 0
    assert "population-averaged log-odds" in r["note"]
    df = data.with_columns(pl.col("success").cast(pl.Float64).alias("y")).to_pandas()
    ref = smf.gee(
        "y ~ protocol * framework",
        groups="task_id",
        data=df,
        family=families.Binomial(),
        cov_struct=cov_struct.Exchangeable(),
    ).fit()
    for term in ref.params.index:
        assert row(table, "success", term)["estimate"] == pytest.approx(ref.params[term])
        assert row(table, "success", term)["std_error"] == pytest.approx(ref.bse[term])


def test_ordinal_gee_detects_planted_effect(data: pl.DataFrame, table: pl.DataFrame) -> None:
    for metric in ("TU", "TA", "TCR"):
        r = row(table, metric, "protocol[T.mcp]")
        assert r["estimate"] > 2 * r["std_error"] > 0  # higher scores under mcp
    cuts = table.filter((pl.col("metric") == "TU") & pl.col("term").str.starts_with("I(y>"))
    assert cuts.height == 4  # five anchors seen: four cut points
    assert cuts["estimate"].is_sorted(descending=True)


def test_success_nulls_dropped_and_completed_only(data: pl.DataFrame) -> None:
    # a timed-out run with an enormous CT and a run without a check
    extra = data.head(2).with_columns(
        pl.Series("status", ["timeout", "ok"]),
        pl.Series("CT", [1e6, data["CT"][1]]),
        pl.Series("success", [False, None]),
        pl.Series("run_id", ["x1", "x2"]),
    )
    out = mixed_models(pl.concat([data, extra]), metrics=["CT", "success"])
    assert set(out.filter(pl.col("metric") == "CT")["n_obs"]) == {241}  # timeout left out
    assert set(out.filter(pl.col("metric") == "success")["n_obs"]) == {241}  # null left out


def test_one_level_factor_dropped_with_note(data: pl.DataFrame) -> None:
    one_framework = data.filter(pl.col("framework") == "crewai")
    out = mixed_models(one_framework, metrics=["CT"])
    terms = out["term"].to_list()
    assert "protocol[T.mcp]" in terms
    assert not any("framework" in t for t in terms)
    assert all("factor framework dropped: one level (crewai)" in n for n in out["note"])


def test_too_few_tasks_is_insufficient(data: pl.DataFrame) -> None:
    out = mixed_models(data.filter(pl.col("task_id") == "t00"))
    assert out.height == 6  # one row per metric
    assert out["term"].is_null().all()
    for col in ("estimate", "std_error", "ci_low", "ci_high", "p_value", "converged"):
        assert out[col].is_null().all(), col
    assert all(n.startswith("insufficient: 1 task group < 2") for n in out["note"])
    # two tasks: groups enough, but 6 runs for 4 fixed effects + 2 variances
    few = data.filter(
        (pl.col("repeat") == 0)
        & (
            (pl.col("task_id") == "t00")
            | ((pl.col("task_id") == "t01") & (pl.col("protocol") == "mcp"))
        )
    )
    two = mixed_models(few, metrics=["CT"])
    assert two.height == 1 and two["note"][0].startswith("insufficient: n_obs = 6 <= 6")


def test_no_values_and_constant_response(data: pl.DataFrame) -> None:
    out = mixed_models(
        data.with_columns(pl.lit(None, pl.Boolean).alias("success")), metrics=["success"]
    )
    assert out.height == 1 and out["note"][0] == "insufficient: no success values"
    out = mixed_models(data.with_columns(pl.lit(0.5).alias("TU")), metrics=["TU"])
    assert out.height == 1 and out["note"][0].startswith("insufficient: every TU value")


def test_singular_design_is_fit_failed(data: pl.DataFrame) -> None:
    # protocol and framework confounded: mcp always with langgraph
    confounded = data.filter((pl.col("protocol") == "mcp") == (pl.col("framework") == "langgraph"))
    out = mixed_models(confounded)
    assert out.height == 6
    assert all(n.startswith("fit failed: singular design") for n in out["note"])
    assert out["estimate"].is_null().all() and out["term"].is_null().all()
    # a stack whose runs all failed: its CT cell is empty
    failed = data.with_columns(
        pl.when((pl.col("protocol") == "mcp") & (pl.col("framework") == "langgraph"))
        .then(pl.lit("error"))
        .otherwise(pl.col("status"))
        .alias("status")
    )
    ct = mixed_models(failed, metrics=["CT"])
    assert ct.height == 1 and ct["note"][0].startswith("fit failed: singular design")


def test_convergence_warning_recorded(monkeypatch, data: pl.DataFrame) -> None:
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    real = mixed._fit_lmm

    def warns(*args, **kwargs):
        warnings.warn(
            "Gradient optimization failed, |grad| = 1.0", ConvergenceWarning, stacklevel=2
        )
        return real(*args, **kwargs)

    monkeypatch.setattr(mixed, "_fit_lmm", warns)
    out = mixed_models(data, metrics=["CT"])
    assert out.height == 6 and not out["converged"].any()
    assert all("not converged" in n and "Gradient optimization failed" in n for n in out["note"])


def test_exception_in_fit_is_fit_failed(monkeypatch, data: pl.DataFrame) -> None:
    def boom(*args, **kwargs):
        raise np.linalg.LinAlgError("Singular matrix")

    monkeypatch.setattr(mixed, "_fit_gee_binomial", boom)
    out = mixed_models(data, metrics=["success"])
    assert out.height == 1
    assert out["note"][0].startswith("fit failed: LinAlgError: Singular matrix")


# ------------------------------------------------------------ issue 38: small samples


def test_two_tasks_keep_estimates_but_give_no_p_or_interval() -> None:
    # 2 tasks x 10 repeats: 80 runs fit every model, but 2 independent tasks carry no test
    two = crossed(n_tasks=2, repeats=10, seed=3)
    out = mixed_models(two, min_n=5)
    reason = small_sample_reason(2, 5)
    fitted = out.filter(pl.col("term").is_not_null())
    assert fitted.height > 0 and set(fitted["metric"]) == set(mixed.MODEL_KINDS)
    assert fitted["estimate"].null_count() < fitted.height  # effect sizes stay
    for col in ("ci_low", "ci_high", "p_value"):
        assert out[col].null_count() == out.height, col
    assert all(n.startswith(reason) for n in fitted["note"])
    assert all(reason in n for n in out["note"])
    # the default min_n of the function is the config's default, 5
    assert all(n.startswith(reason) for n in mixed_models(two, metrics=["CT"])["note"])
    # from min_n tasks on, no small-sample sentence; still descriptive (issue 51)
    ok = row(mixed_models(two, min_n=2, metrics=["CT"]), "CT", "protocol[T.mcp]")
    assert ok["note"].startswith(mixed.DESCRIPTIVE) and ok["p_value"] is None


# ------------------------------------------------------------ issue 38: joint tests


def framework_planted(n_tasks: int, seed: int, planted: bool = True) -> pl.DataFrame:
    """crossed() with the factor names swapped: the planted effect is on framework (mcp ->
    langgraph), protocol is null; without ``planted`` the effect is removed (null data)."""
    base = crossed(n_tasks=n_tasks, seed=seed)
    if not planted:
        rng = np.random.default_rng(seed)
        task = base["task_id"].cast(pl.Categorical).to_physical().to_numpy()
        u = rng.normal(0, 0.7, n_tasks)[task]
        eta = -0.7 + u + rng.normal(0, 0.001, base.height)
        base = base.with_columns(
            pl.Series("CT", np.exp(3 + u + rng.normal(0, 0.15, base.height))),
            pl.Series("success", rng.random(base.height) < 1 / (1 + np.exp(-eta))),
        )
    swap = {"a2a": "crewai", "mcp": "langgraph", "crewai": "a2a", "langgraph": "mcp"}
    return base.with_columns(
        pl.col("protocol").replace(swap).alias("framework"),
        pl.col("framework").replace(swap).alias("protocol"),
    )


def factorial(n_tasks: int, seed: int, effect: float = 0.0) -> pl.DataFrame:
    """bench/joint_power.py's design: 3 models x 3 protocols x 4 frameworks on every task,
    strong task effects; framework langgraph succeeds ``effect`` more often."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        p, ct = rng.uniform(0.1, 0.9), rng.lognormal(3.0, 0.6)
        for m in ("m1", "m2", "m3"):
            for pr in ("a2a", "mcp", "standard"):
                for fw in ("crewai", "langchain", "langgraph", "semantic_kernel"):
                    rows.append(
                        {
                            "run_id": f"{t}-{m}-{pr}-{fw}",
                            "model": m,
                            "protocol": pr,
                            "framework": fw,
                            "task_id": f"t{t:02d}",
                            "repeat": 0,
                            "status": "ok",
                            "success": bool(rng.random() < p + effect * (fw == "langgraph")),
                            "CT": float(ct * rng.lognormal(0.0, 0.3)),
                        }
                    )
    return pl.DataFrame(rows)


def by_hand_hotelling(data: pl.DataFrame, metric: str, factor: str, log: bool = False):
    """(F, p) by hand: per task the factor's level means (over the other factors' cells),
    differences from the first level (treatment contrasts, not the module's Helmert ones:
    Hotelling's T2 does not depend on the contrast basis), T2 = n dbar' S^-1 dbar."""
    from scipy import stats as st

    y = pl.col(metric).cast(pl.Float64)
    means = (
        data.with_columns((y.log() if log else y).alias("y"))
        .group_by("task_id", factor)
        .agg(pl.col("y").mean())
        .sort("task_id", factor)
        .pivot(factor, index="task_id", values="y")
    )
    m = means.drop("task_id").to_numpy()
    d = m[:, 1:] - m[:, [0]]
    n, p = d.shape
    dbar = d.mean(axis=0)
    t2 = n * dbar @ np.linalg.inv(np.cov(d, rowvar=False, ddof=1).reshape(p, p)) @ dbar
    f = (n - p) / (p * (n - 1)) * t2
    return f, st.f.sf(f, p, n - p)


def test_joint_schema_and_two_tasks_give_no_p() -> None:
    two = framework_planted(2, seed=3)
    # every metric of JOINT_KINDS has rows (TUSR and IVS: "insufficient" without a column)
    assert set(joint_tests(two, min_n=5)["metric"]) == set(JOINT_KINDS)
    out = joint_tests(two, min_n=5, metrics=list(mixed.MODEL_KINDS))
    assert out.schema == pl.Schema(MIXED_JOINT_SCHEMA)
    assert set(out["metric"]) == set(mixed.MODEL_KINDS)
    assert set(out["term"]) == {"protocol", "framework", "protocol:framework"}
    for col in ("statistic", "p_value", "p_adjusted"):
        assert out[col].null_count() == out.height, col
    assert set(out["note"]) == {small_sample_reason(2, 5)}
    assert set(out["n_tasks"]) == {2} and set(out["df"]) == {1}
    assert set(out["test"]) == {"Hotelling"}
    empty = joint_tests(two, metrics=[])
    assert empty.height == 0 and empty.schema == pl.Schema(MIXED_JOINT_SCHEMA)


def test_joint_test_detects_planted_framework_effect() -> None:
    data = framework_planted(30, seed=7)
    out = joint_tests(data, metrics=["CT", "success", "TCR"], min_n=5)
    assert out["p_value"].null_count() == 0 and set(out["n_tasks"]) == {30}
    for metric in ("CT", "success", "TCR"):
        fw = out.filter((pl.col("metric") == metric) & (pl.col("term") == "framework")).row(
            0, named=True
        )
        assert fw["p_value"] < 0.05 and fw["p_adjusted"] < 0.05, fw
        assert fw["df"] == 1 and fw["statistic"] > 0 and fw["test"] == "Hotelling"
        part = out.filter(pl.col("metric") == metric)
        # Holm within the metric's family of joint tests
        from statsmodels.stats.multitest import multipletests

        expected = multipletests(part["p_value"].to_list(), method="holm")[1]
        assert part["p_adjusted"].to_list() == pytest.approx(list(expected))


def test_hotelling_equals_by_hand_and_paired_t() -> None:
    from scipy import stats as st

    # one df: the paired t-test of the tasks' framework differences, F = t^2
    data = framework_planted(30, seed=7)
    r = joint_tests(data, metrics=["CT"]).filter(pl.col("term") == "framework").row(0, named=True)
    m = (
        data.group_by("task_id", "framework")
        .agg(pl.col("CT").log().mean())
        .pivot("framework", index="task_id", values="CT")
    )
    t = st.ttest_rel(m["langgraph"].to_numpy(), m["crewai"].to_numpy())
    assert r["statistic"] == pytest.approx(t.statistic**2, rel=1e-9)
    assert r["p_value"] == pytest.approx(t.pvalue, rel=1e-9)
    assert r["df"] == 1 and r["n_tasks"] == 30
    # several df, in the 3 x 3 x 4 design: main effects of 2 and 3 df, success and log CT
    big = factorial(25, seed=4, effect=0.2)
    out = joint_tests(big, metrics=["success", "CT"])
    for metric, factor, q in [("success", "framework", 3), ("CT", "protocol", 2)]:
        r = out.filter((pl.col("metric") == metric) & (pl.col("term") == factor)).row(0, named=True)
        f, p = by_hand_hotelling(big, metric, factor, log=metric == "CT")
        assert r["df"] == q and r["statistic"] == pytest.approx(f, rel=1e-9)
        assert r["p_value"] == pytest.approx(p, rel=1e-9)


def test_null_experiment_joint_test_is_not_significant() -> None:
    out = joint_tests(framework_planted(30, seed=11, planted=False), metrics=["CT", "success"])
    assert out["p_value"].null_count() == 0
    fw = out.filter(pl.col("term") == "framework")
    assert (fw["p_value"] > 0.05).all() and (fw["p_adjusted"] > 0.05).all(), fw
    # the bench's null design: no main effect significant
    null = joint_tests(factorial(30, seed=12), metrics=["CT", "success"])
    mains = null.filter(~pl.col("term").str.contains(":"))
    assert mains.height == 6 and (mains["p_value"] > 0.05).all(), mains


def test_joint_three_factor_terms_and_family_adjust() -> None:
    data = factorial(20, seed=5)
    out = joint_tests(data, metrics=["success"], family_adjust="fdr_bh")
    assert out["term"].to_list() == [
        "model",
        "protocol",
        "framework",
        "model:protocol",
        "model:framework",
        "protocol:framework",
        "model:protocol:framework",
    ]
    assert out["df"].to_list() == [2, 2, 3, 4, 6, 6, 12]
    from statsmodels.stats.multitest import multipletests

    ok = out.filter(pl.col("p_value").is_not_null())
    assert ok.height == 7
    expected = multipletests(ok["p_value"].to_list(), method="fdr_bh")[1]
    assert ok["p_adjusted"].to_list() == pytest.approx(list(expected))
    with pytest.raises(ValueError):
        joint_tests(data, family_adjust="bonferroni")


def test_term_with_df_at_least_n_tasks_has_no_p() -> None:
    out = joint_tests(factorial(10, seed=2), metrics=["success", "CT"])
    dfs = dict(zip(out["term"], out["df"], strict=False))
    assert dfs == {"model": 2, "protocol": 2, "framework": 3, "model:protocol": 4,
                   "model:framework": 6, "protocol:framework": 6,
                   "model:protocol:framework": 12}  # fmt: skip
    three = out.filter(pl.col("term") == "model:protocol:framework")
    assert three.height == 2
    for r in three.iter_rows(named=True):
        assert r["statistic"] is None and r["p_value"] is None and r["p_adjusted"] is None
        assert "needs at least df + 1 = 13 tasks with every cell, has 10" in r["note"]
    rest = out.filter(pl.col("term") != "model:protocol:framework")
    assert rest["p_value"].null_count() == 0
    # Holm over the six tests that have a p
    from statsmodels.stats.multitest import multipletests

    part = rest.filter(pl.col("metric") == "CT")
    expected = multipletests(part["p_value"].to_list(), method="holm")[1]
    assert part["p_adjusted"].to_list() == pytest.approx(list(expected))


def test_task_missing_a_cell_is_left_out_with_a_note() -> None:
    data = factorial(14, seed=3)
    cut = data.filter(~((pl.col("task_id") == "t00") & (pl.col("framework") == "crewai")))
    out = joint_tests(cut, metrics=["CT"])
    assert set(out["n_tasks"]) == {13}
    assert all("1 task(s) without a CT value in every cell left out" in n for n in out["note"])
    # the same numbers as without that task
    ref = joint_tests(data.filter(pl.col("task_id") != "t00"), metrics=["CT"])
    assert out["statistic"].to_list() == pytest.approx(ref["statistic"].to_list())


def test_constant_contrasts_are_not_testable() -> None:
    data = framework_planted(10, seed=1)
    # success depends on the task only: every contrast is 0 on every task
    data = data.with_columns(
        (pl.col("task_id").str.slice(1).cast(pl.Int64) % 2 == 0).alias("success")
    )
    out = joint_tests(data, metrics=["success"])
    assert out["p_value"].null_count() == out.height
    assert all("no variation" in n for n in out["note"])
    # a model level that copies another's runs: the terms with model have nothing to test
    two = pl.concat([framework_planted(12, seed=5).with_columns(model=pl.lit(m)) for m in "ab"])
    out = joint_tests(two, metrics=["success"])
    with_model = out.filter(pl.col("term").str.contains("model"))
    assert with_model.height == 4 and with_model["p_value"].null_count() == 4
    assert all("no variation" in n for n in with_model["note"])
    assert out.filter(~pl.col("term").str.contains("model"))["p_value"].null_count() == 0

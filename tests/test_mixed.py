"""mastif.mixed: mixed-effects / GEE models on synthetic crossed, task-blocked data."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

from mastif import mixed
from mastif.mixed import MIXED_SCHEMA, mixed_models

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
    assert r["ci_low"] < PROTOCOL_EFFECT < r["ci_high"]
    assert r["ci_low"] > 0 and r["p_value"] < 0.001
    # no planted framework effect: its interval covers 0
    f = row(table, "CT", "framework[T.langgraph]")
    assert f["ci_low"] < 0 < f["ci_high"]
    assert "log scale" in r["note"]
    assert "factor model dropped: one level (m)" in r["note"]


def test_lmm_equals_direct_statsmodels_fit(data: pl.DataFrame, table: pl.DataFrame) -> None:
    import statsmodels.formula.api as smf

    df = data.with_columns(pl.col("CT").log().alias("y")).to_pandas()
    ref = smf.mixedlm("y ~ protocol * framework", df, groups=df["task_id"]).fit(reml=True)
    ci = ref.conf_int(alpha=0.05)
    for term in ref.fe_params.index:
        r = row(table, "CT", term)
        assert r["estimate"] == pytest.approx(ref.fe_params[term], rel=1e-6, abs=1e-9)
        assert r["std_error"] == pytest.approx(ref.bse_fe[term], rel=1e-6)
        assert r["ci_low"] == pytest.approx(ci.loc[term, 0], rel=1e-6, abs=1e-9)
        assert r["p_value"] == pytest.approx(ref.pvalues[term], rel=1e-5, abs=1e-300)
    assert row(table, "CT", "task variance")["estimate"] == pytest.approx(
        ref.cov_re.iloc[0, 0], rel=1e-6
    )
    assert row(table, "CT", "residual variance")["estimate"] == pytest.approx(ref.scale)
    tv = row(table, "CT", "task variance")
    assert tv["ci_low"] is None and tv["p_value"] is None
    # V is log(V): the planted log-ratio is there too
    v = row(table, "V", "protocol[T.mcp]")
    assert v["ci_low"] < PROTOCOL_EFFECT < v["ci_high"]


def test_confidence_level_widens_interval(data: pl.DataFrame, table: pl.DataFrame) -> None:
    wide = mixed_models(data, confidence=0.99, metrics=["CT"])
    r95, r99 = row(table, "CT", "protocol[T.mcp]"), row(wide, "CT", "protocol[T.mcp]")
    assert r99["estimate"] == pytest.approx(r95["estimate"])
    assert r99["ci_high"] - r99["ci_low"] > r95["ci_high"] - r95["ci_low"]
    with pytest.raises(ValueError):
        mixed_models(data, confidence=1.0)


def test_gee_binomial_detects_planted_effect(data: pl.DataFrame, table: pl.DataFrame) -> None:
    import statsmodels.formula.api as smf
    from statsmodels.genmod import cov_struct, families

    r = row(table, "success", "protocol[T.mcp]")
    assert r["ci_low"] > 0 and r["p_value"] < 0.05
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
        assert r["ci_low"] > 0 and r["p_value"] < 0.05  # higher scores under mcp
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

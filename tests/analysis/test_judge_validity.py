"""The judge against the programmatic checks (mastif.analysis.judge_validity) vs scikit-learn."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score

from mastif.analysis.bootstrap import quantile_bounds, task_resamples
from mastif.analysis.judge_validity import (
    JUDGE_VALIDITY_SCHEMA,
    agreement_from_tables,
    judge_validity,
)
from mastif.evaluation.agreement import judge_agreement

STACKS = [("m1", "standard", "lg"), ("m2", "mcp", "cr")]


def _runs(n_tasks: int = 10, agree: float = 0.8, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        for model, protocol, framework in STACKS:
            for r in range(2):
                check = bool(rng.random() < 0.5)
                verdict = check if rng.random() < agree else not check
                rows.append(
                    {"model": model, "protocol": protocol, "framework": framework,
                     "task_id": f"t{t}", "repeat": r,
                     "success": None if rng.random() < 0.15 else check,
                     "judge_success": None if rng.random() < 0.1 else verdict}
                )  # fmt: skip
    return pl.DataFrame(rows)


def _pairs(runs: pl.DataFrame) -> pl.DataFrame:
    return runs.drop_nulls(["success", "judge_success"])


def test_pooled_and_per_stack_agree_with_sklearn() -> None:
    runs = _runs()
    out = judge_validity(runs, resamples=200)
    assert out.schema == pl.Schema(JUDGE_VALIDITY_SCHEMA)
    pooled = out.filter(scope="pooled")
    both = _pairs(runs)
    assert pooled["n"][0] == both.height
    assert pooled["kappa"][0] == pytest.approx(
        cohen_kappa_score(both["success"], both["judge_success"])
    )
    assert pooled["accuracy"][0] == pytest.approx(
        accuracy_score(both["success"], both["judge_success"])
    )
    for model, protocol, framework in STACKS:
        row = out.filter(model=model, protocol=protocol, framework=framework)
        mine = both.filter(model=model, protocol=protocol, framework=framework)
        assert row["scope"][0] == f"{model}/{protocol}/{framework}"
        assert row["n"][0] == mine.height
        assert row["kappa"][0] == pytest.approx(
            cohen_kappa_score(mine["success"], mine["judge_success"])
        )


def test_vectorised_kappa_equals_sklearn() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        truth = rng.random(30) < rng.random()
        verdict = np.where(rng.random(30) < 0.7, truth, ~truth)
        table = np.array([(truth & verdict).sum(), (truth & ~verdict).sum(),
                          (~truth & verdict).sum(), (~truth & ~verdict).sum()], dtype=float)  # fmt: skip
        acc, kappa = agreement_from_tables(table)
        n, ref_acc, ref_kappa = judge_agreement(truth.tolist(), verdict.tolist())
        if ref_acc is None:  # one class only: not assessable
            assert np.isnan(acc)
        else:
            assert acc == pytest.approx(ref_acc)
        if ref_kappa is None:
            assert np.isnan(kappa)
        else:
            assert kappa == pytest.approx(ref_kappa)


def test_one_class_only_tables_give_no_accuracy() -> None:
    # all checks failed, no verdict of success: (T,T), (T,F), (F,T), (F,F) = 0, 0, 0, 5
    acc, kappa = agreement_from_tables(np.array([0.0, 0.0, 0.0, 5.0]))
    assert np.isnan(acc) and np.isnan(kappa)
    acc, kappa = agreement_from_tables(np.array([2.0, 0.0, 1.0, 2.0]))
    assert acc == pytest.approx(0.8) and np.isfinite(kappa)


def test_intervals_equal_a_naive_loop_bootstrap() -> None:
    runs = _runs(n_tasks=8)
    resamples, seed, confidence = 150, 2, 0.95
    out = judge_validity(runs, resamples=resamples, seed=seed, confidence=confidence)
    tasks = sorted(runs["task_id"].unique().to_list())
    by_task = {t: runs.filter(pl.col("task_id") == t) for t in tasks}
    accs, kappas = [], []
    for draw in task_resamples(len(tasks), resamples, seed):
        sample = pl.concat([by_task[tasks[i]] for i in draw])
        _, acc, kappa = judge_agreement(
            sample["success"].to_list(), sample["judge_success"].to_list()
        )
        if acc is not None:  # one class only: not assessable, left out like kappa
            accs.append(acc)
        if kappa is not None:
            kappas.append(kappa)
    q = quantile_bounds(confidence)
    pooled = out.filter(scope="pooled")
    assert (pooled["accuracy_ci_low"][0], pooled["accuracy_ci_high"][0]) == pytest.approx(
        tuple(np.quantile(accs, q))
    )
    assert (pooled["kappa_ci_low"][0], pooled["kappa_ci_high"][0]) == pytest.approx(
        tuple(np.quantile(kappas, q))
    )


def test_validated_flag_follows_min_kappa() -> None:
    runs = _runs(agree=0.9)
    kappa = judge_validity(runs, resamples=100)["kappa"][0]
    assert judge_validity(runs, min_kappa=kappa - 0.01, resamples=100)["validated"][0] is True
    assert judge_validity(runs, min_kappa=kappa + 0.01, resamples=100)["validated"][0] is False
    # a judge that guesses is not validated at the default 0.4
    guess = judge_validity(_runs(n_tasks=60, agree=0.5), resamples=100)
    assert guess.filter(scope="pooled")["validated"][0] is False
    assert guess.filter(scope="pooled")["min_kappa"][0] == 0.4


def test_unknown_kappa_is_null_and_not_validated() -> None:
    runs = _runs().with_columns(pl.lit(True).alias("success"), pl.lit(True).alias("judge_success"))
    pooled = judge_validity(runs, resamples=100).filter(scope="pooled")
    assert pooled["kappa"][0] is None and pooled["validated"][0] is None
    # one class only: the accuracy (1 by construction) is not assessable, not a perfect 1
    assert pooled["accuracy"][0] is None
    assert pooled["accuracy_ci_low"][0] is None and pooled["accuracy_ci_high"][0] is None
    assert "not assessable: one class only" in pooled["note"][0]
    assert "not validated" in pooled["note"][0]
    no_checks = _runs().with_columns(pl.lit(None, dtype=pl.Boolean).alias("success"))
    pooled = judge_validity(no_checks, resamples=100).filter(scope="pooled")
    assert pooled["n"][0] == 0 and pooled["accuracy"][0] is None
    assert pooled["note"][0].startswith("insufficient")


def test_one_task_is_insufficient() -> None:
    out = judge_validity(_runs(n_tasks=1), resamples=100)
    assert out["kappa_ci_low"].is_null().all() and out["accuracy_ci_high"].is_null().all()
    assert out["note"].str.starts_with("insufficient").all()


def test_the_gate_says_not_assessable_for_one_class_only() -> None:
    from mastif.analysis.judge_validity import gate_table

    # the .test run's case: every check failed and no TCR reached 0.7
    runs = _runs().with_columns(
        pl.lit(False).alias("success"), pl.lit(False).alias("judge_success")
    )
    gate = gate_table(judge_validity(runs, resamples=50)).row(0, named=True)
    assert gate["validated"] is False and gate["accuracy"] is None and gate["kappa"] is None
    assert "judge NOT validated" in gate["verdict"]
    assert "not assessable: one class only" in gate["verdict"]
    assert "not assessable: one class only" in gate["note"]
    # a validated judge says so; no table at all is not validated
    good = gate_table(judge_validity(_runs(agree=1.0), resamples=50)).row(0, named=True)
    assert good["validated"] is True and good["verdict"].startswith("judge validated")
    none = gate_table(pl.DataFrame()).row(0, named=True)
    assert none["validated"] is False and "no judge-validity result" in none["verdict"]

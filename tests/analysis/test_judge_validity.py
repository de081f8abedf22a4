"""The judge against the programmatic checks (mastif.analysis.judge_validity) vs scikit-learn."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score

from mastif.analysis.bootstrap import quantile_bounds, task_resamples
from mastif.analysis.inference import (
    GATE_MIN_PER_CLASS,
    MIN_TASKS_FOR_CI,
    assess_gate,
    gate_verdict,
)
from mastif.analysis.judge_validity import (
    JUDGE_VALIDITY_SCHEMA,
    agreement_from_tables,
    gate_table,
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
    runs = _runs(n_tasks=MIN_TASKS_FOR_CI)
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
    runs = _runs(n_tasks=40, agree=0.9)
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
    assert pooled["kappa"][0] is None and pooled["validated"][0] is False
    # one class only: the accuracy (1 by construction) is not assessable, not a perfect 1
    assert pooled["accuracy"][0] is None
    assert pooled["accuracy_ci_low"][0] is None and pooled["accuracy_ci_high"][0] is None
    assert "not assessable: one class only" in pooled["note"][0]
    assert pooled["gate"][0] == "not assessable: the checks have one class"
    no_checks = _runs().with_columns(pl.lit(None, dtype=pl.Boolean).alias("success"))
    pooled = judge_validity(no_checks, resamples=100).filter(scope="pooled")
    assert pooled["n"][0] == 0 and pooled["accuracy"][0] is None
    assert pooled["note"][0].startswith("insufficient")


def test_one_task_is_insufficient() -> None:
    out = judge_validity(_runs(n_tasks=1), resamples=100)
    assert out["kappa_ci_low"].is_null().all() and out["accuracy_ci_high"].is_null().all()
    assert out["note"].str.starts_with("insufficient").all()


def test_no_interval_below_min_tasks_for_ci() -> None:
    # the columns stay, null below the one constant of every interval, and the note says why
    short = judge_validity(_runs(n_tasks=MIN_TASKS_FOR_CI - 1), resamples=100)
    assert short.schema == pl.Schema(JUDGE_VALIDITY_SCHEMA)
    for c in ("accuracy_ci_low", "accuracy_ci_high", "kappa_ci_low", "kappa_ci_high"):
        assert short[c].is_null().all(), c
    pooled = short.row(0, named=True)
    assert pooled["kappa"] is not None
    assert f"n_tasks = {MIN_TASKS_FOR_CI - 1} < {MIN_TASKS_FOR_CI}" in pooled["note"]
    enough = judge_validity(_runs(n_tasks=MIN_TASKS_FOR_CI), resamples=100).row(0, named=True)
    assert enough["kappa_ci_low"] <= enough["kappa"] <= enough["kappa_ci_high"]
    assert enough["accuracy_ci_low"] <= enough["accuracy"] <= enough["accuracy_ci_high"]


def test_one_class_in_one_rater_gives_no_kappa_but_an_accuracy() -> None:
    # the default run's case: every check failed, the judge passed some runs (κ = 0 by
    # arithmetic, whatever the judge does): κ null, the accuracy (share agreeing) stays
    runs = _runs(n_tasks=20).with_columns(pl.lit(False).alias("success"))
    pooled = judge_validity(runs, resamples=100).row(0, named=True)
    both = _pairs(runs)
    assert cohen_kappa_score(both["success"], both["judge_success"]) == 0.0  # sklearn's 0
    assert pooled["kappa"] is None and pooled["kappa_ci_low"] is None
    assert pooled["accuracy"] == pytest.approx(1 - both["judge_success"].mean())
    assert "the checks have one class (all" in pooled["note"] and "failed" in pooled["note"]
    assert pooled["n_check_success"] == 0 and pooled["n_check_failure"] == both.height
    assert pooled["validated"] is False
    assert pooled["gate"] == "not assessable: the checks have one class"
    # and the judge's verdicts of one class
    runs = _runs(n_tasks=20).with_columns(pl.lit(True).alias("judge_success"))
    pooled = judge_validity(runs, resamples=100).row(0, named=True)
    assert pooled["kappa"] is None and pooled["accuracy"] is not None
    assert pooled["gate"] == "not assessable: the judge's verdicts have one class"
    assert judge_agreement([True, False], [False, False]) == (2, 0.5, None)


def _gate(runs: pl.DataFrame, **floors: int) -> dict:
    return gate_table(judge_validity(runs, resamples=50, **floors)).row(0, named=True)


def test_the_gate_says_not_assessable_for_one_class() -> None:
    # the .test run's case: every check failed and no TCR reached 0.7
    runs = _runs(n_tasks=20).with_columns(
        pl.lit(False).alias("success"), pl.lit(False).alias("judge_success")
    )
    gate = _gate(runs)
    assert gate["validated"] is False and gate["accuracy"] is None and gate["kappa"] is None
    assert gate["status"] == "not assessable"
    assert gate["verdict"].startswith("judge not assessable: the checks have one class (all ")
    assert "failed" in gate["verdict"] and "the judge's verdicts have one class" in gate["verdict"]
    assert "not assessable: one class only" in gate["note"]
    # the case: every check failed (0 of 24), the judge passing some: κ 0 by
    # arithmetic is "not assessable", never "NOT validated: κ 0.00 < 0.4"
    gate = _gate(_runs(n_tasks=20).with_columns(pl.lit(False).alias("success")))
    assert gate["status"] == "not assessable" and "0.00" not in gate["verdict"]
    assert gate["verdict"].startswith("judge not assessable: the checks have one class")
    # a validated judge says so; no table at all is not validated
    good = _gate(_runs(n_tasks=20, agree=1.0))
    assert good["validated"] is True and good["verdict"].startswith("judge validated: pooled κ")
    assert good["status"] == "validated"
    none = gate_table(pl.DataFrame()).row(0, named=True)
    assert none["validated"] is False and "no judge-validity result" in none["verdict"]


def test_no_validated_below_the_floors() -> None:
    # the case: perfect agreement on 2 tasks is not assessable, never "validated"
    two = _gate(_runs(n_tasks=2, agree=1.0))
    assert two["kappa"] == 1.0 and two["validated"] is False
    assert two["status"] == "not assessable"
    assert "2 checked tasks < judge.gate_min_tasks 15" in two["verdict"]
    lowered = _gate(_runs(n_tasks=2, agree=1.0), gate_min_tasks=2, gate_min_per_class=1)
    assert lowered["validated"] is True
    # enough tasks but 3 runs whose check succeeded: below judge.gate_min_per_class
    runs = (
        _runs(n_tasks=20, agree=1.0)
        .with_columns(
            (pl.col("success") & (pl.col("task_id").is_in(["t0", "t1"]))).alias("success"),
        )
        .with_columns(pl.col("success").alias("judge_success"))
    )
    few = _gate(runs)
    n_ok = few["n_check_success"]
    assert 0 < n_ok < GATE_MIN_PER_CLASS and few["validated"] is False
    assert f"{n_ok} runs whose check succeeded < judge.gate_min_per_class" in few["verdict"]
    assert _gate(runs, gate_min_per_class=n_ok)["validated"] is True
    # the floors are recorded in every row
    out = judge_validity(runs, gate_min_tasks=7, gate_min_per_class=3, resamples=20)
    assert set(out["gate_min_tasks"]) == {7} and set(out["gate_min_per_class"]) == {3}


def test_the_validated_column_is_the_gates_verdict() -> None:
    for runs in (_runs(n_tasks=2, agree=1.0), _runs(n_tasks=20, agree=1.0), _runs(n_tasks=20)):
        out = judge_validity(runs, resamples=20)
        verdict = gate_verdict(out)
        assert out["validated"][0] is verdict.validated
        assert out["gate"][0] == verdict.label
        for row in out.iter_rows(named=True):
            assert row["validated"] is assess_gate(row).validated

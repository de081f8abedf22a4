"""Task-cluster bootstrap of per-stack effects (mastif.analysis.bootstrap) against a naive loop."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from mastif.analysis.bootstrap import (
    EFFECT_METRICS,
    EFFECTS_SCHEMA,
    MIN_TASKS,
    bootstrap_effects,
    quantile_bounds,
    resample_counts,
    task_resamples,
)
from mastif.analysis.inference import MIN_TASKS_FOR_CI

STACKS = [("m1", "standard", "lg"), ("m1", "mcp", "lg"), ("m2", "standard", "cr")]


def _runs(n_tasks: int = 6, repeats: int = 2, seed: int = 3) -> pl.DataFrame:
    """Random runs with the awkward cases: failed runs, a failed judge, missing checks, runs
    without tool calls or without a final answer."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        for model, protocol, framework in STACKS:
            for r in range(repeats):
                status = str(rng.choice(["ok", "ok", "ok", "timeout", "error"]))
                calls = int(rng.integers(0, 4))
                rows.append(
                    {
                        "model": model, "protocol": protocol, "framework": framework,
                        "task_id": f"t{t}", "repeat": r, "status": status,
                        "judge_status": "judge_failed" if rng.random() < 0.1 else "ok",
                        "TCR": float(rng.choice([0.0, 0.3, 0.5, 0.7, 1.0])),
                        "CT": float(rng.exponential(10.0)), "V": int(rng.integers(1, 300)),
                        "n_tool_calls": calls, "n_tool_ok": int(rng.integers(0, calls + 1)),
                        "IVS": float(rng.random()), "has_final_answer": bool(rng.random() < 0.8),
                        "success": None if rng.random() < 0.2 else bool(rng.random() < 0.5),
                    }
                )  # fmt: skip
    return pl.DataFrame(rows)


def _naive_stack_mean(runs: pl.DataFrame, metric: str) -> float | None:
    """The metric of one stack's runs, written out plainly."""
    if metric == "TUSR":
        calls = runs["n_tool_calls"].sum()
        return runs["n_tool_ok"].sum() / calls if calls > 0 else None
    if metric == "TCR":
        if (runs["judge_status"] == "judge_failed").any():
            return None  # a failed judgement: the stack's TCR is unknown, not the others' mean
        kept = runs
    elif metric in ("CT", "V"):
        kept = runs.filter(pl.col("status") == "ok")
    elif metric == "SVS":
        kept = runs.filter(pl.col("status") == "ok", pl.col("has_final_answer"))
    else:
        kept = runs
    col = {"SVS": "IVS"}.get(metric, metric)
    values = kept[col].drop_nulls().cast(pl.Float64)
    return float(values.mean()) if values.len() else None


def test_resample_index_matrix_is_the_generator_stream() -> None:
    index = task_resamples(7, 5, seed=11)
    rng = np.random.default_rng(11)
    for row in index:
        assert np.array_equal(row, rng.integers(0, 7, 7))
    counts = resample_counts(index, 7)
    for row, c in zip(index, counts, strict=True):
        assert np.array_equal(np.bincount(row, minlength=7), c)


def test_intervals_equal_a_naive_loop_bootstrap() -> None:
    runs = _runs(n_tasks=MIN_TASKS_FOR_CI + 5)
    resamples, confidence, seed = 200, 0.9, 5
    out = bootstrap_effects(runs, resamples=resamples, confidence=confidence, seed=seed)
    assert out.schema == pl.Schema(EFFECTS_SCHEMA)
    tasks = sorted(runs["task_id"].unique().to_list())
    index = task_resamples(len(tasks), resamples, seed)
    by_task = {t: runs.filter(pl.col("task_id") == t) for t in tasks}
    boot: dict[tuple, list[float]] = {}
    for draw in index:  # every stack of a drawn task, every repeat
        sample = pl.concat([by_task[tasks[i]] for i in draw])
        for stack in STACKS:
            model, protocol, framework = stack
            mine = sample.filter(model=model, protocol=protocol, framework=framework)
            for metric in EFFECT_METRICS:
                value = _naive_stack_mean(mine, metric)
                if value is not None:
                    boot.setdefault((stack, metric), []).append(value)
    q = quantile_bounds(confidence)
    with_ci = 0
    for stack in STACKS:
        model, protocol, framework = stack
        mine = runs.filter(model=model, protocol=protocol, framework=framework)
        for metric in EFFECT_METRICS:
            row = out.filter(model=model, protocol=protocol, framework=framework, metric=metric)
            point = _naive_stack_mean(mine, metric)
            if point is None and metric == "TCR":  # unknown: no mean, no interval
                assert row["mean"][0] is None and row["ci_low"][0] is None
                continue
            assert row["mean"][0] == pytest.approx(point)
            if row["n_tasks"][0] < MIN_TASKS_FOR_CI:  # values in too few tasks: no interval
                assert row["ci_low"][0] is None and row["ci_high"][0] is None
                continue
            with_ci += 1
            low, high = np.quantile(boot[(stack, metric)], q)
            assert row["ci_low"][0] == pytest.approx(low), (metric, model, protocol)
            assert row["ci_high"][0] == pytest.approx(high), (metric, model, protocol)
            assert row["ci_low"][0] <= row["mean"][0] <= row["ci_high"][0] or metric == "TUSR"
    assert with_ci >= len(STACKS) * (len(EFFECT_METRICS) - 2)


def test_no_interval_below_min_tasks_for_ci() -> None:
    """One constant decides intervals: values in MIN_TASKS_FOR_CI - 1 tasks keep the mean but
    have null ci_low/ci_high, and the note says why; from MIN_TASKS_FOR_CI tasks on, every
    metric with values has an interval."""
    rows = [
        {"model": "A", "protocol": "standard", "framework": "lg", "task_id": f"t{t:02d}",
         "status": "ok", "judge_status": "ok", "TCR": t / 20, "CT": 1.0 + t, "V": 10 + t}
        for t in range(MIN_TASKS_FOR_CI)
    ]  # fmt: skip
    few = bootstrap_effects(pl.DataFrame(rows[:-1]), resamples=100, metrics=["TCR", "CT", "V"])
    for metric in ("TCR", "CT", "V"):
        row = few.filter(metric=metric).row(0, named=True)
        assert row["n_tasks"] == MIN_TASKS_FOR_CI - 1 >= MIN_TASKS
        assert row["mean"] is not None
        assert row["ci_low"] is None and row["ci_high"] is None
        assert row["note"].startswith("insufficient") and str(MIN_TASKS_FOR_CI) in row["note"]
    enough = bootstrap_effects(pl.DataFrame(rows), resamples=100, metrics=["TCR", "CT", "V"])
    assert enough.filter(pl.col("metric") != "pareto")["ci_low"].is_not_null().all()


def test_stacks_stay_paired_within_a_resample() -> None:
    """Stack B is stack A plus 1 on every task (task effects large): with the same tasks
    drawn for both in each resample, B's interval is A's shifted by exactly 1; resampled
    independently, the bounds would differ by far more than rounding."""
    rng = np.random.default_rng(0)
    task_effect = rng.normal(0, 20, 40)
    rows = [
        {"model": m, "protocol": "standard", "framework": "lg", "task_id": f"t{t}",
         "status": "ok", "judge_status": "ok", "TCR": 0.5, "V": 10,
         "CT": float(task_effect[t] + 50 + shift)}
        for t in range(40)
        for m, shift in (("A", 0.0), ("B", 1.0))
    ]  # fmt: skip
    out = bootstrap_effects(pl.DataFrame(rows), resamples=500, metrics=["CT"])
    ct = out.filter(metric="CT").sort("model")
    assert ct["ci_low"][1] - ct["ci_low"][0] == pytest.approx(1.0)
    assert ct["ci_high"][1] - ct["ci_high"][0] == pytest.approx(1.0)
    assert ct["ci_high"][0] - ct["ci_low"][0] > 5  # the task effects do spread the interval


def test_one_task_is_insufficient() -> None:
    runs = _runs(n_tasks=1)
    out = bootstrap_effects(runs, resamples=200)
    assert out.height == len(STACKS) * (len(EFFECT_METRICS) + 1)
    assert out["ci_low"].is_null().all() and out["ci_high"].is_null().all()
    assert out["note"].str.starts_with("insufficient").all()
    assert out.filter(metric="pareto")["mean"].is_null().all()
    # the point estimate is still given where there is a value
    assert out.filter(metric="TCR")["mean"].is_not_null().any()


def test_pareto_share_counts_resamples_and_keeps_the_eligibility_rule() -> None:
    """A dominates B everywhere; C equals A but times out on task t0, so C is on the front
    exactly in the resamples that do not draw t0."""
    n_tasks = 12
    rows = []
    for t in range(n_tasks):
        for model, tcr, ct, v in (("A", 0.9, 5.0, 100), ("B", 0.5, 9.0, 300), ("C", 0.9, 5.0, 100)):
            status = "timeout" if model == "C" and t == 0 else "ok"
            rows.append(
                {"model": model, "protocol": "standard", "framework": "lg", "task_id": f"t{t:02d}",
                 "status": status, "judge_status": "ok", "TCR": tcr, "CT": ct, "V": v}
            )  # fmt: skip
    resamples, seed = 400, 9
    out = bootstrap_effects(
        pl.DataFrame(rows), resamples=resamples, seed=seed, metrics=["TCR"]
    ).filter(metric="pareto")
    share = dict(zip(out["model"], out["mean"], strict=True))
    without_t0 = (task_resamples(n_tasks, resamples, seed) != 0).all(axis=1).mean()
    assert share["A"] == 1.0
    assert share["B"] == 0.0
    assert share["C"] == pytest.approx(without_t0)
    assert 0 < without_t0 < 1
    assert (out["n_values"] == resamples).all()


def _front_runs(n_tasks: int, failed_judgement: str | None = None) -> pl.DataFrame:
    """A beats B on TCR at equal CT and V (so B is on the front only without A); A's
    judgement of ``failed_judgement`` (a task id) failed."""
    rows = []
    for t in range(n_tasks):
        task = f"t{t:02d}"
        for model, tcr in (("A", 0.9), ("B", 0.5)):
            failed = model == "A" and task == failed_judgement
            rows.append(
                {"model": model, "protocol": "standard", "framework": "lg", "task_id": task,
                 "status": "ok", "judge_status": "judge_failed" if failed else "ok",
                 "TCR": None if failed else tcr, "CT": 5.0, "V": 100}
            )  # fmt: skip
    return pl.DataFrame(rows)


def test_a_failed_judgement_keeps_a_stack_off_every_resamples_front() -> None:
    """As in the stack table, a stack with a failed judgement (TCR unknown) is never on the
    front, so it pushes no other stack off: not even in the resamples that skip the task
    whose judgement failed (there its resampled TCR would be known and beat B's)."""
    runs = _front_runs(12, failed_judgement="t00")
    resamples, seed = 300, 4
    out = bootstrap_effects(runs, resamples=resamples, seed=seed, metrics=["TCR"])
    skipping = (task_resamples(12, resamples, seed) != 0).all(axis=1).mean()
    assert 0 < skipping < 1  # some resamples skip t00: there A's TCR is the others' mean
    share = {r["model"]: r for r in out.filter(metric="pareto").iter_rows(named=True)}
    assert share["A"]["mean"] == 0.0 and "judgement" in share["A"]["note"]
    assert share["B"]["mean"] == 1.0 and share["B"]["note"] is None
    assert out.filter(metric="TCR", model="A")["mean"][0] is None


@pytest.mark.parametrize("min_n", [5, 13])
def test_no_pareto_share_below_min_n(min_n: int) -> None:
    out = bootstrap_effects(_front_runs(12), resamples=50, metrics=["TCR"], min_n=min_n)
    pareto = out.filter(metric="pareto").sort("model")
    if min_n <= 12:
        assert pareto["mean"].to_list() == [1.0, 0.0]
        assert pareto["note"].is_null().all()
    else:
        assert pareto["mean"].is_null().all()
        assert pareto["note"].str.contains("stats.min_n = 13").all()
        assert (pareto["n_tasks"] == 12).all()


def test_empty_table() -> None:
    out = bootstrap_effects(pl.DataFrame(schema={"model": pl.String}))
    assert out.height == 0 and out.schema == pl.Schema(EFFECTS_SCHEMA)

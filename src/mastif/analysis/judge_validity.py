"""Does the judge prove itself? Judge-vs-check agreement with task-bootstrap CIs (issue 17,
item 7, first two bullets).

Over the runs that have both a programmatic check (``success``) and a judge verdict
(``judge_success``: TCR >= 0.7), pooled over every stack and per stack: n, accuracy and
Cohen's kappa (point estimates from :func:`mastif.evaluation.agreement.judge_agreement`, i.e.
scikit-learn's ``cohen_kappa_score``), each with a percentile interval over task-cluster
resamples (:mod:`mastif.analysis.bootstrap`: a drawn task brings every stack's runs of it).

The intervals are given from :data:`mastif.analysis.inference.MIN_TASKS_FOR_CI` (15) checked
tasks on, the one rule of every interval: below it a task bootstrap's coverage is far from
nominal, so the interval columns stay and hold null, and the note says why.

In a resample the 2x2 table of (check, verdict) counts is summed over the drawn tasks and
accuracy and kappa are computed from it in one vectorised step (the same formula as
``cohen_kappa_score`` for two labels, checked against it in tests/analysis/test_judge_validity.py);
calling scikit-learn 2,000 times per stack would take minutes. A resample in which kappa is
undefined (one class in the checks or in the verdicts) is left out of kappa's interval, and
one with one class only (both) out of accuracy's too, and counted in the note.

One class only (check and judge gave the same label to every run: all checks failed and no
TCR reached 0.7, say) is not assessable: kappa is undefined and the accuracy, 1 by
construction, is null too (never a perfect 1.000), with the note "not assessable: one class
only" (:data:`mastif.evaluation.agreement.ONE_CLASS_ONLY`). One class in the checks alone
(every check failed, the judge passing some runs) or in the verdicts alone makes kappa 0 by
arithmetic: it is null, and the note says which rater has one class.

Each row carries its class counts (``n_check_success``, ``n_check_failure``,
``n_judge_success``, ``n_judge_failure``), the gate's thresholds (``min_kappa``,
``gate_min_tasks``, ``gate_min_per_class``: ``judge.min_kappa``, ``judge.gate_min_tasks``,
``judge.gate_min_per_class``), and the gate's verdict on it by
:func:`mastif.analysis.inference.assess_gate`, the one definition of the gate: ``validated``
(True only when validated: never null) and ``gate`` ("validated: κ 0.72 ≥ 0.4", "NOT
validated: …", "not assessable: the checks have one class", …). The report's gate reads the
pooled row; a per-stack row's verdict is that stack's own and informational.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mastif.analysis.bootstrap import (
    Grid,
    quantile_bounds,
    resample_counts,
    task_resamples,
)
from mastif.analysis.inference import (
    COUNT_COLUMNS,
    GATE_MIN_PER_CLASS,
    GATE_MIN_TASKS,
    MIN_TASKS_FOR_CI,
    assess_gate,
    gate_verdict,
)
from mastif.core.factors import STACK_KEYS
from mastif.evaluation.agreement import ONE_CLASS_ONLY, judge_agreement

POOLED = "pooled"

JUDGE_VALIDITY_SCHEMA: dict[str, pl.DataType] = {
    "scope": pl.String(),
    "model": pl.String(),
    "protocol": pl.String(),
    "framework": pl.String(),
    "n": pl.Int64(),
    "n_tasks": pl.Int64(),
    **{c: pl.Int64() for c in COUNT_COLUMNS},
    "accuracy": pl.Float64(),
    "accuracy_ci_low": pl.Float64(),
    "accuracy_ci_high": pl.Float64(),
    "kappa": pl.Float64(),
    "kappa_ci_low": pl.Float64(),
    "kappa_ci_high": pl.Float64(),
    "min_kappa": pl.Float64(),
    "gate_min_tasks": pl.Int64(),
    "gate_min_per_class": pl.Int64(),
    "validated": pl.Boolean(),
    "gate": pl.String(),
    "note": pl.String(),
}


def agreement_from_tables(tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy and Cohen's kappa from 2x2 tables, ``tables[..., i]`` = counts of
    (check, verdict) = (T, T), (T, F), (F, T), (F, F). NaN where undefined: no pair, or one
    class only (chance agreement 1: kappa undefined, accuracy not assessable); kappa alone
    is NaN where the checks or the verdicts have one class (0 by arithmetic there), as in
    :func:`mastif.evaluation.agreement.judge_agreement`."""
    tt, tf, ft, ff = (tables[..., i] for i in range(4))
    n = tt + tf + ft + ff
    with np.errstate(invalid="ignore", divide="ignore"):
        p_o = (tt + ff) / n
        p_e = ((tt + tf) * (tt + ft) + (ft + ff) * (tf + ff)) / n**2
        one_class = np.isclose(p_e, 1.0)
        two_by_two = (tt + tf > 0) & (ft + ff > 0) & (tt + ft > 0) & (tf + ff > 0)
        kappa = np.where(two_by_two, (p_o - p_e) / (1.0 - p_e), np.nan)
    defined = (n > 0) & ~one_class
    return np.where(defined, p_o, np.nan), np.where(defined & two_by_two, kappa, np.nan)


def _cells(grid: Grid) -> np.ndarray:
    """(tasks, stacks, 4) counts of (check, verdict) pairs per task and stack."""
    both = pl.col("success").is_not_null() & pl.col("judge_success").is_not_null()
    c, j = pl.col("success"), pl.col("judge_success")
    cells = [c & j, c & ~j, ~c & j, ~c & ~j]
    return np.stack([grid.sums(both & cell, pl.lit(0.0), pl.lit(0.0))[2] for cell in cells], -1)


def _interval(values: np.ndarray, confidence: float) -> tuple[float | None, float | None, int]:
    ok = values[np.isfinite(values)]
    if ok.size == 0:
        return None, None, 0
    lo, hi = np.quantile(ok, quantile_bounds(confidence))
    return float(lo), float(hi), int(ok.size)


def _kappa_note(n: int, check_ok: int, judge_ok: int) -> list[str]:
    """Why kappa is null though runs have both (one class somewhere); [] when it is not."""
    if check_ok in (0, n) and judge_ok in (0, n) and (check_ok == 0) == (judge_ok == 0):
        # the accuracy row of the judge panel keeps the notes without "kappa": this one
        return [ONE_CLASS_ONLY, "kappa undefined (one label throughout)"]
    notes = []
    if check_ok in (0, n):
        notes.append(
            f"kappa undefined: the checks have one class (all {n} "
            f"{'failed' if check_ok == 0 else 'succeeded'}; kappa 0 by arithmetic)"
        )
    if judge_ok in (0, n):
        notes.append(
            f"kappa undefined: the judge's verdicts have one class (all {n} with TCR "
            f"{'<' if judge_ok == 0 else '≥'} 0.7; kappa 0 by arithmetic)"
        )
    return notes


def _row(
    scope: str,
    stack: dict[str, str | None],
    data: pl.DataFrame,
    cells: np.ndarray,  # tasks x 4
    counts: np.ndarray,
    confidence: float,
    gate: dict[str, float | int],
) -> dict[str, object]:
    n, accuracy, kappa = judge_agreement(data["success"].to_list(), data["judge_success"].to_list())
    n_tasks = int((cells.sum(1) > 0).sum())
    tt, tf, ft, ff = (int(x) for x in cells.sum(0))
    row: dict[str, object] = {"scope": scope, **stack, "n": n, "n_tasks": n_tasks}
    row |= dict(zip(COUNT_COLUMNS, (tt + tf, ft + ff, tt + ft, tf + ff), strict=True))
    row |= {"accuracy": accuracy, "kappa": kappa, **gate}
    for k in ("accuracy_ci_low", "accuracy_ci_high", "kappa_ci_low", "kappa_ci_high"):
        row[k] = None
    notes = []
    if n == 0:
        notes.append("insufficient: no run with both a check and a judge verdict")
    elif n_tasks < MIN_TASKS_FOR_CI:
        notes.append(
            f"insufficient for an interval: n_tasks = {n_tasks} < {MIN_TASKS_FOR_CI} "
            "(mastif.analysis.inference.MIN_TASKS_FOR_CI: below it a task bootstrap's "
            "coverage is far from nominal)"
        )
    else:
        acc_b, kappa_b = agreement_from_tables(counts @ cells)
        row["accuracy_ci_low"], row["accuracy_ci_high"], _ = _interval(acc_b, confidence)
        row["kappa_ci_low"], row["kappa_ci_high"], m = _interval(kappa_b, confidence)
        if 0 < m < counts.shape[0]:
            notes.append(
                f"kappa's interval over the {m} of {counts.shape[0]} resamples where defined "
                "(the others: one class in the checks or the verdicts)"
            )
    if n > 0 and kappa is None:
        notes += _kappa_note(n, tt + tf, tt + ft)
    verdict = assess_gate(row)
    row |= {"validated": verdict.validated, "gate": verdict.label}
    return row | {"note": "; ".join(notes) or None}


def judge_validity(
    runs: pl.DataFrame,
    min_kappa: float = 0.4,
    gate_min_tasks: int = GATE_MIN_TASKS,
    gate_min_per_class: int = GATE_MIN_PER_CLASS,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 20260504,
) -> pl.DataFrame:
    """``results/stats/judge_validity.parquet`` (:data:`JUDGE_VALIDITY_SCHEMA`): the pooled
    row first (scope "pooled", stack columns null), then one row per stack (scope
    "model/protocol/framework"); ``min_kappa``, ``gate_min_tasks`` and
    ``gate_min_per_class``: the gate's thresholds (``judge.*``), recorded in every row."""
    gate = {
        "min_kappa": min_kappa,
        "gate_min_tasks": gate_min_tasks,
        "gate_min_per_class": gate_min_per_class,
    }
    if runs.height == 0:
        row = {k: None for k in JUDGE_VALIDITY_SCHEMA} | {"scope": POOLED, "n": 0, "n_tasks": 0}
        row |= gate | {"note": "insufficient: no run"}
        verdict = assess_gate(row)
        row |= {"validated": verdict.validated, "gate": verdict.label}
        return pl.DataFrame([row], schema=JUDGE_VALIDITY_SCHEMA)
    grid = Grid.of(runs)
    n_t = len(grid.tasks)
    counts = resample_counts(task_resamples(n_t, resamples, seed), n_t)
    cells = _cells(grid)  # tasks x stacks x 4
    args = (counts, confidence, gate)
    none = dict.fromkeys(STACK_KEYS)
    rows = [_row(POOLED, none, runs, cells.sum(1), *args)]
    for j, stack in enumerate(grid.stacks.iter_rows(named=True)):
        data = grid.runs.filter(pl.col("_stack") == j)
        scope = "/".join(str(stack[k]) for k in STACK_KEYS)
        rows.append(_row(scope, stack, data, cells[:, j, :], *args))
    return pl.DataFrame(rows, schema=JUDGE_VALIDITY_SCHEMA)


GATE_SCHEMA: dict[str, pl.DataType] = {
    "validated": pl.Boolean(),
    "status": pl.String(),
    "verdict": pl.String(),
    "n": pl.Int64(),
    "n_tasks": pl.Int64(),
    **{c: pl.Int64() for c in COUNT_COLUMNS},
    "kappa": pl.Float64(),
    "kappa_ci_low": pl.Float64(),
    "kappa_ci_high": pl.Float64(),
    "accuracy": pl.Float64(),
    "min_kappa": pl.Float64(),
    "gate_min_tasks": pl.Int64(),
    "gate_min_per_class": pl.Int64(),
    "note": pl.String(),
}


def gate_table(validity: pl.DataFrame) -> pl.DataFrame:
    """``results/tables/judge_gate.csv``: one row, the gate's verdict
    (:func:`mastif.analysis.inference.gate_verdict`: ``validated``, ``status`` "validated",
    "NOT validated" or "not assessable", and the sentence as ``verdict``) beside the pooled
    row it reads."""
    verdict = gate_verdict(validity)
    pooled = validity.filter(pl.col("scope") == POOLED) if validity.height else validity
    row = pooled.row(0, named=True) if pooled.height else {}
    out = {k: row.get(k) for k in GATE_SCHEMA}
    out |= {"validated": verdict.validated, "status": verdict.status, "verdict": verdict.text}
    return pl.DataFrame([out], schema=GATE_SCHEMA)

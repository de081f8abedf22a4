"""One overall test per factor and per interaction, per metric (issue 38, item 6).

A coefficient of :mod:`mastif.analysis.mixed` (treatment coding, full interaction model) is a simple
effect at the reference cell: ``framework[T.langgraph]`` compares langgraph with the
reference framework *at the reference model and protocol only*. Whether a factor matters at
all is a joint question over all its levels, answered here with one test per term (each
factor with two or more levels, and each interaction of them) per metric, written to
``results/stats/mixed_joint.parquet`` (:data:`MIXED_JOINT_SCHEMA`, docs/data.md). The
coefficients stay in :mod:`mastif.analysis.mixed` as effect sizes.

Why a task-level test. Every stack runs the same tasks, so the task is the independent unit:
an experiment has 10-20 of them, however many runs. The model-based joint tests used before
(likelihood ratio of the ML-fitted LMM for CT and V; Wald tests of the GEE coefficients with
the Mancl-DeRouen bias-reduced sandwich and an F(df, n_tasks - 1) reference for success and
the judge scores) are anti-conservative with that few clusters. Measured with
bench/joint_power.py (36 stacks, 60 null experiments, alpha 0.05): GEE Wald false-positive
rates of 0.12-0.15 for main effects and 0.38 for model:framework at 10 tasks, 0.43-0.50 for
the three-way term at 10-20 tasks; the LR test of the three-way term 0.15 at 10 tasks.

The test (column ``test`` = ``Hotelling``): the repeated-measures, multivariate Wald test.

1. Per task t, the cell means m_t of the metric over the design (every combination of the
   active factors' levels; repeats averaged; CT and V on the log scale, success 0/1, the
   judge scores as numbers; the runs of :func:`mastif.analysis.mixed._response`).
2. For a term, the per-task contrast vector d_t = L m_t with L = K_1 (x) K_2 (x) ... (one
   Kronecker factor per active factor, in FACTORS order): K = C, an orthonormal Helmert
   contrast matrix ((k-1) x k), for the term's factors and the averaging row (1/k) 1' for the
   others. So a main effect is the factor's effect averaged over the other factors (the
   balanced-design Type III contrast), an interaction the interaction contrasts averaged over
   the remaining factor. p = df = the number of rows of L = prod(k - 1).
3. Hotelling's T^2 = n dbar' S^-1 dbar over the n tasks (S the sample covariance of the d_t),
   and statistic = F = (n - p) / (p (n - 1)) T^2, exactly F(p, n - p) under the null when
   the d_t are iid multivariate normal. The statistic is invariant to the choice of contrast
   basis C. In the same bench (1,000 experiments per cell, 10 and 20 tasks): 0.048 of the
   true nulls rejected, pooled over 50 cells, none of them above 0.073.

Assumptions: tasks independent (they are the sampling unit); the task-level contrasts d_t
approximately multivariate normal (each is an average over the other factors' cells, so a
binary metric is less discrete than a single run); an exchangeable, balanced design (every
stack on every task). A task missing some cell (no run of a stack, or only null values of the
metric) is left out of every term, with the count in the note. A term needs n > p tasks
(the three-way term of 3 models x 3 protocols x 4 frameworks, df 12, needs 13) and a
covariance of full rank (no contrast constant over the tasks); otherwise statistic and p are
null and the note says why. Below ``stats.min_n`` tasks (with every cell) nothing is tested:
each term's row has its df and null statistic and p, and the note is
:func:`mastif.analysis.inference.small_sample_reason`'s sentence.

``p_adjusted``: the p-values of one metric's joint tests form a family, adjusted by
``stats.family_adjust`` (Holm or Benjamini-Hochberg).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from mastif.analysis.inference import MIN_TASKS_FOR_CI, small_sample_reason
from mastif.analysis.mixed import GROUP, MODEL_KINDS, _active_factors, _Insufficient, _response
from mastif.analysis.stats import adjust_family, metric_runs
from mastif.core.factors import FACTORS

#: the table's columns (fixed, also when empty)
MIXED_JOINT_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "term": pl.String(),
    "test": pl.String(),
    "df": pl.Int64(),
    "statistic": pl.Float64(),
    "p_value": pl.Float64(),
    "p_adjusted": pl.Float64(),
    "effect": pl.Float64(),
    "n_tasks": pl.Int64(),
    "note": pl.String(),
}

HOTELLING = "Hotelling"

#: the metrics with a joint test and the scale their task-level cell means are on: the
#: models' metrics (:data:`mastif.analysis.mixed.MODEL_KINDS`: CT and V on the log scale) and
#: the paper's two other per-run measures, TUSR and IVS, as numbers (``mean``)
JOINT_KINDS: dict[str, str] = {**MODEL_KINDS, "TUSR": "mean", "IVS": "mean"}

_SCALE = {
    "lmm": "per-task cell means of log {metric}",
    "gee_binomial": "per-task cell means of {metric} (0/1)",
    "ordinal_gee": "per-task cell means of the {metric} score",
    "mean": "per-task cell means of {metric}",
}
_METHOD = "Hotelling T2 on the tasks' contrasts ({scale}, repeats averaged); F(df, n_tasks - df)"


def _terms(active: Sequence[str]) -> list[tuple[str, ...]]:
    """Every main effect and interaction of ``active``, mains first."""
    return [c for k in range(1, len(active) + 1) for c in itertools.combinations(active, k)]


def _term_name(term: tuple[str, ...]) -> str:
    return ":".join(term)


def helmert(k: int) -> np.ndarray:
    """The orthonormal Helmert contrasts of ``k`` levels: (k - 1) x k, rows orthonormal and
    orthogonal to the ones vector."""
    c = np.zeros((k - 1, k))
    for j in range(1, k):
        c[j - 1, :j] = 1.0
        c[j - 1, j] = -float(j)
        c[j - 1] /= math.sqrt(j * (j + 1))
    return c


def contrast_matrix(levels: Sequence[int], in_term: Sequence[bool]) -> np.ndarray:
    """L = K_1 (x) K_2 (x) ...: Helmert contrasts for the term's factors, the averaging row for
    the others; columns in the lexicographic order of the cells (first factor outermost)."""
    out = np.ones((1, 1))
    for k, t in zip(levels, in_term, strict=True):
        out = np.kron(out, helmert(k) if t else np.full((1, k), 1.0 / k))
    return out


def hotelling(
    d: np.ndarray,
) -> tuple[float | None, float | None, str | None, float | None]:
    """(F, p, None, D) of H0: E d_t = 0 for the rows d_t of ``d`` (n x p), D the Mahalanobis
    length of the mean contrast, sqrt(dbar' S^-1 dbar) (T^2 = n D^2; Cohen's d_z of the mean
    difference when p = 1); else (None, None, why, None)."""
    from scipy import stats as st

    n, p = d.shape
    if n <= p:
        why = (
            f"needs at least df + 1 = {p + 1} tasks with every cell, has {n}: the "
            "covariance of the task-level contrasts cannot be estimated"
        )
        return None, None, why, None
    dbar = d.mean(axis=0)
    centred = d - dbar
    sv = np.linalg.svd(centred, compute_uv=False)
    scale = max(float(np.abs(d).max()), 1e-300)
    if sv.size == 0 or sv[0] <= 1e-12 * scale:
        return (
            None,
            None,
            "no variation of the term's contrasts over the tasks; nothing to test",
            None,
        )
    rank = int((sv > sv[0] * max(n, p) * np.finfo(float).eps).sum())
    if rank < p:
        why = (
            f"no variation in {p - rank} of the term's {p} contrast directions over the "
            f"{n} tasks (covariance of rank {rank}): not testable"
        )
        return None, None, why, None
    s = centred.T @ centred / (n - 1)
    d2 = float(dbar @ np.linalg.solve(s, dbar))
    t2 = n * d2
    f = (n - p) / (p * (n - 1)) * t2
    pv = float(st.f.sf(f, p, n - p))
    return _float(f), (pv if math.isfinite(pv) else None), None, _float(math.sqrt(max(d2, 0.0)))


def _row(metric: str, term: str | None, df: int | None, n_tasks: int | None, note: str,
         statistic: float | None = None, p: float | None = None,
         effect: float | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "metric": metric,
        "term": term,
        "test": HOTELLING,
        "df": df,
        "statistic": statistic,
        "p_value": p,
        "p_adjusted": None,
        "effect": effect,
        "n_tasks": n_tasks,
        "note": note,
    }


def cell_means(
    data: pl.DataFrame, active: Sequence[str]
) -> tuple[np.ndarray, list[int], list[str], int]:
    """(tasks x cells matrix of the tasks with every cell, levels per factor, those tasks, the
    number of tasks left out for a missing cell). Cells in lexicographic order of the sorted
    levels, first factor outermost (as :func:`contrast_matrix`)."""
    levels = [sorted(data[f].unique().to_list()) for f in active]
    means = data.group_by(GROUP, *active).agg(pl.col("y").mean())
    cells = list(itertools.product(*levels))
    index = {c: i for i, c in enumerate(cells)}
    tasks = sorted(means[GROUP].unique().to_list())
    row_of = {t: i for i, t in enumerate(tasks)}
    m = np.full((len(tasks), len(cells)), np.nan)
    for rec in means.iter_rows():
        m[row_of[rec[0]], index[tuple(rec[1:-1])]] = rec[-1]
    complete = ~np.isnan(m).any(axis=1)
    kept = [t for t, ok in zip(tasks, complete, strict=True) if ok]
    return m[complete], [len(lv) for lv in levels], kept, int((~complete).sum())


def joint_response(run_table: pl.DataFrame, metric: str) -> tuple[pl.DataFrame, list[str]]:
    """The runs a metric's joint test uses, the response as column ``y`` (CT and V on the log
    scale), and notes on what was left out: :func:`mastif.analysis.mixed._response` for the
    models' metrics; the runs that count for TUSR or IVS with a value otherwise."""
    if JOINT_KINDS[metric] != "mean":
        return _response(run_table, metric)
    for column in (metric, GROUP):
        if column not in run_table.columns:
            raise _Insufficient(f"no column {column} in the run table")
    factors = [f for f in FACTORS if f in run_table.columns]
    data = metric_runs(run_table, metric).select(
        pl.col(GROUP).cast(pl.String),
        *(pl.col(f).cast(pl.String) for f in factors),
        pl.col(metric).cast(pl.Float64).fill_nan(None).alias("y"),
    )
    return data.drop_nulls(), []


def _prepared(
    run_table: pl.DataFrame, metric: str
) -> tuple[pl.DataFrame, list[str], list[str], list[str]]:
    """(runs with ``y``, active factors, notes on runs left out, notes on factors dropped);
    raises :class:`_Insufficient` when the metric has no values or no factor two levels."""
    data, notes = joint_response(run_table, metric)
    if data.height == 0:
        raise _Insufficient(f"no {metric} values")
    active, dropped = _active_factors(data)
    if not active:
        raise _Insufficient("no factor has two levels")
    return data, active, notes, dropped


def joint_metric(run_table: pl.DataFrame, metric: str, min_n: int = 5) -> list[dict[str, Any]]:
    """The joint-test rows of one metric (unadjusted); never raises on data."""
    kind = JOINT_KINDS[metric]
    try:
        data, active, notes, dropped = _prepared(run_table, metric)
    except _Insufficient as exc:
        return [_row(metric, None, None, None, f"insufficient: {exc}")]
    terms = _terms(active)
    m, levels, tasks, n_incomplete = cell_means(data, active)
    n_tasks = len(tasks)
    dfs = {t: int(np.prod([levels[active.index(f)] - 1 for f in t])) for t in terms}
    if n_incomplete:
        notes = [*notes, f"{n_incomplete} task(s) without a {metric} value in every cell left out"]
    reason = small_sample_reason(n_tasks, min_n)
    if reason is None and data["y"].n_unique() < 2:
        reason = f"insufficient: every {metric} value is the same; nothing to test"
    if reason is not None:
        note = "; ".join([reason, *notes])
        return [_row(metric, _term_name(t), dfs[t], n_tasks, note) for t in terms]
    method = _METHOD.format(scale=_SCALE[kind].format(metric=metric))
    rows = []
    for t in terms:
        lmat = contrast_matrix(levels, [f in t for f in active])
        f, p, why, effect = hotelling(m @ lmat.T)
        note = "; ".join([method if why is None else f"insufficient: {why}", *dropped, *notes])
        rows.append(_row(metric, _term_name(t), dfs[t], n_tasks, note, f, p, effect))
    return rows


def _float(x: Any) -> float | None:
    if x is None:
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def joint_tests(
    run_table: pl.DataFrame,
    *,
    metrics: Sequence[str] | None = None,
    min_n: int = 5,
    family_adjust: str = "holm",
) -> pl.DataFrame:
    """``results/stats/mixed_joint.parquet``: per metric of :data:`JOINT_KINDS`, one Hotelling
    test per factor and interaction; ``p_adjusted`` within each metric's family."""
    if family_adjust not in ("holm", "fdr_bh"):
        raise ValueError(f"family_adjust must be holm or fdr_bh, not {family_adjust!r}")
    rows: list[dict[str, Any]] = []
    for metric in metrics if metrics is not None else JOINT_KINDS:
        rows.extend(adjust_family(joint_metric(run_table, metric, min_n), family_adjust))
    return pl.DataFrame(rows, schema=MIXED_JOINT_SCHEMA, orient="row")


# ---------------------------------------------------------------------------------------------
# Within a factor: its levels' means and their pairwise contrasts (Table 6's best level)

#: ``results/stats/joint_levels.parquet``: per metric, factor and level, the level's mean over
#: the tasks with every cell (each task's cell means averaged over the other factors' levels,
#: the main-effect contrast's averaging), on the metric's own scale (CT and V: the geometric
#: mean, exp of the mean log), with a t interval over the tasks from MIN_TASKS_FOR_CI tasks on
JOINT_LEVELS_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "factor": pl.String(),
    "level": pl.String(),
    "mean": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "n_tasks": pl.Int64(),
    "note": pl.String(),
}

#: ``results/stats/joint_pairs.parquet``: per metric and factor, every pair of its levels: the
#: paired t-test of the tasks' level means (``difference`` = mean of level minus mean of
#: other, on the test's scale: log for CT and V), p Holm-adjusted within (metric, factor)
JOINT_PAIRS_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "factor": pl.String(),
    "level": pl.String(),
    "other": pl.String(),
    "difference": pl.Float64(),
    "statistic": pl.Float64(),
    "df": pl.Int64(),
    "p_value": pl.Float64(),
    "p_adjusted": pl.Float64(),
    "n_tasks": pl.Int64(),
    "note": pl.String(),
}


def _level_means(m: np.ndarray, levels: Sequence[int], position: int) -> np.ndarray:
    """(tasks x levels of the factor at ``position``): each task's cell means averaged over
    the other factors' levels (cells in :func:`cell_means`' order)."""
    shaped = m.reshape(m.shape[0], *levels)
    others = tuple(1 + i for i in range(len(levels)) if i != position)
    return shaped.mean(axis=others) if others else shaped


def level_contrasts(
    run_table: pl.DataFrame, metric: str, *, min_n: int = 5, confidence: float = 0.95
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(level rows, pair rows) of one metric for every active factor; never raises on data.

    Below ``min_n`` tasks with every cell the pairs have no statistic or p (the note says
    why); below :data:`MIN_TASKS_FOR_CI` the levels' means have no interval."""
    from scipy import stats as st

    kind = JOINT_KINDS[metric]
    try:
        data, active, _notes, _dropped = _prepared(run_table, metric)
    except _Insufficient:
        return [], []
    m, levels, tasks, _ = cell_means(data, active)
    n = len(tasks)
    names = {f: sorted(data[f].unique().to_list()) for f in active}
    back = math.exp if kind == "lmm" else float
    level_rows: list[dict[str, Any]] = []
    pair_rows: list[dict[str, Any]] = []
    for position, factor in enumerate(active):
        lm = _level_means(m, levels, position) if n else np.empty((0, levels[position]))
        for j, level in enumerate(names[factor]):
            row = dict.fromkeys(JOINT_LEVELS_SCHEMA) | {
                "metric": metric, "factor": factor, "level": level, "n_tasks": n,
            }  # fmt: skip
            if n:
                mean = float(lm[:, j].mean())
                row["mean"] = back(mean)
                if n >= MIN_TASKS_FOR_CI:
                    half = (
                        float(st.t.ppf(0.5 + confidence / 2, n - 1))
                        * float(lm[:, j].std(ddof=1))
                        / math.sqrt(n)
                    )
                    row["ci_low"], row["ci_high"] = back(mean - half), back(mean + half)
                else:
                    row["note"] = f"no interval: {n} tasks < {MIN_TASKS_FOR_CI} (MIN_TASKS_FOR_CI)"
            level_rows.append(row)
        reason = small_sample_reason(n, min_n)
        rows = []
        for a, b in itertools.combinations(range(levels[position]), 2):
            row = dict.fromkeys(JOINT_PAIRS_SCHEMA) | {
                "metric": metric, "factor": factor, "level": names[factor][a],
                "other": names[factor][b], "n_tasks": n, "df": max(n - 1, 0),
            }  # fmt: skip
            diff = lm[:, a] - lm[:, b] if n else np.empty(0)
            if n:
                row["difference"] = float(diff.mean())
            if reason is not None:
                row["note"] = reason
            elif float(np.ptp(diff)) <= 1e-12 * max(float(np.abs(diff).max()), 1e-300):
                row["note"] = "insufficient: the difference is the same on every task"
            else:
                res = st.ttest_1samp(diff, 0.0)
                row["statistic"], row["p_value"] = _float(res.statistic), _float(res.pvalue)
                row["note"] = (
                    "paired t over the tasks' level means ("
                    + _SCALE[kind].format(metric=metric)
                    + ", averaged over the other factors)"
                )
            rows.append(row)
        pair_rows.extend(adjust_family(rows, "holm"))
    return level_rows, pair_rows


def joint_contrasts(
    run_table: pl.DataFrame,
    *,
    metrics: Sequence[str] | None = None,
    min_n: int = 5,
    confidence: float = 0.95,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``results/stats/joint_levels.parquet`` and ``joint_pairs.parquet`` for every metric of
    :data:`JOINT_KINDS` (:func:`level_contrasts`)."""
    levels: list[dict[str, Any]] = []
    pairs: list[dict[str, Any]] = []
    for metric in metrics if metrics is not None else JOINT_KINDS:
        lv, pr = level_contrasts(run_table, metric, min_n=min_n, confidence=confidence)
        levels += lv
        pairs += pr
    return (
        pl.DataFrame(levels, schema=JOINT_LEVELS_SCHEMA, orient="row"),
        pl.DataFrame(pairs, schema=JOINT_PAIRS_SCHEMA, orient="row"),
    )

"""Significance tests across model, protocol and framework, *as in the paper* (Sections 4.3, 5).

Per (metric, factor), pooling every run as an independent observation (the paper's one-way
design; :mod:`mastif.analysis.blocked` has the tests that respect the task blocks): Shapiro-Wilk per
level decides between one-way ANOVA (every level shown normal) and Kruskal-Wallis
(otherwise) for CT, V, TUSR and IVS; the judge's ordinal scores TU, TA and TCR always get
Kruskal-Wallis (no normality gate). Effect size: ε² = (H - k + 1) / (n - k) for
Kruskal-Wallis, η² = F·(k - 1) / (F·(k - 1) + n - k) for ANOVA. Kruskal-Wallis mean ranks
name the best level (Table 6); Dunn's post-hoc gives the pairwise differences shown in the
violin plots. Small-n guard (issue 38): the independent unit is the task, not the run
(repeats of a task and the stacks' runs of it are not independent), so when the metric's
runs cover fewer than ``min_n`` distinct tasks (:func:`mastif.analysis.inference.independent_tasks`)
the row keeps its test name with null statistic, p and effect, the note is
:func:`mastif.analysis.inference.small_sample_reason`'s sentence, and the Dunn pairs are listed with
a null ``p_adj`` and the same note; when the experiment has enough tasks but a level has
fewer than ``min_n`` of them the note reads "insufficient: n = 3 tasks < min_n 5 (...)". The
omnibus rows with a p form one family, adjusted by Holm or Benjamini-Hochberg
(``p_adjusted`` beside ``p_value``). All statistics come from scipy / scikit-posthocs /
statsmodels; this module only routes data and records the results in the
``results/stats/{tests,groups,posthoc}.parquet`` tables of docs/data.md. Degenerate inputs
(one level, constant values) become a "skipped" row with a note instead of an exception, so
one empty metric never stops the whole analysis.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from mastif.analysis.inference import independent_tasks, small_sample_reason
from mastif.core import metric_registry as registry
from mastif.core.factors import FACTORS
from mastif.evaluation.measures import counted

# scipy and scikit-posthocs (seconds to import) are imported where they are used: every
# figure job imports this module, for significance_stars only

#: the paper's per-run metrics (mastif.core.metric_registry.PER_RUN)
METRICS: tuple[str, ...] = registry.PER_RUN

#: the independent unit: runs repeating a task, and the stacks' runs of it, are not
TASK = "task_id"

# Direction of "better" per metric (CT and V are costs), from the registry.
HIGHER_IS_BETTER: dict[str, bool] = {m: registry.higher_is_better(m) for m in METRICS}

#: the judge's ordinal scores (1-5 anchors, TCR from them): Kruskal-Wallis, no Shapiro gate
ORDINAL: frozenset[str] = frozenset(m for m in METRICS if registry.metric(m).ordinal)


def metric_runs(run_table: pl.DataFrame, metric: str) -> pl.DataFrame:
    """The runs whose ``metric`` enters the tests and the violins: those that count for it
    (:func:`mastif.evaluation.measures.counted`, as in its stack mean: the completed runs for
    CT and V, the answered ones for IVS, the judged ones for the judge's scores), by the
    columns the table has; nulls are dropped later, per metric."""
    return run_table.filter(counted(metric, run_table.columns))


TESTS_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "factor": pl.String(),
    "n_levels": pl.Int64(),
    "test": pl.String(),
    "statistic": pl.Float64(),
    "p_value": pl.Float64(),
    "all_normal": pl.Boolean(),
    "note": pl.String(),
    "p_adjusted": pl.Float64(),
    "effect_name": pl.String(),
    "effect": pl.Float64(),
    "n_tasks": pl.Int64(),
}
GROUPS_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "factor": pl.String(),
    "level": pl.String(),
    "n": pl.Int64(),
    "mean": pl.Float64(),
    "std": pl.Float64(),
    "median": pl.Float64(),
    "mean_rank": pl.Float64(),
    "shapiro_W": pl.Float64(),
    "shapiro_p": pl.Float64(),
}
POSTHOC_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "factor": pl.String(),
    "level_a": pl.String(),
    "level_b": pl.String(),
    "p_adj": pl.Float64(),
    "p_adjust": pl.String(),
    "n_tasks": pl.Int64(),
    "note": pl.String(),
}
BEST_LEVELS_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "factor": pl.String(),
    "level": pl.String(),
    "mean_rank": pl.Float64(),
}


def _float(x: Any) -> float | None:
    """A finite float, or None for None/NaN/inf (Parquet null, not NaN)."""
    if x is None:
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def _shapiro(values: np.ndarray) -> tuple[float | None, float | None]:
    """Shapiro-Wilk (W, p) of one level; (None, None) when it cannot say anything.

    scipy needs n >= 3. A zero-range sample is also reported as null: scipy then returns
    W = p = 1 with an accuracy warning, which would wrongly pass a degenerate level as normal.
    """
    if values.size < 3 or np.ptp(values) == 0:
        return None, None
    from scipy import stats as st

    res = st.shapiro(values)
    return _float(res.statistic), _float(res.pvalue)


def _group_rows(
    metric: str, factor: str, data: pl.DataFrame, levels: list[str]
) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    """Descriptive row per level (n, mean, σ, median, Kruskal-Wallis mean rank, Shapiro)."""
    from scipy import stats as st

    ranks = st.rankdata(data[metric].to_numpy())  # over all runs of the metric, ties averaged
    lv = data[factor].to_numpy()
    rows: list[dict[str, Any]] = []
    samples: list[np.ndarray] = []
    for level in levels:
        mask = lv == level
        x = data[metric].to_numpy()[mask].astype(float)
        w, p = _shapiro(x)
        rows.append(
            {
                "metric": metric,
                "factor": factor,
                "level": level,
                "n": int(x.size),
                "mean": _float(np.mean(x)),
                "std": _float(np.std(x, ddof=1)) if x.size >= 2 else None,
                "median": _float(np.median(x)),
                "mean_rank": _float(np.mean(ranks[mask])),
                "shapiro_W": w,
                "shapiro_p": p,
            }
        )
        samples.append(x)
    return rows, samples


def _metric_data(
    run_table: pl.DataFrame, metric: str, factor: str
) -> tuple[pl.DataFrame, pl.DataFrame, list[str], int]:
    """The runs that count for ``metric`` with a value and a ``factor`` level (with their
    task), the same without the task, the factor's levels, and the distinct tasks behind
    them (0 without a task column: unknown, no p)."""
    task = [pl.col(TASK).cast(pl.String)] if TASK in run_table.columns else []
    full = (
        metric_runs(run_table, metric)
        .select(
            *task, pl.col(factor).cast(pl.String), pl.col(metric).cast(pl.Float64).fill_nan(None)
        )
        .drop_nulls([factor, metric])
    )
    data = full.select(factor, metric)
    levels = sorted(data[factor].unique().to_list())
    return full, data, levels, independent_tasks(full, TASK)


def _too_few_tasks(full: pl.DataFrame, factor: str, n_tasks: int, min_n: int) -> str | None:
    """Why no p-value: fewer than ``min_n`` tasks in all
    (:func:`mastif.analysis.inference.small_sample_reason`) or in a level; None if enough."""
    reason = small_sample_reason(n_tasks, min_n)
    if reason is not None:
        return reason
    level_tasks = {
        str(lv): int(n) for lv, n in full.group_by(factor).agg(pl.col(TASK).n_unique()).rows()
    }
    small = sorted((lv, n) for lv, n in level_tasks.items() if n < min_n)
    if not small:
        return None
    return (
        f"insufficient: n = {min(n for _, n in small)} tasks < min_n {min_n} ({factor} "
        + ", ".join(f"{lv}: {n}" for lv, n in small)
        + ")"
    )


def _omnibus(test: dict[str, Any], samples: list[np.ndarray], all_normal: bool) -> bool:
    """One-way ANOVA (``all_normal``) or Kruskal-Wallis of ``samples``, with its effect
    size, into ``test``; False (and a note) when scipy cannot compute it."""
    from scipy import stats as st

    name = "anova" if all_normal else "kruskal"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = st.f_oneway(*samples) if all_normal else st.kruskal(*samples)
    except ValueError as exc:  # e.g. Kruskal-Wallis on all-identical values
        test["all_normal"] = None
        test["note"] = f"{name} failed: {exc}"
        return False
    statistic, p_value = _float(res.statistic), _float(res.pvalue)
    if statistic is None or p_value is None:
        test["all_normal"] = None
        test["note"] = f"{name} undefined on these data (NaN result)"
        return False
    n, k = sum(x.size for x in samples), len(samples)
    effect = (
        statistic * (k - 1) / (statistic * (k - 1) + n - k)  # η² from F
        if all_normal
        else (statistic - k + 1) / (n - k)  # ε² of Kruskal-Wallis
    )
    test.update(test=name, statistic=statistic, p_value=p_value, effect=_float(effect))
    return True


def _test_one(
    run_table: pl.DataFrame,
    metric: str,
    factor: str,
    alpha: float,
    p_adjust: str | None,
    min_n: int = 5,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Tests, groups and post-hoc rows for one (metric, factor)."""
    full, data, levels, n_tasks = _metric_data(run_table, metric, factor)
    test: dict[str, Any] = {
        "metric": metric,
        "factor": factor,
        "n_levels": len(levels),
        "test": "skipped",
        "statistic": None,
        "p_value": None,
        "all_normal": None,
        "note": None,
        "p_adjusted": None,
        "effect_name": None,
        "effect": None,
        "n_tasks": n_tasks,
    }
    if not levels:
        test["note"] = f"no non-null {metric} values"
        return test, [], []
    groups, samples = _group_rows(metric, factor, data, levels)
    if len(levels) < 2:
        test["note"] = (
            f"only one {factor} level with {metric} data ({levels[0]}); nothing to compare"
        )
        return test, groups, []
    values = data[metric].to_numpy()
    if np.ptp(values) == 0:
        test["note"] = (
            f"all {values.size} {metric} values are identical ({values[0]:g}); no variance to test"
        )
        return test, groups, []

    if metric in ORDINAL:
        all_normal = False  # no normality gate for ordinal scores: Kruskal-Wallis
    else:
        all_normal = all(g["shapiro_p"] is not None and g["shapiro_p"] > alpha for g in groups)
        test["all_normal"] = all_normal
    test["effect_name"] = "eta2" if all_normal else "epsilon2"
    reason = _too_few_tasks(full, factor, n_tasks, min_n)
    if reason is not None:
        test.update(test="anova" if all_normal else "kruskal", note=reason)
        return test, groups, _dunn(metric, factor, data, p_adjust, n_tasks, reason)
    if not _omnibus(test, samples, all_normal):
        return test, groups, []
    return test, groups, _dunn(metric, factor, data, p_adjust, n_tasks)


def _dunn(
    metric: str,
    factor: str,
    data: pl.DataFrame,
    p_adjust: str | None,
    n_tasks: int,
    reason: str | None = None,
) -> list[dict[str, Any]]:
    """Dunn's post-hoc (scikit-posthocs) as one row per unordered pair, level_a < level_b;
    with a ``reason`` (too few tasks) the pairs are listed with a null p_adj and that note."""
    import scikit_posthocs as sp

    if reason is None:
        matrix = sp.posthoc_dunn(
            data.to_pandas(), val_col=metric, group_col=factor, p_adjust=p_adjust
        )
        labels = sorted(str(x) for x in matrix.index)
    else:
        labels = sorted(str(x) for x in data[factor].unique().to_list())
    rows = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            rows.append(
                {
                    "metric": metric,
                    "factor": factor,
                    "level_a": a,
                    "level_b": b,
                    "p_adj": None if reason else _float(matrix.loc[a, b]),
                    "p_adjust": p_adjust or "none",
                    "n_tasks": n_tasks,
                    "note": reason,
                }
            )
    return rows


def test_factors(
    run_table: pl.DataFrame,
    metrics: Sequence[str] = METRICS,
    factors: Sequence[str] = FACTORS,
    alpha: float = 0.05,
    p_adjust: str | None = "holm",
    min_n: int = 5,
    family_adjust: str = "holm",
) -> dict[str, pl.DataFrame]:
    """The paper's tests: Shapiro-Wilk → ANOVA or Kruskal-Wallis → Dunn per (metric, factor).

    Returns {"tests", "groups", "posthoc"} with the fixed schemas of docs/data.md. Nulls
    of a metric are dropped per metric (e.g. judge-failed TCR, TUSR of runs without calls);
    CT and V are tested over completed runs only (:func:`metric_runs`). TU, TA and TCR always
    get Kruskal-Wallis. Fewer than ``min_n`` distinct tasks (``task_id``; none without that
    column) behind the metric's values: no statistic, no p, no Dunn p, the note is
    :func:`mastif.analysis.inference.small_sample_reason`'s; a level with fewer than ``min_n`` tasks:
    likewise, note "insufficient: ...". ``p_adjust`` is passed to ``scikit_posthocs.posthoc_dunn``
    (None: unadjusted); ``family_adjust`` (a statsmodels ``multipletests`` method: "holm",
    "fdr_bh") adjusts the omnibus p-values across all rows that have one (``p_adjusted``).
    """
    if min_n < 2:
        raise ValueError(f"min_n must be >= 2, not {min_n}")
    tests: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    posthoc: list[dict[str, Any]] = []
    for metric in metrics:
        for factor in factors:
            t, g, p = _test_one(run_table, metric, factor, alpha, p_adjust, min_n)
            tests.append(t)
            groups.extend(g)
            posthoc.extend(p)
    adjust_family(tests, family_adjust)
    return {
        "tests": pl.DataFrame(tests, schema=TESTS_SCHEMA),
        "groups": pl.DataFrame(groups, schema=GROUPS_SCHEMA),
        "posthoc": pl.DataFrame(posthoc, schema=POSTHOC_SCHEMA),
    }


def adjust_family(rows: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    """Set ``p_adjusted`` (statsmodels' ``multipletests``) on the rows that have a
    ``p_value``, adjusting them as one family; rows without a p keep a null. In place."""
    from statsmodels.stats.multitest import multipletests

    idx = [i for i, r in enumerate(rows) if r["p_value"] is not None]
    if idx:
        adjusted = multipletests([rows[i]["p_value"] for i in idx], method=method)[1]
        for i, p in zip(idx, adjusted, strict=True):
            rows[i]["p_adjusted"] = _float(p)
    return rows


# Keep pytest from collecting the public API function as a test when imported into a test.
test_factors.__test__ = False  # type: ignore[attr-defined]


def significance_stars(p: float | None) -> str:
    """Figure coding of the paper: "***" p < 0.001, "**" p < 0.01, "*" p < 0.05, else ""."""
    if p is None or not math.isfinite(p):
        return ""
    if p < 0.001:
        return "***"
    if p < 0.01:
        return "**"
    if p < 0.05:
        return "*"
    return ""


def best_levels(
    groups: pl.DataFrame, higher_is_better: Mapping[str, bool] = HIGHER_IS_BETTER
) -> pl.DataFrame:
    """Table 6: per (metric, factor) the level with the best Kruskal-Wallis mean rank.

    Best is the highest mean rank for TCR, TU, TA, TUSR, IVS and the lowest for the costs
    CT and V. A metric missing from ``higher_is_better`` is an error, not a guess. Ties go to
    the alphabetically first level so the table is deterministic.
    """
    data = groups.filter(pl.col("mean_rank").is_not_null())
    unknown = sorted(set(data["metric"].unique().to_list()) - set(higher_is_better))
    if unknown:
        raise ValueError(f"no direction (higher_is_better) for metric(s): {unknown}")
    rows = []
    for (metric, factor), part in data.group_by("metric", "factor", maintain_order=True):
        hib = higher_is_better[str(metric)]
        best = part.sort(["mean_rank", "level"], descending=[hib, False], nulls_last=True).row(
            0, named=True
        )
        rows.append(
            {
                "metric": metric,
                "factor": factor,
                "level": best["level"],
                "mean_rank": best["mean_rank"],
            }
        )
    return pl.DataFrame(rows, schema=BEST_LEVELS_SCHEMA)

"""Reliability across repeats (issue 17, item 6): pass@k, pass^k, flip rate and ICC per stack.

With ``repeats: K`` every stack runs every task K times (repeat r with generation seed + r).
Per stack, over its tasks (``results/stats/repeats.parquet``, :data:`REPEATS_SCHEMA`):

* ``pass@k`` (k = 1..K): the unbiased estimator 1 - C(n - c, k) / C(n, k) of "at least one of
  k runs succeeds", per task from its n runs with a check and c successes, averaged over the
  tasks with n >= k;
* ``pass^k`` (k = 1..K): C(c, k) / C(n, k), "all k runs succeed", averaged the same way;
* ``flip_rate``: share of the tasks with at least two checked runs whose check is not the same
  in every repeat;
* ``ICC_success``, ``ICC_TCR``: ICC(1), one-way random effects by task (Shrout & Fleiss
  1979): the share of the variance that lies between tasks, estimated from the one-way ANOVA
  as (MSB - MSW) / (MSB + (k0 - 1) MSW) = (F - 1) / (F + k0 - 1), F from statsmodels'
  ``anova_oneway`` (equal variances), k0 = K on balanced data, (N - sum n_i^2 / N) / (g - 1)
  when tasks have unequal numbers of values. It can be negative (more variance within tasks
  than between them) and is reported as is. pingouin (whose ICC1 is this estimator) is not a
  dependency; statsmodels' ``MixedLM`` variance components were tried and dropped: ~1 s per
  fit (72 fits for 36 stacks) and singular when the task variance is at its boundary 0.
  Success is the programmatic check (0/1, all runs with one); TCR the judge's score over the
  judged runs. When every task gives the same value in each of its repeats but tasks differ,
  ICC is 1 (no within-task variance); when no value varies at all it is undefined (null).

K is the number of distinct ``repeat`` values in the table (a table without the column:
the most runs any stack has of one task). With K < 2 every row is null with note
"needs repeats >= 2"; a fit or statistic that cannot be computed says why in ``note``.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from mastif.core.factors import STACK_KEYS
from mastif.evaluation.measures import judged

REPEATS_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "protocol": pl.String(),
    "framework": pl.String(),
    "metric": pl.String(),
    "k": pl.Int64(),
    "value": pl.Float64(),
    "n_tasks": pl.Int64(),
    "note": pl.String(),
}

NEEDS_REPEATS = "needs repeats >= 2"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with n runs, c of them successful (k <= n)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one task: probability that k runs drawn without replacement all succeed."""
    return math.comb(c, k) / math.comb(n, k)


def repeat_count(runs: pl.DataFrame) -> int:
    """K: distinct repeats in the table (or the most runs of one task on one stack)."""
    if runs.height == 0:
        return 0
    if "repeat" in runs.columns:
        return int(runs["repeat"].n_unique())
    return int(runs.group_by(*STACK_KEYS, "task_id").len()["len"].max())


def icc1(values: np.ndarray, groups: np.ndarray) -> tuple[float | None, str | None]:
    """ICC(1) of ``values`` grouped by ``groups`` (tasks), the one-way ANOVA estimator
    (F - 1) / (F + k0 - 1), F from statsmodels' ``anova_oneway`` (equal variances), k0 the
    group size (for unequal sizes (N - sum n_i^2 / N) / (g - 1)); (None, why) when it cannot
    be estimated."""
    keys, inverse = np.unique(groups, return_inverse=True)
    sizes = np.bincount(inverse)
    g, total = keys.size, values.size
    if g < 2 or (sizes >= 2).sum() < 1:
        return None, f"insufficient: {g} task(s), {(sizes >= 2).sum()} with >= 2 values"
    if np.ptp(values) == 0:
        return None, "undefined: no variance"
    means = np.bincount(inverse, weights=values) / sizes
    if float(((values - means[inverse]) ** 2).sum()) == 0:
        return 1.0, "no within-task variance"
    from statsmodels.stats.oneway import anova_oneway

    f_stat = float(anova_oneway(values, groups=inverse, use_var="equal").statistic)
    k0 = (total - float((sizes**2).sum()) / total) / (g - 1)
    return (f_stat - 1.0) / (f_stat + k0 - 1.0), None


def _rows_for_stack(stack: dict[str, str], data: pl.DataFrame, k_max: int) -> list[dict]:
    rows: list[dict] = []

    def add(metric: str, k: int | None, value: float | None, n_tasks: int, note: str | None):
        rows.append({**stack, "metric": metric, "k": k, "value": value, "n_tasks": n_tasks,
                     "note": note})  # fmt: skip

    checked = data.filter(pl.col("success").is_not_null())
    per_task = checked.group_by("task_id").agg(
        pl.len().alias("n"), pl.col("success").cast(pl.Int64).sum().alias("c")
    )
    nc = [(int(n), int(c)) for n, c in per_task.select("n", "c").iter_rows()]
    for metric, estimator in (("pass@k", pass_at_k), ("pass^k", pass_hat_k)):
        for k in range(1, k_max + 1):
            scores = [estimator(n, c, k) for n, c in nc if n >= k]
            if scores:
                add(metric, k, float(np.mean(scores)), len(scores), None)
            else:
                add(metric, k, None, 0, f"insufficient: no task with {k} checked runs")
    multi = [(n, c) for n, c in nc if n >= 2]
    if multi:
        flips = sum(0 < c < n for n, c in multi)
        add("flip_rate", None, flips / len(multi), len(multi), None)
    else:
        add("flip_rate", None, None, 0, "insufficient: no task with 2 checked runs")
    scored = data.filter(pl.col("TCR").is_not_null(), judged())
    for metric, frame, col in (("ICC_success", checked, "success"), ("ICC_TCR", scored, "TCR")):
        values = frame[col].cast(pl.Float64).to_numpy()
        groups = frame["task_id"].to_numpy()
        n_tasks = int(frame["task_id"].n_unique())
        value, note = icc1(values, groups)
        add(metric, None, value, n_tasks, note)
    return rows


def repeat_reliability(runs: pl.DataFrame) -> pl.DataFrame:
    """The repeats table (:data:`REPEATS_SCHEMA`), one block of rows per stack."""
    k_max = repeat_count(runs)
    rows: list[dict] = []
    for keys, data in runs.sort(*STACK_KEYS).group_by(*STACK_KEYS, maintain_order=True):
        stack = dict(zip(STACK_KEYS, keys, strict=True))
        if k_max < 2:
            n_tasks = int(data["task_id"].n_unique())
            for metric, k in (("pass@k", 1), ("pass^k", 1), ("flip_rate", None),
                              ("ICC_success", None), ("ICC_TCR", None)):  # fmt: skip
                rows.append({**stack, "metric": metric, "k": k, "value": None,
                             "n_tasks": n_tasks, "note": NEEDS_REPEATS})  # fmt: skip
            continue
        rows.extend(_rows_for_stack(stack, data, k_max))
    return pl.DataFrame(rows, schema=REPEATS_SCHEMA)

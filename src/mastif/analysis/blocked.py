"""Blocked tests across model, protocol and framework, blocked by task (issues 17, 51).

Every stack runs every task (and repeat), so the experiment is a crossed factorial in which
the task is the independent unit: repeats of a task, and the runs of the other factors'
stacks on it, share the task's difficulty and any task x factor interaction. The paper's
one-way tests (:mod:`mastif.analysis.stats`, "as in the paper") pool runs as if independent; the
tests here compare the levels of a factor *within* tasks, one block per task:

- aggregation: per task and level of the factor, the metric's mean over the task's stacks
  at that level (each stack's repeats averaged first, then the mean over the other factors'
  stacks that have a value). ``success`` becomes the task's success rate at that level, so
  every metric is tested the same way. Tasks missing a level are dropped (complete blocks
  only), so ``n_blocks`` = ``n_tasks``.
- omnibus: Friedman (``scipy.stats.friedmanchisquare``) on the task-level means with
  Kendall's W = chi2 / (n (k - 1)); with two levels the Wilcoxon signed-rank test, with the
  matched-pairs rank-biserial correlation (success: the difference of the task-averaged
  success rates).
- pairs: Wilcoxon signed-rank (exact for small n, scipy's ``method="auto"``) on the
  task-level means, rank-biserial correlation (success: difference in success rate).

Why by task (issue 51, item 3): blocks of ``(task, repeat)`` and, for success, Cochran's Q
with one block per task, repeat and combination of the other factors treated the blocks of
one task as independent; under random task x factor interactions (a level better on some
tasks, worse on others) their false-positive rate at alpha 0.05 was 0.13-0.17 in issue 51's
simulation, 0.07-0.10 in bench/inference_fpr.py's with task x level shifts of sd 0.06 and
0.20-0.23 with sd 0.15 (task-blocked Friedman: 0.04-0.05). With one
block per task the null hypothesis is that the levels are exchangeable within each task,
which such interactions respect, so the within-task permutation p (and Wilcoxon's sign-flip
distribution) stays valid. bench/inference_fpr.py measures power and false-positive rates
(docs/data.md has the table).

CT, V and IVS use completed runs only (:func:`mastif.analysis.stats.metric_runs`). Pairs use the
tasks where both levels are present (a level missing everywhere does not hide the others'
differences); their p-values are Holm-adjusted within each (metric, factor). The omnibus rows
that have a p form one family, adjusted by Holm or Benjamini-Hochberg (``family_adjust``).

Small-n guard (issue 38): a row whose complete blocks cover fewer than ``min_n`` tasks
(``n_tasks``) keeps its test name, has null statistic and p, and the note is
:func:`mastif.analysis.inference.small_sample_reason`'s sentence, however many repeats there are.
No normality gate. Friedman's chi-square p is asymptotic; below :data:`PERMUTATION_BELOW`
complete blocks (tasks) the omnibus p is a within-block permutation p instead
(``scipy.stats.permutation_test``, ``permutation_type="samples"``: each task's values are
shuffled among the levels, seeded). Its statistic is the sum of squared rank sums, a
monotone function of Friedman's chi2 when every block keeps its ties (as a within-block
shuffle does), so the p is Friedman's. The two-level Wilcoxon test (``method="auto"``) is
exact for small n already. ``p_method`` says which p a row has.
A test that cannot run (no variance, every block tied) says so in ``note`` with null numbers.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from mastif.analysis.inference import small_sample_reason
from mastif.analysis.stats import adjust_family, metric_runs
from mastif.core import metric_registry as registry
from mastif.core.factors import FACTORS

METRICS: tuple[str, ...] = registry.TESTED
#: 0/1 metrics: tested as the tasks' success rates, effect = difference in rate
BINARY: frozenset[str] = frozenset(
    m for m in METRICS if registry.metric(m).scale is registry.Scale.BINARY
)
#: the block and independent unit: one block per task (repeats and stacks averaged within it)
TASK = "task_id"
FAMILY_ADJUST: tuple[str, ...] = ("holm", "fdr_bh")

TESTS_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "factor": pl.String(),
    "n_blocks": pl.Int64(),
    "n_tasks": pl.Int64(),
    "n_levels": pl.Int64(),
    "test": pl.String(),
    "statistic": pl.Float64(),
    "df": pl.Float64(),
    "p_value": pl.Float64(),
    "p_adjusted": pl.Float64(),
    "p_method": pl.String(),
    "effect_name": pl.String(),
    "effect": pl.Float64(),
    "note": pl.String(),
}
PAIRS_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "factor": pl.String(),
    "level_a": pl.String(),
    "level_b": pl.String(),
    "n_pairs": pl.Int64(),
    "n_tasks": pl.Int64(),
    "test": pl.String(),
    "statistic": pl.Float64(),
    "p_value": pl.Float64(),
    "p_adjusted": pl.Float64(),
    "effect_name": pl.String(),
    "effect": pl.Float64(),
    "note": pl.String(),
}

# test names (the `test` column)
FRIEDMAN = "friedman"
WILCOXON_OMNIBUS = "wilcoxon (2 levels)"
WILCOXON = "wilcoxon"

#: fewer complete blocks (tasks) than this: Friedman's p by permutation, not chi2
PERMUTATION_BELOW = 30
PERMUTATIONS = 9999
ASYMPTOTIC = "asymptotic chi2"
EXACT = "exact"


def _rank_sum_statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    """Sum over levels of the squared within-block rank sums (vectorised for
    ``permutation_test``: each sample is one level, blocks along ``axis``)."""
    from scipy.stats import rankdata

    x = np.stack([np.moveaxis(s, axis, -1) for s in samples], axis=-1)  # (..., n, k)
    return (rankdata(x, axis=-1).sum(axis=-2) ** 2).sum(axis=-1)


def permutation_p(x: np.ndarray, seed: int, n_resamples: int | None = None) -> float:
    """Within-block permutation p of Friedman's chi2 on ``x`` (n blocks x k levels), from
    ``n_resamples`` (default :data:`PERMUTATIONS`) shuffles."""
    from scipy.stats import permutation_test

    res = permutation_test(
        tuple(x.T), _rank_sum_statistic, permutation_type="samples", vectorized=True,
        n_resamples=n_resamples or PERMUTATIONS, alternative="greater", random_state=seed,
    )  # fmt: skip
    return float(res.pvalue)


def _float(x: Any) -> float | None:
    """A finite float, or None for None/NaN/inf (Parquet null, not NaN)."""
    if x is None:
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def rank_biserial(a: np.ndarray, b: np.ndarray) -> float | None:
    """Matched-pairs rank-biserial correlation of a - b: (R+ - R-) / (R+ + R-), ranks of the
    non-zero |differences| (zeros dropped, as the Wilcoxon test's default ``"wilcox"``).
    Positive: a tends to be larger. None when every difference is zero."""
    from scipy import stats as st

    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    d = d[d != 0]
    if d.size == 0:
        return None
    ranks = st.rankdata(np.abs(d))
    plus, minus = ranks[d > 0].sum(), ranks[d < 0].sum()
    return float((plus - minus) / (plus + minus))


def kendalls_w(chi2: float, n: int, k: int) -> float:
    """Kendall's W from Friedman's chi2 (tie-corrected as scipy's): chi2 / (n (k - 1))."""
    return chi2 / (n * (k - 1))


def _levels(run_table: pl.DataFrame, factor: str) -> list[str]:
    """The factor's levels in the design (every run, whatever its metric values)."""
    return sorted(run_table[factor].cast(pl.String).drop_nulls().unique().to_list())


def block_matrix(
    run_table: pl.DataFrame, metric: str, factor: str, design: Sequence[str] = FACTORS
) -> tuple[pl.DataFrame, list[str]]:
    """One row per task (the block), one column per level of ``factor`` (the task's mean at
    that level), nulls where the task lacks that level, and the block's key column; with the
    block key's names (``[task_id]``, or ``[]`` without a task column: one block).

    The mean is over the task's stacks at that level: each stack's (the other factors'
    levels') repeats are averaged first, then the stacks that have a value; 0/1 ``success``
    becomes a success rate.
    """
    key = [TASK] if TASK in run_table.columns else []
    others = [f for f in design if f != factor and f in run_table.columns]
    data = (
        metric_runs(run_table, metric)
        .select(
            *key,
            *[pl.col(f).cast(pl.String) for f in others],
            pl.col(factor).cast(pl.String),
            pl.col(metric).cast(pl.Float64).fill_nan(None).alias("_value"),
        )
        .drop_nulls(["_value", factor])
    )
    if not key:  # no task column: every run in one block
        data = data.with_columns(pl.lit("all").alias("_block"))
    block = key or ["_block"]
    stack = data.group_by(*block, *others, factor).agg(pl.col("_value").mean())
    cell = stack.group_by(*block, factor).agg(pl.col("_value").mean())
    if cell.height == 0:
        return pl.DataFrame(schema={k: data.schema[k] for k in key}), key
    wide = cell.pivot(on=factor, index=block, values="_value").sort(block)
    return (wide if key else wide.drop("_block")), key


def _complete(wide: pl.DataFrame, levels: Sequence[str]) -> tuple[np.ndarray, int]:
    """The (n_blocks, k) array of the blocks that have every level in ``levels``, and the
    number of distinct tasks among them (0 without a task column: unknown)."""
    if any(lv not in wide.columns for lv in levels):
        return np.empty((0, len(levels))), 0
    task = [pl.col(TASK)] if TASK in wide.columns else []
    cols = [pl.col(lv).alias(f"_{i}") for i, lv in enumerate(levels)]
    sub = wide.select(*task, *cols).drop_nulls([f"_{i}" for i in range(len(levels))])
    n_tasks = int(sub[TASK].n_unique()) if task else 0
    x = sub.select(f"_{i}" for i in range(len(levels))).to_numpy().astype(float)
    return x.reshape(sub.height, len(levels)), n_tasks


# ------------------------------------------------------------------ omnibus tests


#: scipy's ``wilcoxon(method="auto")`` enumerates the 2**n sign flips up to this n when the
#: differences tie or are zero (2**13 < its 9,999 resamples)
SIGN_FLIP_MAX_N = 13


def _sign_flip_wilcoxon(d: np.ndarray) -> tuple[float, float] | None:
    """scipy's two-sided ``wilcoxon(method="auto")`` result for differences ``d`` with ties
    or zeros and n <= :data:`SIGN_FLIP_MAX_N`, vectorised: scipy computes the same exact
    sign-flip p by calling the statistic once per flip (~0.4 s a call; task-level success
    rates tie often). None where scipy takes another path (no ties and no zeros: its exact
    distribution; n too large: normal approximation; every difference zero)."""
    from scipy.stats import rankdata

    d = np.asarray(d, dtype=float)
    nonzero = d[d != 0]
    m = nonzero.size
    ties = np.unique(np.abs(nonzero)).size < m
    if d.size > SIGN_FLIP_MAX_N or m == 0 or not (ties or m < d.size):
        return None
    r = rankdata(np.abs(nonzero))
    r_plus = float(r[nonzero > 0].sum())
    r_minus = float(r[nonzero < 0].sum())
    # every subset of the ranks carries the + sign once (zeros stay zero when flipped, which
    # repeats each subset 2**n_zero times and leaves the shares unchanged)
    flips = (np.arange(2**m)[:, None] >> np.arange(m)) & 1
    null = flips @ r
    gamma = abs(np.finfo(float).eps * 100 * r_plus)  # scipy's tolerance for equal values
    less, greater = np.mean(null <= r_plus + gamma), np.mean(null >= r_plus - gamma)
    return min(r_plus, r_minus), float(min(1.0, 2 * min(less, greater)))


def _wilcoxon(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float | None, str | None]:
    """scipy's Wilcoxon signed-rank (``method="auto"``: exact for small n); (W, p, note)."""
    from scipy import stats as st

    fast = _sign_flip_wilcoxon(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))
    if fast is not None:
        return fast[0], fast[1], None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", (RuntimeWarning, UserWarning))
            res = st.wilcoxon(a, b)
    except ValueError as exc:
        return None, None, f"wilcoxon failed: {exc}"
    stat, p = _float(res.statistic), _float(res.pvalue)
    if stat is None or p is None:
        return None, None, "wilcoxon undefined on these data (NaN result)"
    return stat, p, None


def _omnibus(
    metric: str,
    factor: str,
    x: np.ndarray,
    n_levels: int,
    min_n: int,
    seed: int = 0,
    n_tasks: int | None = None,
) -> dict[str, Any]:
    """The omnibus row from the complete-block matrix ``x`` (n_tasks x k task-level means)."""
    n, k = x.shape
    binary = metric in BINARY
    if k == 2:
        test = WILCOXON_OMNIBUS
        effect_name = "diff_success_rate" if binary else "rank_biserial"
    else:
        test = FRIEDMAN
        effect_name = "kendalls_w"
    row: dict[str, Any] = {
        "metric": metric,
        "factor": factor,
        "n_blocks": n,
        "n_tasks": n if n_tasks is None else n_tasks,
        "n_levels": n_levels,
        "test": test,
        "statistic": None,
        "df": None,
        "p_value": None,
        "p_adjusted": None,
        "p_method": None,
        "effect_name": effect_name,
        "effect": None,
        "note": None,
    }
    reason = small_sample_reason(row["n_tasks"], min_n)
    if reason is not None:
        row["note"] = reason
        return row
    if np.ptp(x) == 0:
        row["note"] = f"all {x.size} {metric} values are identical ({x.flat[0]:g}); no variance"
        return row
    if np.all(np.ptp(x, axis=1) == 0):
        row["note"] = f"every task has the same {metric} at every {factor} level; nothing to test"
        return row
    if k == 2:
        a, b = x[:, 0], x[:, 1]
        stat, p, note = _wilcoxon(a, b)
        effect = float(a.mean() - b.mean()) if binary else rank_biserial(a, b)
        row.update(statistic=stat, p_value=p, note=note, effect=effect, p_method=EXACT)
        return row
    from scipy import stats as st

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = st.friedmanchisquare(*x.T)
    stat, p, df = _float(res.statistic), _float(res.pvalue), float(k - 1)
    if stat is None or p is None:
        row["note"] = f"{test} undefined on these data (NaN result)"
        return row
    method = ASYMPTOTIC
    if n < PERMUTATION_BELOW:
        p = permutation_p(x, seed)
        method = f"permutation ({PERMUTATIONS:,} within-block shuffles)"
    row.update(statistic=stat, df=df, p_value=p, effect=kendalls_w(stat, n, k), p_method=method)
    return row


def _pairs(
    metric: str, factor: str, wide: pl.DataFrame, levels: list[str], min_n: int
) -> list[dict[str, Any]]:
    """Every unordered pair of levels (level_a < level_b) over the tasks having both."""
    binary = metric in BINARY
    rows = []
    for i, la in enumerate(levels):
        for lb in levels[i + 1 :]:
            x, n_tasks = _complete(wide, [la, lb])
            n = x.shape[0]
            reason = small_sample_reason(n_tasks, min_n)
            row: dict[str, Any] = {
                "metric": metric,
                "factor": factor,
                "level_a": la,
                "level_b": lb,
                "n_pairs": n,
                "n_tasks": n_tasks,
                "test": WILCOXON,
                "statistic": None,
                "p_value": None,
                "p_adjusted": None,
                "effect_name": "diff_success_rate" if binary else "rank_biserial",
                "effect": None,
                "note": None,
            }
            if reason is not None:
                row["note"] = reason
            else:
                a, b = x[:, 0], x[:, 1]
                if np.all(a == b):
                    row["note"] = (
                        f"{metric} is the same at both levels in every task; nothing to test"
                    )
                else:
                    stat, p, note = _wilcoxon(a, b)
                    effect = float(a.mean() - b.mean()) if binary else rank_biserial(a, b)
                    row.update(statistic=stat, p_value=p, note=note, effect=effect)
            rows.append(row)
    return adjust_family(rows, "holm")


def blocked_tests(
    run_table: pl.DataFrame,
    metrics: Sequence[str] = METRICS,
    factors: Sequence[str] = FACTORS,
    min_n: int = 5,
    family_adjust: str = "holm",
    seed: int = 0,
) -> dict[str, pl.DataFrame]:
    """Task-blocked omnibus and pairwise tests for every (metric, factor) with >= 2 levels.

    Returns {"tests", "pairs"} with the fixed schemas :data:`TESTS_SCHEMA` and
    :data:`PAIRS_SCHEMA` (docs/data.md). A factor with one level in the design gets no row.
    ``family_adjust`` ("holm" or "fdr_bh") adjusts the omnibus rows' p across all of them;
    pairs are Holm-adjusted within their (metric, factor). ``seed``: of the permutation p's.
    """
    if family_adjust not in FAMILY_ADJUST:
        raise ValueError(f"family_adjust must be one of {FAMILY_ADJUST}, not {family_adjust!r}")
    if min_n < 2:
        raise ValueError(f"min_n must be >= 2, not {min_n}")
    tests: list[dict[str, Any]] = []
    pairs: list[dict[str, Any]] = []
    present = [f for f in factors if f in run_table.columns]
    for metric in metrics:
        if metric not in run_table.columns:
            continue
        for factor in present:
            levels = _levels(run_table, factor)
            if len(levels) < 2:
                continue
            wide, _ = block_matrix(run_table, metric, factor)
            missing = [lv for lv in levels if lv not in wide.columns]
            x, n_tasks = _complete(wide, levels)
            row = _omnibus(metric, factor, x, len(levels), min_n, seed, n_tasks)
            if missing and n_tasks < min_n:
                row["note"] += f" (no {metric} data for {factor} {', '.join(missing)})"
            tests.append(row)
            pairs.extend(_pairs(metric, factor, wide, levels, min_n))
    adjust_family(tests, family_adjust)
    return {
        "tests": pl.DataFrame(tests, schema=TESTS_SCHEMA),
        "pairs": pl.DataFrame(pairs, schema=PAIRS_SCHEMA),
    }

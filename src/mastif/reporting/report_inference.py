"""The report tables that draw inferences: Table 6 (best level per factor), the paper's
per-section tests (``kruskal_summary``) and the mixed models' joint tests per factor
(``mixed_joint``), with the p-value formatting every table shares (issue 38).

One rule everywhere a p is shown: the family-adjusted p stands beside the raw one, marked
"(n.s.)" when it is at least ``stats.alpha``; a level is named "best" only when its factor
is significant after the adjustment; and below ``stats.min_n`` independent tasks
(:func:`mastif.analysis.inference.small_sample_reason`) no p-value and no "best" is shown, and the
caption says why (:func:`inference_notes`). The number of tasks is the caller's
(:func:`mastif.analysis.inference.independent_tasks` of the runs); ``n_tasks=None`` means the
caller has none to give, and only the tables' own null p's hold a test back.

This module reads the stats tables; of the stages that write them it imports only the
joint table's schema (:data:`mastif.analysis.mixed_joint.MIXED_JOINT_SCHEMA`, its one definition).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import polars as pl

from mastif.analysis.inference import MIN_TASKS_FOR_CI, small_sample_reason
from mastif.analysis.mixed_joint import MIXED_JOINT_SCHEMA
from mastif.core import metric_registry as registry
from mastif.core.factors import FACTORS

#: the default significance level; the tables take the config's ``stats.alpha``
ALPHA = 0.05
DASH = "—"
NOT_SIGNIFICANT = "(n.s.)"

# Table 6: metric → (row label, research question, higher is better), from the registry
BEST_METRICS: dict[str, tuple[str, str, bool]] = {
    m: (registry.metric(m).label, registry.metric(m).research_question or "",
        registry.metric(m).higher_is_better)
    for m in registry.BEST_LEVEL_METRICS
}  # fmt: skip
METRIC_ORDER: tuple[str, ...] = registry.PER_RUN
TEST_NAMES: dict[str, tuple[str, str]] = {
    "kruskal": ("Kruskal-Wallis", "H"),
    "anova": ("ANOVA", "F"),
}
#: the tables that show p-values (their captions get the small-sample sentence)
P_TABLES: tuple[str, ...] = ("mixed_joint", "table6_best_stacks", "kruskal_summary")

CAPTIONS: dict[str, str] = {
    "table6_best_stacks": (
        "Table 6. Best-performing level of model, protocol and framework per metric (higher "
        "better for TCR, TUSR, IVS; lower for CT, V), from the joint tests' family: a level "
        "is named only when its factor's joint test (mixed_joint: Hotelling's T² on the "
        "tasks' contrasts) is significant after the family adjustment (stats.family_adjust) "
        "and the level's mean over the tasks (averaged over the other factors; CT and V "
        "geometric means; column <factor>_mean) beats every other level's in a paired t "
        "over the tasks, Holm-adjusted within the factor (results/stats/joint_pairs.parquet), "
        "at α = {alpha} (stats.alpha); otherwise a dash and the reason, and none below "
        "stats.min_n independent tasks. (only level) = a factor with one level, untested. "
        "The tests column gives each factor's joint F with raw and adjusted p ((n.s.) = "
        "adjusted p not below α). The paper ranked levels by the Kruskal-Wallis test over "
        "runs pooled as independent; that test is in kruskal_summary, the paper's section."
    ),
    "kruskal_summary": (
        "The paper's tests (not the report's inference: see mixed_joint): per metric and "
        "factor, Kruskal-Wallis H or ANOVA F, chosen by Shapiro-Wilk normality of the "
        "groups, pooling every run as independent although every stack ran the same tasks "
        "(under a task × factor interaction this test rejects a true null far more often "
        "than α: docs/data.md); raw p beside the family-adjusted p ((n.s.) = not below "
        "α = {alpha}); no p below stats.min_n independent tasks; skipped tests give the "
        "reason."
    ),
    "mixed_joint": (
        "Joint tests per factor and interaction (Hotelling's T² on the tasks' contrasts, "
        "F(df, n_tasks - df): the task is the unit): does the factor matter at all, over "
        "all its levels and averaged over the other factors? Read these first; the per-level "
        "means and pairwise contrasts are in results/stats/joint_levels.parquet and "
        "joint_pairs.parquet (Table 6 names a best level from them). Raw p beside the "
        "family-adjusted p ((n.s.) = not below α = {alpha}); D = the effect size, the "
        "Mahalanobis length of the mean contrast (Cohen's d_z for one df); no p below "
        "stats.min_n tasks (note says why)."
    ),
    "effects": (
        "Per stack: each metric's mean with its confidence interval [low, high] "
        "(stats.confidence, percentile bootstrap resampling tasks, so stacks stay paired; CT "
        "and V over completed runs; success from the tasks' checks; SVS = mean IVS of "
        "answered, completed runs), the number of tasks, and the share of resamples in which "
        "the stack is on the Pareto front of E (among stacks whose runs all completed and "
        "were judged: 0 for a stack with a failed judgement; a dash below stats.min_n "
        "independent tasks, too few for a front). An "
        f"interval is shown only for a metric with values in at least {MIN_TASKS_FOR_CI} "
        "tasks (mastif.analysis.inference.MIN_TASKS_FOR_CI, from the coverage simulation "
        "bench/ci_coverage.py: with fewer tasks a task bootstrap's interval covers the true "
        "value far less often than its nominal level); below, the mean alone. mastif's, "
        "not in the paper."
    ),
}


# ---------------------------------------------------------------------------------------------
# p-values


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def fmt_num(x: Any, decimals: int = 3) -> str:
    """A number with fixed decimals; an em dash for null/NaN."""
    return DASH if _missing(x) else f"{float(x):.{decimals}f}"


def fmt_p(p: Any) -> str:
    """p-values as the paper writes them: ``< 0.001`` or 3 decimals."""
    if _missing(p):
        return DASH
    return "< 0.001" if float(p) < 0.001 else f"{float(p):.3f}"


def fmt_p_adjusted(p: Any, alpha: float = ALPHA) -> str:
    """An adjusted p, marked ``(n.s.)`` when it is not below ``alpha``."""
    if _missing(p):
        return DASH
    return fmt_p(p) + (f" {NOT_SIGNIFICANT}" if float(p) >= alpha else "")


def _p_pair(p: Any, p_adjusted: Any, alpha: float) -> str:
    """'p=0.017, adjusted p=0.205 (n.s.)' — raw and adjusted side by side."""

    def eq(text: str) -> str:
        return f" {text}" if text.startswith("<") else f"={text}"

    return f"p{eq(fmt_p(p))}, adjusted p{eq(fmt_p_adjusted(p_adjusted, alpha))}"


def _reason(n_tasks: int | None, min_n: int | None) -> str | None:
    """The small-sample sentence, or None when there are enough tasks (or no count)."""
    if n_tasks is None or min_n is None:
        return None
    return small_sample_reason(n_tasks, min_n)


def _ordered(column: str, order: Sequence[str]) -> pl.Expr:
    """Sort key putting known names in ``order`` first, the rest after."""
    return pl.col(column).replace_strict(
        {name: i for i, name in enumerate(order)}, default=len(order), return_dtype=pl.Int64
    )


def _with_adjusted(stats_tests: pl.DataFrame) -> pl.DataFrame:
    """The tests table with a ``p_adjusted`` column (null when a file predates it: an
    unknown adjustment is no adjustment passed)."""
    if "p_adjusted" in stats_tests.columns:
        return stats_tests
    return stats_tests.with_columns(pl.lit(None, dtype=pl.Float64).alias("p_adjusted"))


# ---------------------------------------------------------------------------------------------
# Table 6 and the paper's tests


def _joint_text(factor: str, test: dict[str, Any] | None, alpha: float) -> str:
    """'framework: F(3, 16)=4.210, p=0.022, adjusted p=0.066 (n.s.)' (the joint test)."""
    if test is None:
        return f"{factor}: no joint test"
    if _missing(test["p_value"]):
        return f"{factor}: not tested ({test.get('note') or 'no p-value'})"
    df, n = test["df"], test["n_tasks"]
    pair = _p_pair(test["p_value"], test.get("p_adjusted"), alpha)
    return f"{factor}: F({df}, {n - df})={fmt_num(test['statistic'])}, {pair}"


def _best_level(
    levels: pl.DataFrame,
    pairs: pl.DataFrame,
    test: dict[str, Any] | None,
    higher: bool,
    alpha: float,
) -> tuple[str, Any]:
    """The best level of a factor whose joint test is significant after the family
    adjustment, named only when its pairwise contrast with every other level is significant
    after the within-factor adjustment; else a dash and why."""
    if test is None or _missing(test["p_value"]):
        return f"{DASH} (not tested)", None
    adjusted = test.get("p_adjusted")
    if _missing(adjusted):
        return f"{DASH} (no adjusted p)", None
    if adjusted >= alpha:
        return f"{DASH} (n.s. after adjustment: adjusted p {fmt_p(adjusted)})", None
    known = levels.filter(pl.col("mean").is_not_null())
    if known.height == 0:
        return f"{DASH} (no level mean)", None
    best = known.sort(["mean", "level"], descending=[higher, False]).row(0, named=True)
    level = best["level"]
    for other in known["level"].to_list():
        if other == level:
            continue
        pair = pairs.filter(
            ((pl.col("level") == level) & (pl.col("other") == other))
            | ((pl.col("level") == other) & (pl.col("other") == level))
        )
        p = pair["p_adjusted"][0] if pair.height else None
        if _missing(p) or p >= alpha:
            why = "no adjusted p" if _missing(p) else f"adjusted p {fmt_p(p)}"
            return f"{DASH} ({level} not distinguishable from {other}: {why})", best["mean"]
    return str(level), best["mean"]


def best_stacks(
    joint: pl.DataFrame,
    levels: pl.DataFrame,
    pairs: pl.DataFrame,
    stacks: pl.DataFrame,
    alpha: float = ALPHA,
    n_tasks: int | None = None,
    min_n: int | None = None,
) -> pl.DataFrame:
    """Table 6: per metric and factor, the best level from the joint test's family: the
    factor's joint test (:mod:`mastif.analysis.mixed_joint`) significant after the family
    adjustment, then the level with the best mean over the tasks (averaged over the other
    factors) whose pairwise contrast with every other level is significant after the
    within-factor adjustment (``joint_levels``, ``joint_pairs``); none below ``min_n``
    independent tasks (``n_tasks``). A factor with one level in ``stacks`` is named
    "(only level)", untested."""
    joint = joint.select(
        pl.col(c).cast(t) if c in joint.columns else pl.lit(None, dtype=t).alias(c)
        for c, t in MIXED_JOINT_SCHEMA.items()
    )
    reason = _reason(n_tasks, min_n)
    short = None if reason is None else f"{n_tasks} tasks < stats.min_n {min_n}"
    rows = []
    for metric, (label, rq, higher) in BEST_METRICS.items():
        row: dict[str, Any] = {"Metric": label, "RQ": rq, "better": "higher" if higher else "lower"}
        tests_text = []
        for factor in FACTORS:
            present = stacks[factor].unique().to_list() if factor in stacks.columns else []
            tests = joint.filter((pl.col("metric") == metric) & (pl.col("term") == factor))
            test = tests.row(0, named=True) if tests.height else None
            of = (pl.col("metric") == metric) & (pl.col("factor") == factor)
            if len(present) == 1:
                row[factor], row[f"{factor}_mean"] = f"{present[0]} (only level)", None
            elif short is not None:
                row[factor], row[f"{factor}_mean"] = f"{DASH} ({short})", None
            else:
                row[factor], row[f"{factor}_mean"] = _best_level(
                    levels.filter(of), pairs.filter(of), test, higher, alpha
                )
                tests_text.append(_joint_text(factor, test, alpha))
        row["tests"] = reason if reason is not None else "; ".join(tests_text) or None
        rows.append(row)
    schema = {"Metric": pl.String, "RQ": pl.String, "better": pl.String}
    for factor in FACTORS:
        schema |= {factor: pl.String, f"{factor}_mean": pl.Float64}
    return pl.DataFrame(rows, schema=schema | {"tests": pl.String})


def _withhold_p(df: pl.DataFrame, reason: str | None) -> pl.DataFrame:
    """Null ``p_value`` and ``p_adjusted`` and put ``reason`` in ``note`` (below min_n)."""
    if reason is None:
        return df
    return df.with_columns(
        pl.lit(None, dtype=pl.Float64).alias("p_value"),
        pl.lit(None, dtype=pl.Float64).alias("p_adjusted"),
        pl.lit(reason).alias("note"),
    )


def kruskal_summary(
    stats_tests: pl.DataFrame, n_tasks: int | None = None, min_n: int | None = None
) -> pl.DataFrame:
    """The per-section test sentences ("Kruskal-Wallis test for … H-statistic = …") as rows,
    raw and adjusted p side by side; none below ``min_n`` independent tasks."""
    out = (
        _with_adjusted(stats_tests)
        .sort(_ordered("metric", METRIC_ORDER), _ordered("factor", FACTORS))
        .select(
            "metric",
            "factor",
            "test",
            pl.col("test")
            .replace_strict(
                {k: v[1] for k, v in TEST_NAMES.items()}, default=None, return_dtype=pl.String
            )
            .alias("stat"),
            "statistic",
            "p_value",
            "p_adjusted",
            "n_levels",
            "all_normal",
            pl.col("note").cast(pl.String),
        )
    )
    return _withhold_p(out, _reason(n_tasks, min_n))


# ---------------------------------------------------------------------------------------------
# The mixed models' joint tests (results/stats/mixed_joint.parquet)

MIXED_METRIC_ORDER: tuple[str, ...] = registry.CHECK_FIRST


def mixed_joint_table(
    joint: pl.DataFrame, n_tasks: int | None = None, min_n: int | None = None
) -> pl.DataFrame:
    """The joint test of each factor and interaction per metric: main effects first (model,
    protocol, framework), then the interactions; no p where the model's tasks (its row's
    ``n_tasks``, else the experiment's ``n_tasks``) are fewer than ``min_n``."""
    joint = joint.select(
        pl.col(c).cast(t) if c in joint.columns else pl.lit(None, dtype=t).alias(c)
        for c, t in MIXED_JOINT_SCHEMA.items()
    )
    order = (
        _ordered("metric", MIXED_METRIC_ORDER),
        pl.col("metric"),
        pl.col("term").str.count_matches(":"),
        _ordered("term", FACTORS),
        pl.col("term"),
    )
    rows = []
    for row in joint.sort(*order).iter_rows(named=True):
        tasks = row["n_tasks"] if row["n_tasks"] is not None else n_tasks
        reason = _reason(tasks, min_n)
        # a row without a term says why the metric has no test at all: keep that
        if reason is not None and row["term"] is not None:
            row |= {"p_value": None, "p_adjusted": None, "note": reason}
        rows.append(row)
    return pl.DataFrame(rows, schema=MIXED_JOINT_SCHEMA)


# ---------------------------------------------------------------------------------------------
# Captions


def inference_notes(n_tasks: int, min_n: int) -> dict[str, str]:
    """The line put before a table's caption: below ``min_n`` independent tasks the
    small-sample sentence on every table that shows p-values, and below
    :data:`MIN_TASKS_FOR_CI` tasks why the effects table shows no interval."""
    notes: dict[str, str] = {}
    reason = small_sample_reason(n_tasks, min_n)
    if reason is not None:
        notes |= {name: reason[0].upper() + reason[1:] + "." for name in P_TABLES}
    if n_tasks < MIN_TASKS_FOR_CI:
        notes["effects"] = (
            f"No interval: {n_tasks} independent task{'' if n_tasks == 1 else 's'} < "
            f"{MIN_TASKS_FOR_CI} (mastif.analysis.inference.MIN_TASKS_FOR_CI), too few for a task "
            "bootstrap's interval to reach its nominal coverage (bench/ci_coverage.py)."
        )
    return notes

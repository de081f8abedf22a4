"""Per-stack effects with task-bootstrap confidence intervals (issue 17, item 3).

Every stack runs the same tasks, so the unit of resampling is the task, not the run: one
bootstrap resample draws ``n_tasks`` tasks with replacement, and a drawn task brings all its
repeats and every stack's runs of it (a cluster bootstrap). The stacks stay paired: within a
resample every stack is measured on the same draw of tasks, so the Pareto front of a resample
compares stacks on one and the same sample of tasks.

The resamples are one index matrix (:func:`task_resamples`, numpy ``Generator`` seeded with
``stats.seed``) turned into a count matrix C (resample x task: how often each task was
drawn). Each metric is a ratio of per-(task, stack) sums, so a resample's per-stack estimate
is ``(C @ numerator) / (C @ denominator)`` for all stacks and resamples at once — exactly the
pooled mean over the resampled runs that :func:`mastif.evaluation.metrics.stack_metrics` computes on the
full data. The interval is the percentile interval of the resampled estimates.

Metrics (``results/stats/effects.parquet``, :data:`EFFECTS_SCHEMA`):

* ``TCR``: the judge's completion score over the judged runs of every status (Eq. 1);
* ``success``: share of runs whose programmatic check passed, over the runs with a check;
* ``CT``, ``V``: over the completed runs only (status ok);
* ``TUSR``: successful tool calls / tool calls, pooled over the calls (Eq. 5);
* ``SVS``: mean IVS (Eq. 8) over the completed runs with a final answer;
* ``pareto``: ``mean`` is the share of resamples in which the stack is on the Pareto front of
  (max TCR, min CT, min V) (:func:`mastif.evaluation.measures.pareto_front`), with the
  eligibility rule of ``stack_metrics``: a stack with a timed-out or errored run among the
  resampled runs is not on the front of that resample
  (:func:`~mastif.evaluation.measures.pareto_ineligible`); a stack with a failed judgement
  anywhere in the data has an unknown TCR (its ``TCR`` row has no mean), so it is on the
  front of no resample and pushes no other stack off, whichever tasks a resample draws.
  ``n_values`` is the number of resamples; no interval. Below ``stats.min_n`` independent
  tasks (``min_n``) no share is given (null, the note says why): a front drawn from so few
  tasks is no finding (:func:`mastif.analysis.inference.small_sample_reason`).

Intervals: ``ci_low``/``ci_high`` are given only where the stack's metric has values in at
least :data:`mastif.analysis.inference.MIN_TASKS_FOR_CI` tasks; below it a task bootstrap's
percentile interval covers far less than its nominal level (bench/ci_coverage.py), so the
row keeps its mean and its note says why there is no interval. :data:`MIN_TASKS` is the
fewest tasks to resample at all (the Pareto share's floor when ``min_n`` is lower).

Which runs count for each metric is :func:`mastif.evaluation.measures.counted`, as in the
stack table and the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from mastif.analysis.inference import MIN_TASKS_FOR_CI
from mastif.core import metric_registry as registry
from mastif.core.factors import STACK_KEYS
from mastif.evaluation.measures import counted, judge_failed, pareto_front, pareto_ineligible

#: the metrics with a bootstrap interval, in the table's order
EFFECT_METRICS: tuple[str, ...] = registry.EFFECT_METRICS
PARETO = "pareto"
#: fewest tasks to resample at all; an interval needs
#: :data:`mastif.analysis.inference.MIN_TASKS_FOR_CI` tasks with values
MIN_TASKS = 2

EFFECTS_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "protocol": pl.String(),
    "framework": pl.String(),
    "metric": pl.String(),
    "n_tasks": pl.Int64(),
    "n_values": pl.Int64(),
    "mean": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "note": pl.String(),
}


def task_resamples(n_tasks: int, resamples: int, seed: int) -> np.ndarray:
    """Index matrix (resamples x n_tasks): row b lists the tasks (0..n_tasks-1) drawn, with
    replacement, in resample b. Drawn in one call of a seeded ``numpy.random.Generator``, so
    row b equals the b-th of ``resamples`` successive ``rng.integers(0, n_tasks, n_tasks)``."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_tasks, size=(resamples, n_tasks))


def resample_counts(index: np.ndarray, n_tasks: int) -> np.ndarray:
    """Count matrix (resamples x n_tasks): how often each task was drawn in each resample."""
    b = index.shape[0]
    flat = (index + np.arange(b)[:, None] * n_tasks).ravel()
    return np.bincount(flat, minlength=b * n_tasks).reshape(b, n_tasks).astype(float)


def quantile_bounds(confidence: float) -> tuple[float, float]:
    """Lower and upper quantile of a two-sided percentile interval."""
    tail = (1.0 - confidence) / 2.0
    return tail, 1.0 - tail


@dataclass(frozen=True)
class Grid:
    """The stacks and tasks of a run table, in a fixed order (sorted), and the run table with
    each run's task and stack positions (columns ``_task``, ``_stack``)."""

    stacks: pl.DataFrame  # one row per stack: model, protocol, framework
    tasks: list[str]
    runs: pl.DataFrame

    @classmethod
    def of(cls, runs: pl.DataFrame) -> Grid:
        stacks = runs.select(*STACK_KEYS).unique().sort(*STACK_KEYS)
        tasks = sorted(runs["task_id"].unique().to_list())
        task_pos = pl.DataFrame({"task_id": tasks, "_task": range(len(tasks))})
        stack_pos = stacks.with_row_index("_stack")
        runs = runs.join(task_pos, on="task_id", how="left").join(
            stack_pos, on=list(STACK_KEYS), how="left", nulls_equal=True
        )
        return cls(stacks, tasks, runs)

    def sums(self, where: pl.Expr, num: pl.Expr, den: pl.Expr) -> np.ndarray:
        """(3, tasks, stacks) array of per-(task, stack) sums of num, den and the number of
        runs over the runs that satisfy ``where`` (zero where a cell has none)."""
        out = np.zeros((3, len(self.tasks), self.stacks.height))
        data = self.runs.filter(where).select(
            "_task", "_stack", num.cast(pl.Float64).alias("num"), den.cast(pl.Float64).alias("den")
        )
        at = (data["_task"].to_numpy(), data["_stack"].to_numpy())
        np.add.at(out[0], at, data["num"].fill_null(0.0).to_numpy())
        np.add.at(out[1], at, data["den"].fill_null(0.0).to_numpy())
        np.add.at(out[2], at, 1.0)
        return out


def metric_where(metric: str) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(runs kept, numerator, denominator) of ``metric``'s pooled mean: the runs with a value
    that count for it (:func:`mastif.evaluation.measures.counted`), and see the module
    docstring for the rest."""
    if metric == "TUSR":
        calls = pl.col("n_tool_calls").fill_null(0) > 0
        return (
            calls & pl.col("n_tool_ok").is_not_null(),
            pl.col("n_tool_ok"),
            pl.col("n_tool_calls"),
        )
    col = {"SVS": "IVS"}.get(metric, metric)
    if col not in {*registry.PARETO_OBJECTIVES, "success", "IVS"}:
        raise ValueError(f"unknown metric {metric!r}")
    return pl.col(col).is_not_null() & counted(metric), pl.col(col), pl.lit(1.0)


def metric_sums(grid: Grid, metric: str) -> np.ndarray:
    """Per (task, stack): numerator, denominator and number of values of ``metric``."""
    return grid.sums(*metric_where(metric))


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _pareto_shares(
    grid: Grid, counts: np.ndarray, sums: dict[str, np.ndarray], unknown: np.ndarray
) -> np.ndarray:
    """Per stack: share of resamples in which it is on the Pareto front. A stack is eligible
    in a resample when none of its resampled runs is :func:`pareto_ineligible` and it is not
    ``unknown`` (a failed judgement anywhere in the data: ineligible in every resample)."""
    est = {m: _ratio(counts @ sums[m][0], counts @ sums[m][1]) for m in registry.PARETO_OBJECTIVES}
    failed = grid.sums(pareto_ineligible(), pl.lit(1.0), pl.lit(0.0))
    n_failed = counts @ failed[2]
    on_front = np.zeros(grid.stacks.height)
    for b in range(counts.shape[0]):
        frame = pl.DataFrame(
            {
                "TCR_mean": est["TCR"][b],
                "CT_mean": est["CT"][b],
                "V_mean": est["V"][b],
                "eligible": (n_failed[b] == 0) & ~unknown,
            }
        )
        on_front += pareto_front(frame, eligible="eligible").to_numpy()
    return on_front / counts.shape[0]


def _interval_note(n_tasks: int) -> str:
    """Why a stack/metric with values in ``n_tasks`` tasks has no interval."""
    if n_tasks == 0:
        return "insufficient: no value"
    return (
        f"insufficient: n_tasks = {n_tasks} < {MIN_TASKS_FOR_CI} (MIN_TASKS_FOR_CI): no "
        "confidence interval"
    )


def _pareto_note(n_tasks: int, min_n: int) -> str:
    """Why no Pareto share is given for an experiment of ``n_tasks`` tasks."""
    return (
        f"insufficient: n_tasks = {n_tasks} < stats.min_n = {min_n}: no Pareto share "
        "(repeats of a task and the stacks' runs of it are not independent)"
    )


def bootstrap_effects(
    runs: pl.DataFrame,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 20260504,
    metrics: Sequence[str] = EFFECT_METRICS,
    min_n: int = 5,
) -> pl.DataFrame:
    """The effects table (:data:`EFFECTS_SCHEMA`): per stack and metric the pooled mean, with
    a percentile interval over ``resamples`` task-cluster resamples, then a ``pareto`` row per
    stack. A stack/metric with values in fewer than
    :data:`mastif.analysis.inference.MIN_TASKS_FOR_CI` tasks has its mean but a null interval
    and note "insufficient: ..."; one without any value has a null mean too. With fewer than
    ``min_n`` (``stats.min_n``) independent tasks the ``pareto`` rows have a null share and
    say why; a stack with a failed judgement has share 0 (never on the front), as in the
    stack table."""
    if runs.height == 0:
        return pl.DataFrame(schema=EFFECTS_SCHEMA)
    grid = Grid.of(runs)
    n_t = len(grid.tasks)
    counts = resample_counts(task_resamples(n_t, resamples, seed), n_t)
    q_lo, q_hi = quantile_bounds(confidence)
    sums = {m: metric_sums(grid, m) for m in {*metrics, *registry.PARETO_OBJECTIVES}}
    # per (task, stack): failed judgements. A stack with one has an unknown TCR (as in
    # stack_metrics): no mean, no interval, and never on the Pareto front
    n_judge_failed = grid.sums(judge_failed(), pl.lit(0.0), pl.lit(0.0))[2].sum(0)
    rows = []
    for metric in metrics:
        num, den, nval = sums[metric]
        point = _ratio(num.sum(0), den.sum(0))
        boot = _ratio(counts @ num, counts @ den)  # resamples x stacks
        tasks_with = (den > 0).sum(0)
        for j, stack in enumerate(grid.stacks.iter_rows(named=True)):
            row = {**stack, "metric": metric, "n_tasks": int(tasks_with[j])}
            row |= {"n_values": int(nval[:, j].sum()), "mean": _finite(point[j])}
            row |= {"ci_low": None, "ci_high": None, "note": None}
            if metric == "TCR" and n_judge_failed[j] > 0:
                row["mean"] = None
                row["note"] = f"unknown: {int(n_judge_failed[j])} judgement(s) failed"
            elif tasks_with[j] < max(MIN_TASKS, MIN_TASKS_FOR_CI):
                row["note"] = _interval_note(int(tasks_with[j]))
            else:
                col = boot[:, j]
                ok = col[np.isfinite(col)]
                row["ci_low"], row["ci_high"] = (float(v) for v in np.quantile(ok, [q_lo, q_hi]))
                if ok.size < resamples:
                    row["note"] = (
                        f"interval over the {ok.size} of {resamples} resamples with a value"
                    )
            rows.append(row)
    unknown = n_judge_failed > 0
    shares = _pareto_shares(grid, counts, sums, unknown) if n_t >= max(MIN_TASKS, min_n) else None
    for j, stack in enumerate(grid.stacks.iter_rows(named=True)):
        row = {**stack, "metric": PARETO, "n_tasks": n_t, "n_values": resamples}
        row |= {"mean": None if shares is None else float(shares[j])}
        row |= {"ci_low": None, "ci_high": None, "note": None}
        if shares is None:
            row["note"] = _pareto_note(n_t, max(MIN_TASKS, min_n))
        elif unknown[j]:
            row["note"] = (
                f"never on the front: {int(n_judge_failed[j])} judgement(s) failed (TCR "
                "unknown, as in the stack table)"
            )
        rows.append(row)
    return pl.DataFrame(rows, schema=EFFECTS_SCHEMA)

"""What the data can carry: the one small-sample rule and the judge gate's verdict.

Every table, figure, report caption and the viewer apply the same two rules (issue 38):

* **Small samples.** Every stack runs the same tasks, so the independent unit is the task,
  not the run: repeats of a task are not independent, and neither are the stacks' runs of
  it. Below ``stats.min_n`` independent tasks no p-value, no significance star and no
  "best" level is shown anywhere, and a caption says why (:func:`small_sample_reason`).
  An interval is called a confidence interval only from :data:`MIN_TASKS_FOR_CI` tasks on
  (below it a task bootstrap's coverage is far from its nominal level).
* **The judge gate.** The judge's TU/TA/TCR are validated for an experiment when the pooled
  Cohen's κ between the judge's verdict and the tasks' programmatic checks reaches
  ``judge.min_kappa``. :func:`gate_verdict` turns ``results/stats/judge_validity.parquet``
  into one sentence, which stands at the top of the report, on every figure and table built
  on judge scores, and in the viewer.

This module reads tables; it imports nothing of the stages that write them.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

#: The fewest independent tasks from which a task-bootstrap percentile interval is labelled
#: a confidence interval: bench/ci_coverage.py (4,000 simulated experiments per size, task
#: logit sd 1.5) finds the nominal 95% interval of a stack's success rate and mean judge
#: score covering 0.487 / 0.489 at 2 tasks, 0.890 / 0.891 at 8, 0.935 / 0.904 at 10,
#: 0.930 / 0.921 at 15, 0.924 / 0.932 at 20 and 0.935 / 0.937 at 30 (SE 0.004): from 15
#: tasks on every size of the grid stays within 3 points of nominal (see docs/data.md).
MIN_TASKS_FOR_CI = 15


def independent_tasks(runs: pl.DataFrame, task_column: str = "task_id") -> int:
    """How many independent tasks ``runs`` hold: distinct tasks, whatever the repeats and
    stacks (0 for an empty table)."""
    if runs.height == 0 or task_column not in runs.columns:
        return 0
    return int(runs[task_column].drop_nulls().n_unique())


def small_sample_reason(n_tasks: int, min_n: int) -> str | None:
    """None when ``n_tasks`` independent tasks may carry a test; else the one sentence every
    table, figure and caption shows in place of p-values, stars and "best"."""
    if n_tasks >= min_n:
        return None
    return (
        f"no p-value, star or best level: {n_tasks} independent task"
        f"{'' if n_tasks == 1 else 's'} < stats.min_n = {min_n} "
        "(repeats of a task and the stacks' runs of it are not independent)"
    )


@dataclass(frozen=True)
class GateVerdict:
    """The judge gate for one experiment: ``validated`` (False when unknown) and one
    sentence saying what it means for the judge's scores."""

    validated: bool
    text: str


def gate_verdict(judge_validity: pl.DataFrame) -> GateVerdict:
    """The gate's verdict from ``results/stats/judge_validity.parquet`` (its pooled row).

    Validated only when the pooled κ is known and reaches its ``min_kappa``. A κ that is
    undefined because only one class occurs (all checks failed, say) is "not assessable:
    one class only", never a perfect accuracy."""
    pooled = judge_validity.filter(pl.col("scope") == "pooled") if judge_validity.height else None
    if pooled is None or pooled.height == 0:
        return GateVerdict(False, "judge NOT validated: no judge-validity result")
    row = pooled.row(0, named=True)
    kappa, min_kappa, n = row.get("kappa"), row.get("min_kappa"), row.get("n") or 0
    if n == 0:
        return GateVerdict(
            False, "judge NOT validated: no run has both a check and a judge verdict"
        )
    if kappa is None:
        return GateVerdict(
            False,
            f"judge NOT validated: agreement with the checks not assessable: one class only "
            f"({n} runs with a check and a verdict, all with the same label; κ undefined, no "
            "accuracy); TU, TA and TCR are the judge's unvalidated scores",
        )
    if row.get("validated"):
        return GateVerdict(
            True, f"judge validated: pooled κ {kappa:.2f} ≥ {min_kappa:g} ({n} runs)"
        )
    return GateVerdict(
        False,
        f"judge NOT validated: pooled κ {kappa:.2f} < judge.min_kappa {min_kappa:g} ({n} runs); "
        "TU, TA and TCR are the judge's unvalidated scores",
    )

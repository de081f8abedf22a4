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
  ``judge.min_kappa`` *and* the evidence can carry κ: at least ``judge.gate_min_tasks``
  checked tasks and ``judge.gate_min_per_class`` runs whose check succeeded and as many
  whose check failed. When the checks, or the judge's verdicts, have one class (every check
  failed, say) κ is 0 or undefined by arithmetic, whatever the judge does: the gate is then
  "not assessable", never "NOT validated: κ 0.00" and never "validated". :func:`assess_gate`
  is the one definition (it also sets ``validated`` of every row of
  ``results/stats/judge_validity.parquet``); :func:`gate_verdict` applies it to that table's
  pooled row and turns it into one sentence, which stands on the report's front page (after
  the joint tests), in every figure and table built on judge scores, and in the viewer.

This module reads tables; it imports nothing of the stages that write them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from mastif.core import metric_registry as registry

#: The fewest independent tasks from which a task-bootstrap percentile interval is labelled
#: a confidence interval: bench/ci_coverage.py (4,000 simulated experiments per size, task
#: logit sd 1.5) finds the nominal 95% interval of a stack's success rate and mean judge
#: score covering 0.487 / 0.489 at 2 tasks, 0.890 / 0.891 at 8, 0.935 / 0.904 at 10,
#: 0.930 / 0.921 at 15, 0.924 / 0.932 at 20 and 0.935 / 0.937 at 30 (SE 0.004): from 15
#: tasks on every size of the grid stays within 3 points of nominal (see docs/data.md).
MIN_TASKS_FOR_CI = 15

#: the class counts of a judge-validity row (:mod:`mastif.analysis.judge_validity`): runs
#: whose check succeeded / failed, and whose judge verdict (TCR >= 0.7) was success / not
COUNT_COLUMNS = ("n_check_success", "n_check_failure", "n_judge_success", "n_judge_failure")


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


#: the judge's scores: what the gate validates (a table row or figure of one carries it)
JUDGE_SCORES = registry.JUDGE_SCORES

#: the gate's three outcomes (:attr:`GateVerdict.status`)
VALIDATED, NOT_VALIDATED, NOT_ASSESSABLE = "validated", "NOT validated", "not assessable"

#: the defaults of ``judge.gate_min_tasks`` and ``judge.gate_min_per_class`` (the schema's):
#: κ's interval is a confidence interval only from :data:`MIN_TASKS_FOR_CI` tasks on, so the
#: gate does not validate on fewer; and κ combines the judge's sensitivity (over the runs
#: whose check succeeded) and specificity (over those whose check failed), each a
#: proportion of one class's runs: with 10 of them one run moves it by 0.1, and 10 of 10
#: still leaves a 95% Wilson lower bound of 0.72 (docs/data.md, "Judge gate")
GATE_MIN_TASKS = MIN_TASKS_FOR_CI
GATE_MIN_PER_CLASS = 10

#: what an unvalidated gate adds to its sentence
UNVALIDATED_SCORES = "TU, TA and TCR are the judge's unvalidated scores"


@dataclass(frozen=True)
class GateVerdict:
    """The judge gate for one experiment (or one stack's row of judge validity).

    ``validated``: True only for :data:`VALIDATED`; ``status``: :data:`VALIDATED`,
    :data:`NOT_VALIDATED` or :data:`NOT_ASSESSABLE`; ``reason``: a few words of why (the
    column of the tables); ``text``: the sentence the report, the figures and the viewer
    show."""

    validated: bool
    status: str
    reason: str
    text: str

    @property
    def label(self) -> str:
        """``"<status>: <reason>"``, the ``judge_gate`` column of every judge-based table."""
        return f"{self.status}: {self.reason}"


def _runs(n: int) -> str:
    return f"{n} run{'' if n == 1 else 's'}"


def _not_assessable(reasons: list[tuple[str, str]], evidence: str) -> GateVerdict:
    short, long = reasons[0][0], "; ".join(r[1] for r in reasons)
    return GateVerdict(
        False,
        NOT_ASSESSABLE,
        short,
        f"judge {NOT_ASSESSABLE}: {long}{evidence}; {UNVALIDATED_SCORES}",
    )


def assess_gate(row: Mapping[str, Any] | None) -> GateVerdict:
    """The gate's verdict on one row of ``results/stats/judge_validity.parquet``: the one
    definition of the judge gate (see the module docstring).

    Not assessable when no run has both a check and a judge verdict, when the checks or the
    judge's verdicts have one class (κ is then 0 or undefined by arithmetic), or below the
    floors the row records (``gate_min_tasks`` checked tasks, ``gate_min_per_class`` runs
    in each class of the check; :data:`GATE_MIN_TASKS` / :data:`GATE_MIN_PER_CLASS` when a
    table predates them). Otherwise validated when κ >= ``min_kappa``, else NOT validated.
    """
    if not row:
        return GateVerdict(
            False,
            NOT_ASSESSABLE,
            "no judge-validity result",
            f"judge {NOT_ASSESSABLE}: no judge-validity result; {UNVALIDATED_SCORES}",
        )
    n, n_tasks = row.get("n") or 0, row.get("n_tasks") or 0
    kappa, min_kappa = row.get("kappa"), row.get("min_kappa")
    min_kappa = 0.4 if min_kappa is None else min_kappa
    min_tasks = row.get("gate_min_tasks")
    min_tasks = GATE_MIN_TASKS if min_tasks is None else min_tasks
    per_class = row.get("gate_min_per_class")
    per_class = GATE_MIN_PER_CLASS if per_class is None else per_class
    if n == 0:
        return _not_assessable(
            [("no checked run", "no run has both a check and a judge verdict")], ""
        )
    counts = [row.get(k) for k in COUNT_COLUMNS]
    if any(c is None for c in counts):
        return _not_assessable(
            [(
                "no class counts",
                "the judge-validity table has no class counts (written before them: rerun "
                "bootstrap_effects)",
            )],
            "",
        )  # fmt: skip
    check_ok, check_failed, judge_ok, judge_failed = (int(c) for c in counts)
    reasons: list[tuple[str, str]] = []
    if not (check_ok and check_failed):
        outcome = "failed" if check_ok == 0 else "succeeded"
        reasons.append((
            "the checks have one class",
            f"the checks have one class (all {n} {outcome}), so κ is 0 or undefined by "
            "arithmetic",
        ))  # fmt: skip
    if not (judge_ok and judge_failed):
        mark = "<" if judge_ok == 0 else "≥"
        reasons.append((
            "the judge's verdicts have one class",
            f"the judge's verdicts have one class (all {n} with TCR {mark} 0.7), so κ is 0 or "
            "undefined by arithmetic",
        ))  # fmt: skip
    if n_tasks < min_tasks:
        reasons.append((
            f"{n_tasks} checked tasks < {min_tasks}",
            f"{n_tasks} checked task{'' if n_tasks == 1 else 's'} < judge.gate_min_tasks "
            f"{min_tasks}",
        ))  # fmt: skip
    if check_ok and check_failed:
        for count, outcome in ((check_ok, "succeeded"), (check_failed, "failed")):
            if count < per_class:
                reasons.append((
                    f"{_runs(count)} whose check {outcome} < {per_class}",
                    f"{_runs(count)} whose check {outcome} < judge.gate_min_per_class "
                    f"{per_class}",
                ))  # fmt: skip
    sample = (
        f"{_runs(n)} on {n_tasks} task{'' if n_tasks == 1 else 's'}; "
        f"checks: {check_ok} succeeded, {check_failed} failed"
    )
    if reasons or kappa is None:  # two classes on both sides define κ
        kappa_text = "κ undefined" if kappa is None else f"pooled κ {kappa:.2f}"
        return _not_assessable(reasons or [("κ undefined", "κ undefined")],
                               f" ({kappa_text} from {sample})")  # fmt: skip
    if kappa >= min_kappa:
        return GateVerdict(
            True,
            VALIDATED,
            f"κ {kappa:.2f} ≥ {min_kappa:g}",
            f"judge {VALIDATED}: pooled κ {kappa:.2f} ≥ judge.min_kappa {min_kappa:g} ({sample})",
        )
    return GateVerdict(
        False,
        NOT_VALIDATED,
        f"κ {kappa:.2f} < {min_kappa:g}",
        f"judge {NOT_VALIDATED}: pooled κ {kappa:.2f} < judge.min_kappa {min_kappa:g} "
        f"({sample}); {UNVALIDATED_SCORES}",
    )


def gate_verdict(judge_validity: pl.DataFrame | None) -> GateVerdict:
    """The gate's verdict for the experiment: :func:`assess_gate` of the pooled row of
    ``results/stats/judge_validity.parquet`` (not assessable without one)."""
    if judge_validity is None or judge_validity.height == 0:
        return assess_gate(None)
    if "scope" not in judge_validity.columns:
        return assess_gate(None)
    pooled = judge_validity.filter(pl.col("scope") == "pooled")
    return assess_gate(pooled.row(0, named=True) if pooled.height else None)

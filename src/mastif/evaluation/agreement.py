"""Ground truth beside the judge (mastif's, not in the seed paper): the judge's binary
verdict per run, and how far it agrees with the tasks' programmatic checks (accuracy and
Cohen's κ), per stack for ``results/metrics/stacks.parquet`` and, with task-bootstrap
intervals, in :mod:`mastif.analysis.judge_validity`.

One class only — check and judge gave the same label to every run (all checks failed and no
TCR reached 0.7, say) — is not assessable: κ is undefined and the accuracy, 1 by
construction, is null too, never a perfect score (:data:`ONE_CLASS_ONLY`). When the checks
alone, or the judge's verdicts alone, have one class, κ is 0 by arithmetic whatever the
other rater does (the agreement expected by chance equals the observed one), so it is null
too; the accuracy, the share of runs where they agree, stays.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from mastif.core.factors import STACK_KEYS

#: what every table, note and page says of a judge-vs-check agreement whose runs have one
#: class only (the same label from check and judge throughout: κ undefined, accuracy 1 by
#: construction); :func:`judge_agreement` gives null for both
ONE_CLASS_ONLY = "not assessable: one class only"

#: the judge counts a run as completed when its TCR mark is at least "mostly achieved"
#: (0.7 on the rubric's five-mark scale), the binary verdict compared with the task's check
JUDGE_SUCCESS_MIN_TCR = 0.7


def judge_success(col: str = "TCR") -> pl.Expr:
    """Per run: the judge's binary verdict, TCR >= :data:`JUDGE_SUCCESS_MIN_TCR`; null when
    the judge failed (no mark, no verdict)."""
    return pl.col(col) >= JUDGE_SUCCESS_MIN_TCR


def judge_agreement(
    check: Sequence[bool | None], judge: Sequence[bool | None]
) -> tuple[int, float | None, float | None]:
    """(n, accuracy, Cohen's κ) of the judge's verdicts against the checks, over the runs
    that have both.

    Accuracy is the share of runs where they agree. κ = (p_o - p_e) / (1 - p_e) corrects
    that for the agreement expected by chance (scikit-learn's ``cohen_kappa_score``). Both
    are None when no run has both, and both are None when only one class occurs — both
    raters gave one and the same label to every run (all checks failed and no TCR reached
    0.7, say): κ is undefined (chance agreement 1) and the accuracy, 1 by construction, is
    :data:`ONE_CLASS_ONLY`, not a perfect score. κ alone is None when one rater has one
    class and the other two: it is 0 by arithmetic then, not a measure of agreement.
    """
    pairs = [(c, j) for c, j in zip(check, judge, strict=True) if c is not None and j is not None]
    if not pairs:
        return 0, None, None
    truth = [bool(c) for c, _ in pairs]
    verdict = [bool(j) for _, j in pairs]
    if len(set(truth) | set(verdict)) < 2:
        return len(pairs), None, None  # one class only: p_e = 1, κ undefined
    accuracy = sum(t == v for t, v in zip(truth, verdict, strict=True)) / len(pairs)
    if len(set(truth)) < 2 or len(set(verdict)) < 2:
        return len(pairs), accuracy, None  # one rater one class: κ = 0 by arithmetic
    from sklearn.metrics import cohen_kappa_score

    return len(pairs), accuracy, float(cohen_kappa_score(truth, verdict))


def stack_agreement(run_table: pl.DataFrame) -> pl.DataFrame:
    """Per stack: runs with a check, their success rate, and the judge's agreement with it."""
    rows = []
    for keys, group in run_table.group_by(*STACK_KEYS, maintain_order=True):
        checks = group["success"].to_list()
        n, accuracy, kappa = judge_agreement(checks, group["judge_success"].to_list())
        known = [c for c in checks if c is not None]
        rows.append(
            {
                **dict(zip(STACK_KEYS, keys, strict=True)),
                "n_checked": len(known),
                "success_rate": sum(known) / len(known) if known else None,
                "judge_accuracy": accuracy,
                "judge_kappa": kappa,
            }
        )
    schema = {k: pl.String() for k in STACK_KEYS} | {
        "n_checked": pl.Int64(),
        "success_rate": pl.Float64(),
        "judge_accuracy": pl.Float64(),
        "judge_kappa": pl.Float64(),
    }
    return pl.DataFrame(rows, schema=schema)

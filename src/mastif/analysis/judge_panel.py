"""The judge panel: agreement across judges, with the checks, and across repeats (issue 17,
item 7, third bullet).

With ``judge.models`` every judge of the panel scores every run, ``judge.repeats`` times
(:func:`mastif.evaluation.judge.judge_panel_runs`; each judgement is in the judged table's
``judge_panel`` list). This module reads those judgements and writes
``results/stats/judge_panel.parquet`` (:data:`JUDGE_PANEL_SCHEMA`), rows of three kinds:

* ``inter_judge`` (per criterion TU, TA, TCR): Krippendorff's alpha across the panel's
  judges, ordinal level of measurement, over every run's repeat-0 scores (the scores the
  panel's median is taken of). Units are runs, coders the judges; a judge whose judgement of
  a run failed is a missing value, and ``n_runs`` counts the runs scored by two or more
  judges (the pairable units). Computed by the ``krippendorff`` package (``alpha`` with
  ``value_domain`` the five anchors).
* ``judge_vs_check`` (criterion TCR): each judge's accuracy and Cohen's kappa against the
  programmatic checks (``success``), its verdict being its repeat-0 TCR >= 0.7 as in
  ``judge_success``: the pooled row of :func:`mastif.analysis.judge_validity.judge_validity` (point
  estimates by :func:`mastif.evaluation.agreement.judge_agreement`, percentile intervals over task
  resamples from :data:`mastif.analysis.inference.MIN_TASKS_FOR_CI` checked tasks on: below it
  ``ci_low``/``ci_high`` are null and the note says why). The panel median's own agreement is
  ``judge_validity.parquet``'s.
* ``test_retest`` (per judge and criterion): Krippendorff's alpha (ordinal) across that
  judge's repeats of the same runs; coders are the repeats.

What cannot be computed says so in ``note`` with a null value: one judge ("needs 2+
judges"), one repeat ("needs judge.repeats >= 2"), no pairable run, or one score
throughout (alpha undefined: no disagreement is expected by chance). Alpha rows carry no
interval (``ci_low``/``ci_high`` null).
"""

from __future__ import annotations

from collections.abc import Sequence

import krippendorff
import numpy as np
import polars as pl

from mastif.analysis.judge_validity import judge_validity
from mastif.evaluation.agreement import judge_success
from mastif.evaluation.judge import CRITERIA, SCORE_ANCHORS

INTER_JUDGE, JUDGE_VS_CHECK, TEST_RETEST = "inter_judge", "judge_vs_check", "test_retest"
ALPHA = "krippendorff_alpha"
NEEDS_JUDGES = "needs 2+ judges (judge.models)"
NEEDS_REPEATS = "needs judge.repeats >= 2"

#: the anchors in ascending order: the ordinal scale alpha's distances are taken on
VALUE_DOMAIN: tuple[float, ...] = tuple(sorted(SCORE_ANCHORS))

JUDGE_PANEL_SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.String(),
    "criterion": pl.String(),
    "judge_model": pl.String(),
    "statistic": pl.String(),
    "n_judges": pl.Int64(),
    "n_repeats": pl.Int64(),
    "n_runs": pl.Int64(),
    "value": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "note": pl.String(),
}


def ordinal_alpha(matrix: np.ndarray) -> tuple[int, float | None, str | None]:
    """(pairable units, Krippendorff's alpha, note) of a coders x units matrix of anchor
    scores (NaN: missing), ordinal level over :data:`VALUE_DOMAIN`.

    A unit counts when two or more coders scored it. Alpha is None, with a note, when no
    unit is pairable or every pairable value is the same (expected disagreement 0).
    """
    matrix = np.asarray(matrix, dtype=float)
    pairable = (np.isfinite(matrix).sum(0) >= 2) if matrix.size else np.zeros(0, bool)
    n = int(pairable.sum())
    if n == 0:
        return 0, None, "insufficient: no run scored twice"
    values = matrix[:, pairable]
    if np.unique(values[np.isfinite(values)]).size < 2:
        return n, None, "undefined: one score throughout (no disagreement expected by chance)"
    alpha = krippendorff.alpha(
        reliability_data=matrix[:, pairable],
        value_domain=list(VALUE_DOMAIN),
        level_of_measurement="ordinal",
    )
    return n, float(alpha), None


def panel_judgements(judged: pl.DataFrame) -> pl.DataFrame:
    """Every judgement of the judged tables' ``judge_panel`` lists, one row each: run_id,
    judge_model, repeat, status, TU, TA, TCR (scores null where the judgement failed)."""
    cols = ["run_id", "judge_model", "repeat", "status", *CRITERIA]
    if judged.height == 0:
        return pl.DataFrame(schema={c: pl.Int64 if c == "repeat" else
                                    pl.String if c in cols[:4] else pl.Float64 for c in cols})  # fmt: skip
    panel = judged.select("run_id", pl.col("judge_panel")).explode("judge_panel")
    panel = panel.filter(pl.col("judge_panel").is_not_null()).unnest("judge_panel")
    failed = pl.col("status") != "ok"
    return panel.select(
        "run_id",
        "judge_model",
        "repeat",
        "status",
        *(pl.when(failed).then(None).otherwise(pl.col(c)).alias(c) for c in CRITERIA),
    )


def _matrix(
    data: pl.DataFrame, run_ids: list[str], coder: str, coders: Sequence[object], c: str
) -> np.ndarray:
    """coders x runs matrix of criterion ``c`` (NaN where missing)."""
    out = np.full((len(coders), len(run_ids)), np.nan)
    pos = {r: i for i, r in enumerate(run_ids)}
    row = {k: i for i, k in enumerate(coders)}
    for rec in data.filter(pl.col(c).is_not_null()).iter_rows(named=True):
        if rec[coder] in row and rec["run_id"] in pos:
            out[row[rec[coder]], pos[rec["run_id"]]] = rec[c]
    return out


def judge_panel_agreement(
    judged: pl.DataFrame,
    runs: pl.DataFrame,
    judges: Sequence[str] | None = None,
    repeats: int | None = None,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 20260504,
) -> pl.DataFrame:
    """``results/stats/judge_panel.parquet`` (:data:`JUDGE_PANEL_SCHEMA`; see the module
    docstring) over the runs of ``runs`` (``results/metrics/runs.parquet``).

    ``judges`` and ``repeats`` are the configured panel and repeats (``judge.models`` /
    ``judge.repeats``); by default those the judgements hold. ``resamples``, ``confidence``
    and ``seed`` are the task bootstrap's of the judge-vs-check intervals.
    """
    entries = panel_judgements(judged)
    run_ids = runs["run_id"].to_list()
    entries = entries.filter(pl.col("run_id").is_in(run_ids))
    if judges is None:
        judges = list(dict.fromkeys(entries["judge_model"].to_list()))
    if repeats is None:
        repeats = int(entries["repeat"].max()) + 1 if entries.height else 1
    judges = list(judges)
    size = {"n_judges": len(judges), "n_repeats": repeats}
    rows: list[dict[str, object]] = []

    def add(kind: str, c: str, judge: str | None, stat: str, **fields: object) -> None:
        rows.append({"kind": kind, "criterion": c, "judge_model": judge, "statistic": stat,
                     **size, **fields})  # fmt: skip

    first = entries.filter(pl.col("repeat") == 0)
    for c in CRITERIA:
        if len(judges) < 2:
            add(INTER_JUDGE, c, None, ALPHA, n_runs=None, value=None, note=NEEDS_JUDGES)
            continue
        n, alpha, note = ordinal_alpha(_matrix(first, run_ids, "judge_model", judges, c))
        add(INTER_JUDGE, c, None, ALPHA, n_runs=n, value=alpha, note=note)
    for judge in judges:
        verdicts = first.filter(pl.col("judge_model") == judge).select(
            "run_id", judge_success().alias("judge_success")
        )
        mine = runs.drop("judge_success", strict=False).join(verdicts, on="run_id", how="left")
        validity = judge_validity(mine, resamples=resamples, confidence=confidence, seed=seed)
        pooled = validity.row(0, named=True)
        # judge_validity's notes (its gate's verdict, in its own columns, is not the
        # panel's: judge.min_kappa and the floors are not read here); the accuracy row
        # without those about kappa alone
        parts = [p for p in (pooled["note"] or "").split("; ") if p]
        for stat in ("kappa", "accuracy"):
            mine_parts = parts if stat == "kappa" else [p for p in parts if "kappa" not in p]
            add(JUDGE_VS_CHECK, "TCR", judge, stat, n_runs=pooled["n"], value=pooled[stat],
                ci_low=pooled[f"{stat}_ci_low"], ci_high=pooled[f"{stat}_ci_high"],
                note="; ".join(mine_parts) or None)  # fmt: skip
    for judge in judges:
        own = entries.filter(pl.col("judge_model") == judge)
        for c in CRITERIA:
            if repeats < 2:
                add(TEST_RETEST, c, judge, ALPHA, n_runs=None, value=None, note=NEEDS_REPEATS)
                continue
            n, alpha, note = ordinal_alpha(_matrix(own, run_ids, "repeat", range(repeats), c))
            add(TEST_RETEST, c, judge, ALPHA, n_runs=n, value=alpha, note=note)
    return pl.DataFrame(rows, schema=JUDGE_PANEL_SCHEMA)

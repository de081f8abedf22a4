"""The statistics tables beyond the paper's (issue 17), formatted for ``results/tables/``.

From ``results/stats/{effects,repeats,judge_validity}.parquet``:

* ``effects``: per stack, each metric's mean with its confidence interval over tasks
  (:mod:`mastif.analysis.bootstrap`) where the metric has values in at least
  :data:`mastif.analysis.inference.MIN_TASKS_FOR_CI` tasks (the mean alone below: the interval is
  then not a confidence interval), and the share of resamples the stack is on the Pareto
  front;
* ``repeats``: pass@k, pass^k, flip rate and ICC per stack (:mod:`mastif.analysis.repeats`);
* ``judge_validity``: the judge against the tasks' checks, pooled and per stack, with CIs
  (:mod:`mastif.analysis.judge_validity`);

and the judge gate on every table built on judge scores (:data:`JUDGE_TABLES`): the verdict of
:func:`mastif.analysis.inference.gate_verdict` (the one definition) as a ``judge_gate``
column (its :attr:`~mastif.analysis.inference.GateVerdict.label`) on the rows of a judge score,
and its sentence in bold above the Markdown caption (:func:`with_judge_gates`).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from mastif.analysis.inference import JUDGE_SCORES, MIN_TASKS_FOR_CI, GateVerdict, gate_verdict
from mastif.core import metric_registry as registry
from mastif.core.factors import STACK_KEYS

#: metrics of the effects table, in the order of the paper's tables
EFFECT_METRICS = registry.EFFECT_METRICS


def _ci(mean: Any, lo: Any, hi: Any, decimals: int) -> str | None:
    if mean is None:
        return None
    text = f"{mean:.{decimals}f}"
    if lo is not None and hi is not None:
        text += f" [{lo:.{decimals}f}, {hi:.{decimals}f}]"
    return text


def effects_table(effects: pl.DataFrame) -> pl.DataFrame:
    """One row per stack: ``<metric>`` as "mean [low, high]" (the mean alone where the
    metric has values in fewer than :data:`MIN_TASKS_FOR_CI` tasks or no interval),
    n_tasks, and pareto_share."""
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for r in effects.iter_rows(named=True):
        key = tuple(r[k] for k in STACK_KEYS)
        row = rows.setdefault(key, dict(zip(STACK_KEYS, key, strict=True)))
        if r["metric"] == "pareto":
            row["pareto_share"] = r["mean"]
            continue
        decimals = 1 if registry.metric(r["metric"]).unit else 3
        is_ci = (r["n_tasks"] or 0) >= MIN_TASKS_FOR_CI
        low, high = (r["ci_low"], r["ci_high"]) if is_ci else (None, None)
        row[r["metric"]] = _ci(r["mean"], low, high, decimals)
        row["n_tasks"] = max(row.get("n_tasks") or 0, r["n_tasks"] or 0)
    schema: dict[str, Any] = {k: pl.String for k in STACK_KEYS}
    schema |= {m: pl.String for m in EFFECT_METRICS}
    schema |= {"n_tasks": pl.Int64, "pareto_share": pl.Float64}
    out = pl.DataFrame(list(rows.values()), schema=schema)
    return out.sort(["model", "framework", "protocol"])


def repeats_table(repeats: pl.DataFrame) -> pl.DataFrame:
    """The repeats table as written by :mod:`mastif.analysis.repeats`, in stack order."""
    return repeats.sort([*STACK_KEYS, "metric", "k"], nulls_last=True)


def judge_validity_table(validity: pl.DataFrame) -> pl.DataFrame:
    """Pooled row first, then the stacks."""
    return (
        validity.with_columns((pl.col("scope") != "pooled").alias("_order"))
        .sort("_order", *STACK_KEYS, nulls_last=True)
        .drop("_order")
    )


#: the column of the judge gate's verdict in every judge-based table
GATE_COLUMN = "judge_gate"

_JUDGE_SCORE = re.compile(r"\b(?:" + "|".join(JUDGE_SCORES) + r")\b")

#: the tables built on judge scores -> the column naming each row's metric (the gate on the
#: rows of a judge score only), or None (every row: the table rests on them throughout)
JUDGE_TABLES: dict[str, str | None] = {
    "table2_task_completion": None,  # TU, TA, TCR
    "table3_efficiency": None,  # Pareto-optimal: E = (TCR, CT, V)
    "table6_best_stacks": "Metric",  # its TCR row, "Task completion (TCR)"
    "table8_ground_truth": None,  # the judge's agreement with the checks
    "mixed_joint": "metric",
    "kruskal_summary": "metric",
    "effects": None,  # TCR and the Pareto share, which ranks by TCR
}


def with_gate(
    table: pl.DataFrame, verdict: GateVerdict, metric_column: str | None = None
) -> pl.DataFrame:
    """``table`` with a :data:`GATE_COLUMN` column: ``verdict.label`` on every row, or, with
    ``metric_column``, on the rows whose metric names a judge score (TCR, TU, TA; e.g.
    "TCR" or "Task completion (TCR)") and null on the others."""
    gate = pl.lit(verdict.label, dtype=pl.String)
    if metric_column is not None and metric_column in table.columns:
        judged = pl.col(metric_column).cast(pl.String).str.contains(_JUDGE_SCORE.pattern)
        gate = pl.when(judged.fill_null(False)).then(gate).otherwise(None)
    return table.with_columns(gate.alias(GATE_COLUMN))


def gate_line(verdict: GateVerdict) -> str:
    """The line in bold above a judge-based table's Markdown caption."""
    return f"Judge gate: {verdict.text}."


def with_judge_gates(
    tables: dict[str, pl.DataFrame], validity: pl.DataFrame | None
) -> tuple[dict[str, pl.DataFrame], dict[str, str]]:
    """Every table of :data:`JUDGE_TABLES` in ``tables`` with its :data:`GATE_COLUMN`
    (:func:`with_gate`), and the gate's line per such table (:func:`gate_line`), from the
    gate's verdict on ``validity`` (``results/stats/judge_validity.parquet``)."""
    verdict = gate_verdict(validity)
    out = dict(tables)
    lines = {}
    for name, metric_column in JUDGE_TABLES.items():
        if name in out:
            out[name] = with_gate(out[name], verdict, metric_column)
            lines[name] = gate_line(verdict)
    return out, lines

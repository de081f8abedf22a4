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

and the validity gate: when the pooled κ is below ``judge.min_kappa`` or unknown, Table 2
carries a column and a caption saying that the judge's scores are not validated.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from mastif.analysis.inference import MIN_TASKS_FOR_CI
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


def judge_gate(validity: pl.DataFrame) -> tuple[str, str | None]:
    """(short status, warning or None) of the pooled judge-vs-check agreement.

    Validated only when the pooled κ is known and at least ``min_kappa``; an unknown κ (no
    checked runs, one label throughout, too few tasks) is not validated.
    """
    pooled = validity.filter(pl.col("scope") == "pooled")
    if pooled.height == 0:
        return "unknown", "the judge's agreement with the tasks' checks was not computed"
    row = pooled.row(0, named=True)
    kappa, floor, n = row["kappa"], row["min_kappa"], row["n"]
    if row["validated"] is True:
        return f"yes: pooled κ {kappa:.2f} ≥ {floor:g} (n = {n})", None
    if kappa is None:
        status = f"no: pooled κ unknown (n = {n}{'; ' + row['note'] if row['note'] else ''})"
    else:
        status = f"no: pooled κ {kappa:.2f} < {floor:g} (n = {n})"
    warning = (
        "WARNING: the judge's scores (TU, TA, TCR) are not validated for this experiment — "
        f"{status.removeprefix('no: ')}: its agreement with the tasks' programmatic checks "
        f"is below judge.min_kappa or unknown (results/stats/judge_validity.parquet)."
    )
    return status, warning


def with_judge_gate(table2: pl.DataFrame, validity: pl.DataFrame) -> pl.DataFrame:
    """Table 2 with a ``judge_validated`` column (the pooled gate's status on every row)."""
    status, _ = judge_gate(validity)
    return table2.with_columns(pl.lit(status).alias("judge_validated"))

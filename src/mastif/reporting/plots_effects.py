"""Per-stack means with task-bootstrap confidence intervals (issue 17, item 9).

Draws ``results/stats/effects.parquet`` (:mod:`mastif.analysis.bootstrap`, ``docs/data.md``): one
panel per metric (TCR, success, CT, V, TUSR, SVS in a 2 x 3 grid), the stacks on the y axis
in the same order in every panel, a point at the stack's mean and a whisker for its interval.
A stack whose metric has values in fewer than :data:`mastif.analysis.inference.MIN_TASKS_FOR_CI`
tasks (a task bootstrap's interval is not a confidence interval there: its coverage is far
below nominal, bench/ci_coverage.py) has a null interval in the table; it, and any row whose
interval is null, gets a hollow marker and no whisker (the figure checks ``n_tasks`` too, so
an older table's intervals below the constant are not drawn either), and the title says "CI"
only when some whisker is drawn; a stack without a value for a metric gets a grey "no value"
in that row; a metric without any value gets a "no data" panel.

Like :mod:`mastif.reporting.plots`, figures are bare :class:`matplotlib.figure.Figure` objects (never
``pyplot``) and are written by :func:`mastif.reporting.plots.save_figure` (deterministic SVG).

Artists carry gids so tests (and SVG readers) can find them: ``ci_whiskers`` (the error
bars of one panel, one segment per stack with an interval), ``ci_means`` (their filled
markers) and ``no_ci`` (the hollow markers of the stacks without an interval).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from mastif.analysis.bootstrap import EFFECT_METRICS
from mastif.analysis.inference import MIN_TASKS_FOR_CI
from mastif.core import metric_registry as registry
from mastif.core.factors import STACK_KEYS as STACK_COLUMNS
from mastif.reporting.plots import (
    _marker_key,
    _no_data,
    judge_gate_note,
    save_figure,
    stack_label,
)

#: x-axis label (with unit) and whether the metric is a 0–1 score or rate, from the registry
AXES: dict[str, tuple[str, bool]] = {
    m: (registry.metric(m).axis, registry.metric(m).bounded) for m in EFFECT_METRICS
}

NO_INTERVAL = (
    f"no interval: values in fewer than {MIN_TASKS_FOR_CI} tasks, too few for a confidence interval"
)


def stack_order(effects: pl.DataFrame) -> list[tuple[str, str, str]]:
    """Every stack of the table (any metric), sorted by model, protocol, framework."""
    if effects.height == 0:
        return []
    keys = effects.select(pl.col(c).cast(pl.String) for c in STACK_COLUMNS).unique()
    return sorted(tuple(row) for row in keys.iter_rows())  # type: ignore[misc]


def _metric_rows(
    effects: pl.DataFrame, metric: str, stacks: list[tuple[str, str, str]]
) -> list[tuple[float | None, float | None, float | None]]:
    """(mean, ci_low, ci_high) per stack in ``stacks`` order; nulls where unknown, and no
    interval where the metric has values in fewer than :data:`MIN_TASKS_FOR_CI` tasks."""
    found: dict[tuple[str, str, str], tuple[float | None, float | None, float | None]] = {}
    if effects.height:
        part = effects.filter(pl.col("metric") == metric).select(
            *(pl.col(c).cast(pl.String) for c in STACK_COLUMNS),
            *(pl.col(c).cast(pl.Float64) for c in ("mean", "ci_low", "ci_high")),
            pl.col("n_tasks").fill_null(0) >= MIN_TASKS_FOR_CI,
        )
        for model, protocol, framework, mean, low, high, is_ci in part.iter_rows():
            found[(model, protocol, framework)] = (
                _finite(mean),
                _finite(low) if is_ci else None,
                _finite(high) if is_ci else None,
            )
    return [found.get(stack, (None, None, None)) for stack in stacks]


def _counts(rows: list[tuple[float | None, float | None, float | None]]) -> tuple[int, int]:
    """(stacks drawn with an interval, stacks drawn hollow) of one panel's rows."""
    with_ci = sum(m is not None and lo is not None and hi is not None for m, lo, hi in rows)
    return with_ci, sum(m is not None for m, _, _ in rows) - with_ci


def _finite(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _draw_panel(
    ax: Axes,
    metric: str,
    rows: list[tuple[float | None, float | None, float | None]],
    labels: list[str],
    show_labels: bool,
) -> None:
    """Points and whiskers of one metric; a "no data" panel when no stack has a value."""
    axis_label, bounded = AXES.get(metric, (metric, False))
    ax.set_title(metric)
    n = len(labels)
    if not any(mean is not None for mean, _, _ in rows):
        _no_data(ax)
        ax.set_xlabel(axis_label)
        if n:  # the rows of the other panels; the stack names on the left column
            ax.set_ylim(n - 0.5, -0.5)
            if show_labels:
                ax.set_yticks(range(n), labels=labels, fontsize=8)
        return
    with_ci = [
        (i, m, lo, hi)
        for i, (m, lo, hi) in enumerate(rows)
        if m is not None and lo is not None and hi is not None
    ]
    hollow = [
        (i, m) for i, (m, lo, hi) in enumerate(rows) if m is not None and (lo is None or hi is None)
    ]
    missing = [i for i, (m, _, _) in enumerate(rows) if m is None]
    if with_ci:
        y, m, lo, hi = (np.array(v, dtype=float) for v in zip(*with_ci, strict=True))
        # a percentile interval need not contain the full-data mean: clip the whisker arms at 0
        xerr = np.vstack([np.clip(m - lo, 0, None), np.clip(hi - m, 0, None)])
        bars = ax.errorbar(
            m, y, xerr=xerr, fmt="none", ecolor="C0", elinewidth=1.4, capsize=3, zorder=2
        )
        for collection in bars.lines[2]:
            collection.set_gid("ci_whiskers")
        ax.scatter(m, y, s=28, color="C0", edgecolors="C0", zorder=3, gid="ci_means")
    if hollow:
        y, m = (np.array(v, dtype=float) for v in zip(*hollow, strict=True))
        ax.scatter(
            m, y, s=34, facecolors="none", edgecolors="C0", linewidths=1.2, zorder=3, gid="no_ci"
        )
    trans = blended_transform_factory(ax.transAxes, ax.transData)
    for i in missing:
        ax.text(0.02, i, "no value", transform=trans, va="center", fontsize=7, color="0.5")
    ax.set_ylim(n - 0.5, -0.5)  # first stack on top
    ax.set_yticks(range(n), labels=labels if show_labels else [], fontsize=8)
    if bounded:
        ax.set_xlim(-0.05, 1.05)
    ax.set_xlabel(axis_label)
    ax.grid(axis="x", alpha=0.3)


def plot_effects(
    effects: pl.DataFrame,
    out_stem: Path,
    confidence: float = 0.95,
    judge_gate: str | None = None,
) -> list[Path]:
    """Per-stack means of TCR, success, CT, V, TUSR and SVS with their ``confidence`` task
    bootstrap intervals (one panel per metric), written as ``out_stem.{png,svg}``;
    ``judge_gate``: the gate's verdict, written inside the figure (its TCR panel is the
    judge's; :func:`mastif.reporting.plots.judge_gate_note`)."""
    stacks = stack_order(effects)
    labels = [stack_label(*stack) for stack in stacks]
    ncols = 3
    nrows = -(-len(EFFECT_METRICS) // ncols)
    row_height = max(3.0, 0.3 * len(stacks) + 1.4)
    fig = Figure(figsize=(13, row_height * nrows + 0.8), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    with_ci = hollow = 0
    for k, metric in enumerate(EFFECT_METRICS):
        ax = axes[k // ncols][k % ncols]
        rows = _metric_rows(effects, metric, stacks)
        _draw_panel(ax, metric, rows, labels, k % ncols == 0)
        n_ci, n_hollow = _counts(rows)
        with_ci, hollow = with_ci + n_ci, hollow + n_hollow
    for k in range(len(EFFECT_METRICS), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    if stacks:
        fig.supylabel("stack (model, protocol, framework)", fontsize=10)
    title = (
        f"Per-stack means, {confidence * 100:g}% CI over tasks (bootstrap)"
        if with_ci
        else "Per-stack means over tasks"
    )
    fig.suptitle(
        title + (f"\nhollow marker, {NO_INTERVAL}" if hollow else ""),
        fontsize=12,
    )
    keys = []
    if with_ci:
        keys.append(_marker_key("mean with confidence interval", marker="o", color="C0"))
    if hollow:
        keys.append(
            _marker_key(
                f"mean, {NO_INTERVAL}", marker="o", markerfacecolor="none", markeredgecolor="C0"
            )
        )
    if keys:
        fig.legend(handles=keys, loc="outside lower center", ncols=2, fontsize=9, frameon=False)
    judge_gate_note(fig, judge_gate)
    return save_figure(fig, out_stem)

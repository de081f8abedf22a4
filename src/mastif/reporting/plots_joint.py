"""The figure the report leads with: each factor's levels on every metric, with its joint test.

Draws ``results/stats/joint_levels.parquet`` and ``mixed_joint.parquet``
(:mod:`mastif.analysis.mixed_joint`): one row of panels per metric with level means, one
column per factor. A panel shows each level's mean over the tasks (the task's cell means
averaged over the other factors' levels: the contrast the joint test tests; CT and V as
geometric means), a whisker for its t interval over the tasks where the level has one (from
:data:`mastif.analysis.inference.MIN_TASKS_FOR_CI` tasks on, hollow marker otherwise), and
the factor's joint test in its title: F(df, n - df), the family-adjusted p marked (n.s.) when
not below ``alpha``, and the effect size D (the Mahalanobis length of the mean contrast;
Cohen's d_z for two levels), or why there is no test. The judge gate's verdict stands inside
the figure (:func:`mastif.reporting.plots.judge_gate_note`): its TCR, TU and TA rows are the
judge's scores.

Figures are bare :class:`matplotlib.figure.Figure` objects written by
:func:`mastif.reporting.plots.save_figure`. Artists carry gids for tests: ``level_means``
(filled markers of levels with an interval), ``level_whiskers``, ``no_interval`` (hollow
markers).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from mastif.analysis.mixed_joint import JOINT_KINDS
from mastif.core import metric_registry as registry
from mastif.core.factors import FACTORS
from mastif.reporting.plots import _no_data, judge_gate_note, save_figure

ALPHA = 0.05


def _fmt_p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def joint_title(test: dict | None, alpha: float = ALPHA) -> str:
    """'F(2, 18) = 13.28, adj. p 0.002, D 1.18' or why the factor has no test."""
    if test is None:
        return "no joint test"
    if test.get("p_value") is None:
        note = (test.get("note") or "no p-value").split(";")[0]
        return "no test: " + (note if len(note) <= 60 else note[:57] + "…")
    df, n = test["df"], test["n_tasks"]
    adjusted = test.get("p_adjusted")
    text = f"F({df}, {n - df}) = {test['statistic']:.2f}"
    if adjusted is not None:
        text += f", adj. p {_fmt_p(adjusted)}" + (" (n.s.)" if adjusted >= alpha else "")
    if test.get("effect") is not None:
        text += f", D {test['effect']:.2f}"
    return text


def _panel(ax: Axes, levels: pl.DataFrame, log: bool) -> None:
    rows = levels.sort("level").iter_rows(named=True)
    for x, row in enumerate(rows):
        if row["mean"] is None:
            continue
        if row["ci_low"] is not None and row["ci_high"] is not None:
            bars = ax.errorbar(
                [x],
                [row["mean"]],
                yerr=[[row["mean"] - row["ci_low"]], [row["ci_high"] - row["mean"]]],
                fmt="o",
                color="C0",
                capsize=3,
            )
            bars.lines[0].set_gid("level_means")
            for line in bars.lines[2]:
                line.set_gid("level_whiskers")
        else:
            (point,) = ax.plot([x], [row["mean"]], "o", mfc="none", color="C0")
            point.set_gid("no_interval")
    names = levels.sort("level")["level"].to_list()
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.5, len(names) - 0.5)
    known = [m for m in levels["mean"].to_list() if m is not None]
    if log and known and min(known) > 0 and max(known) > min(known):
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())


def plot_joint_effects(
    joint: pl.DataFrame,
    levels: pl.DataFrame,
    out_stem: Path,
    *,
    alpha: float = ALPHA,
    judge_gate: str | None = None,
) -> list[Path]:
    """``out_stem``.png/.svg: metrics (with level means) × factors (those with levels)."""
    # the joint tests' table order: the checks' success first, then the paper's metrics
    order = (*registry.CHECK_FIRST, *JOINT_KINDS)
    present = set(levels["metric"].to_list())
    metrics = [m for m in dict.fromkeys(order) if m in present]
    factors = [f for f in FACTORS if f in set(levels["factor"].to_list())]
    n_rows, n_cols = max(len(metrics), 1), max(len(factors), 1)
    fig = Figure(figsize=(3.6 * n_cols, 2.3 * n_rows + 0.9), layout="constrained")
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    if not metrics or not factors:
        _no_data(axes[0][0], "no factor with two levels, or no values: nothing to compare")
    for i, metric in enumerate(metrics):
        for j, factor in enumerate(factors):
            ax = axes[i][j]
            of = (pl.col("metric") == metric) & (pl.col("factor") == factor)
            panel = levels.filter(of)
            test = joint.filter((pl.col("metric") == metric) & (pl.col("term") == factor))
            title = joint_title(test.row(0, named=True) if test.height else None, alpha)
            ax.set_title(f"{factor}: {title}", fontsize=8)
            if panel.height == 0 or panel["mean"].is_null().all():
                _no_data(ax, "no values")
                continue
            _panel(ax, panel, log=JOINT_KINDS[metric] == "lmm")
            if j == 0:
                info = registry.metric(metric)
                geometric = ", geometric mean" if info.log_scale else ""
                ax.set_ylabel(info.axis.replace(")", f"{geometric})", 1), fontsize=8)
    n_tasks = levels["n_tasks"].max() if levels.height else 0
    fig.suptitle(
        "Each factor's levels, averaged over the tasks and the other factors "
        f"({n_tasks or 0} tasks); panel titles: the factor's joint test",
        fontsize=10,
    )
    judge_gate_note(fig, judge_gate)
    return save_figure(fig, out_stem)

"""Figures of the paper's Sections 5–6 (Figures 2–8) from the metrics/stats/values Parquet.

Every function takes the tables of ``docs/data.md`` and writes one figure as PNG (for reading)
and SVG (for the paper), returning the written paths. Figures are built as bare
:class:`matplotlib.figure.Figure` objects, never through ``pyplot``: nothing is registered in
pyplot's global figure manager, so no figure can leak even when plotting fails halfway, and
no display backend is touched (PNG is rendered by Agg, SVG by the SVG backend).

It reads the output tables of ``mastif.evaluation.metrics`` and ``mastif.analysis.stats``; the only thing it takes
from their code is ``significance_stars``, so a star means the same in every figure and table.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from mastif.analysis.inference import independent_tasks, small_sample_reason
from mastif.analysis.stats import metric_runs, significance_stars
from mastif.core import metric_registry as registry
from mastif.core.factors import FACTORS

#: the default significance level; the figures take the config's ``stats.alpha``
ALPHA = 0.05
#: fewest values a group needs for a violin: a kernel density of fewer points draws a shape
#: the data do not have, so smaller groups are shown as their points and median
MIN_VIOLIN_N = 10
FORMATS: tuple[str, ...] = ("png", "svg")


@dataclass(frozen=True)
class MetricInfo:
    """How a metric is named on axes and in titles (titles follow the paper's captions)."""

    title: str
    axis: str
    bounded: bool = False  # a 0–1 score: no axis ticks beyond [0, 1] (brackets sit above)


#: the per-run metrics' words, from the metric registry (mastif.core.metric_registry)
METRICS: dict[str, MetricInfo] = {
    m: MetricInfo(registry.metric(m).title, registry.metric(m).axis, registry.metric(m).bounded)
    for m in registry.PER_RUN
}


def save_figure(fig: Figure, out_stem: Path) -> list[Path]:
    """Write ``fig`` as ``out_stem.png`` and ``out_stem.svg`` and release its canvas.

    SVG metadata and element ids are made deterministic (no date, fixed hash salt) so a rerun
    on the same data writes byte-identical SVGs and Snakemake sees no spurious change.
    """
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    with mpl.rc_context({"svg.hashsalt": "mastif", "svg.fonttype": "path"}):
        for fmt in FORMATS:
            path = out_stem.with_name(f"{out_stem.name}.{fmt}")
            metadata = {"Date": None} if fmt == "svg" else None
            fig.savefig(path, format=fmt, dpi=150, bbox_inches="tight", metadata=metadata)
            paths.append(path)
    fig.clear()
    return paths


def judge_gate_note(fig: Figure, gate: str | None) -> None:
    """Write the judge gate's verdict ``gate`` (:func:`mastif.analysis.inference.gate_verdict`'s
    text) inside ``fig``, as a headline above everything else (gid ``judge_gate``), so a
    figure of judge scores never travels without it; nothing for None (a figure of no judge
    score). It sits above the figure's top edge, which the saved image's tight bounding box
    takes in: no layout of the figure changes."""
    if not gate:
        return
    width = max(60, int(fig.get_figwidth() * 15))
    fig.text(0.5, 1.0, textwrap.fill(f"Judge gate: {gate}", width), ha="center", va="bottom",
             fontsize=9, color="0.2" if gate.startswith("judge validated") else "darkred",
             gid="judge_gate")  # fmt: skip


def _no_data(ax: Axes, message: str = "no data") -> None:
    """Mark an empty panel instead of leaving a blank (or failing) axis."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _join_words(words: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b, and c' — the paper's caption style."""
    if len(words) <= 2:
        return " and ".join(words)
    return ", ".join(words[:-1]) + ", and " + words[-1]


# ---------------------------------------------------------------------------------------------
# Violins (Figures 2, 3, 4, 6, 7)


def significant_pairs(
    posthoc: pl.DataFrame,
    metric: str,
    factor: str,
    levels: Sequence[str],
    alpha: float = ALPHA,
) -> list[tuple[str, str, float]]:
    """Post-hoc pairs of ``levels`` with p_adj < ``alpha``, narrowest span first (for
    stacking)."""
    needed = {"metric", "factor", "level_a", "level_b", "p_adj"}
    if posthoc.height == 0 or not needed <= set(posthoc.columns):
        return []
    rows = posthoc.filter(
        (pl.col("metric") == metric)
        & (pl.col("factor") == factor)
        & pl.col("p_adj").is_not_null()
        & (pl.col("p_adj") < alpha)
    ).select("level_a", "level_b", "p_adj")
    pos = {str(level): i for i, level in enumerate(levels)}
    pairs = [
        (str(a), str(b), float(p))
        for a, b, p in rows.iter_rows()
        if str(a) in pos and str(b) in pos and str(a) != str(b)
    ]
    return sorted(pairs, key=lambda t: (abs(pos[t[0]] - pos[t[1]]), min(pos[t[0]], pos[t[1]])))


def _groups(run_metrics: pl.DataFrame, metric: str, factor: str) -> dict[str, np.ndarray]:
    """Non-null, finite per-run values of ``metric`` per level of ``factor`` (levels sorted),
    over the runs the tests use (:func:`mastif.analysis.stats.metric_runs`: CT, V of completed runs)."""
    if metric not in run_metrics.columns or factor not in run_metrics.columns:
        return {}
    df = metric_runs(run_metrics, metric).select(
        pl.col(factor).cast(pl.String), pl.col(metric).cast(pl.Float64)
    )
    df = df.drop_nulls().filter(pl.col(metric).is_finite())
    out: dict[str, np.ndarray] = {}
    for (level,), part in sorted(df.group_by(factor), key=lambda kv: str(kv[0][0])):
        out[str(level)] = part.get_column(metric).to_numpy()
    return out


def _draw_groups(ax: Axes, groups: dict[str, np.ndarray]) -> None:
    """Violins where a density means something; points and their median otherwise.

    matplotlib's violinplot runs a Gaussian KDE, which raises on zero variance and invents a
    shape for a handful of points, so a group with fewer than :data:`MIN_VIOLIN_N` values or
    a constant one is shown as its raw values (jittered) with a bar at the median.
    """
    rng = np.random.default_rng(0)  # fixed jitter: reruns draw identical figures
    violin_data, violin_pos = [], []
    for i, values in enumerate(groups.values()):
        if values.size >= MIN_VIOLIN_N and np.ptp(values) > 0:
            violin_data.append(values)
            violin_pos.append(i)
        else:
            jitter = rng.uniform(-0.08, 0.08, values.size) if values.size > 1 else np.zeros(1)
            ax.scatter(i + jitter, values, s=14, color="C0", alpha=0.8, zorder=3)
            ax.hlines(float(np.median(values)), i - 0.2, i + 0.2, color="C0", linewidth=1.5)
    if violin_data:
        parts = ax.violinplot(violin_data, positions=violin_pos, showmedians=True, widths=0.8)
        for body in parts["bodies"]:
            body.set_alpha(0.5)
    ax.set_xlim(-0.6, len(groups) - 0.4)  # same slot width whatever the number of levels
    ax.set_xticks(range(len(groups)))
    labels = [f"{level}\n(n={v.size})" for level, v in groups.items()]
    long = sum(len(str(level)) for level in groups) > 28  # would overlap when horizontal
    ax.set_xticklabels(
        labels, rotation=25 if long else 0, ha="right" if long else "center", rotation_mode="anchor"
    )


def _draw_brackets(
    ax: Axes, groups: dict[str, np.ndarray], pairs: list[tuple[str, str, float]]
) -> None:
    """Significance brackets with stars above the data, one height step per pair."""
    values = np.concatenate(list(groups.values()))
    lo, hi = float(values.min()), float(values.max())
    span = hi - lo or abs(hi) or 1.0
    pos = {level: i for i, level in enumerate(groups)}
    tick = 0.02 * span
    for k, (a, b, p) in enumerate(pairs):
        y = hi + span * (0.08 + 0.12 * k)
        xa, xb = sorted((pos[a], pos[b]))
        ax.plot([xa, xa, xb, xb], [y - tick, y, y, y - tick], color="black", linewidth=0.8)
        ax.text((xa + xb) / 2, y, significance_stars(p), ha="center", va="bottom", fontsize=10)
    if pairs:
        ax.set_ylim(top=hi + span * (0.08 + 0.12 * len(pairs) + 0.05))


def _clip_ticks(ax: Axes, lo: float, hi: float) -> None:
    """Drop y ticks outside a score's range (the space above 1 only holds brackets)."""
    ylim = ax.get_ylim()
    ax.set_yticks([t for t in ax.get_yticks() if lo - 1e-9 <= t <= hi + 1e-9])
    ax.set_ylim(ylim)


def plot_violins(
    run_metrics: pl.DataFrame,
    posthoc: pl.DataFrame,
    metric: str,
    out_stem: Path,
    factors: Sequence[str] = FACTORS,
    alpha: float = ALPHA,
    *,
    min_n: int,
    judge_gate: str | None = None,
) -> list[Path]:
    """One panel per factor: the per-run distribution of ``metric`` by level, with post-hoc
    significance brackets (p_adj < ``alpha``) — the layout of the paper's Figures 2–4, 6, 7.
    Groups of fewer than :data:`MIN_VIOLIN_N` values are drawn as points, not violins.

    Runs that repeat a task are not independent: with fewer than ``min_n`` independent
    tasks in ``run_metrics`` (:func:`mastif.analysis.inference.independent_tasks`) no bracket or
    star is drawn and the subtitle says why (:func:`mastif.analysis.inference.small_sample_reason`).
    ``judge_gate``: the gate's verdict, written inside a figure of a judge score
    (:func:`judge_gate_note`)."""
    info = METRICS.get(metric, MetricInfo(metric, metric))
    reason = small_sample_reason(independent_tasks(run_metrics), min_n)
    fig = Figure(figsize=(4.2 * len(factors), 4.6), layout="constrained")
    axes = fig.subplots(1, len(factors), squeeze=False)[0]
    for ax, factor in zip(axes, factors, strict=True):
        ax.set_title(factor)
        groups = _groups(run_metrics, metric, factor)
        if not groups:
            _no_data(ax)
            continue
        _draw_groups(ax, groups)
        if reason is None:
            _draw_brackets(
                ax, groups, significant_pairs(posthoc, metric, factor, list(groups), alpha)
            )
        ax.set_ylabel(info.axis)
        if info.bounded:
            _clip_ticks(ax, 0.0, 1.0)
        ax.grid(axis="y", alpha=0.3)
    marks = (
        f"post-hoc pairwise (adjusted p < {alpha:g} marked): *** < 0.001, ** < 0.01, * < 0.05; "
        if reason is None
        else f"{reason}\n"
    )
    fig.suptitle(
        f"{info.title} by {_join_words(list(factors))}\n"
        f"{marks}points where a level has < {MIN_VIOLIN_N} runs",
        fontsize=11,
    )
    judge_gate_note(fig, judge_gate)
    return save_figure(fig, out_stem)


# ---------------------------------------------------------------------------------------------
# Efficiency profile / Pareto frontier (Figure 5)


def stack_label(model: object, protocol: object, framework: object) -> str:
    """'model, protocol, framework' — the paper's TS_{model,protocol,framework} notation."""
    return f"{model}, {protocol}, {framework}"


def _marker_key(label: str, **style: object) -> Line2D:
    """A legend entry for a marker style (no line)."""
    return Line2D([], [], linestyle="", label=label, **style)  # type: ignore[arg-type]


def failed_share(stacks: pl.DataFrame) -> pl.Expr:
    """Per stack: the share of its runs that timed out or errored (timeout_share +
    error_share); null when the table does not say (older stacks tables)."""
    if {"timeout_share", "error_share"} <= set(stacks.columns):
        return (pl.col("timeout_share") + pl.col("error_share")).cast(pl.Float64)
    return pl.lit(None, dtype=pl.Float64)


def _pareto_points(stacks: pl.DataFrame, starred: bool = True) -> pl.DataFrame:
    """The stacks with a CT/V point: labels, (CT, V), TCR, Pareto-optimal (none unless
    ``starred``), failed share and answer group; the frontier last (drawn on top), numbered
    by CT."""
    optimal = (
        pl.col("pareto_optimal").fill_null(False)
        if "pareto_optimal" in stacks.columns and starred
        else pl.lit(False)
    )
    group = (
        pl.col("answer_group").cast(pl.Int64)
        if "answer_group" in stacks.columns
        else pl.lit(None, dtype=pl.Int64)
    )
    return (
        stacks.select(
            "model",
            "protocol",
            "framework",
            "CT_mean",
            "V_mean",
            "TCR_mean",
            optimal.alias("optimal"),
            failed_share(stacks).alias("failed"),
            group.alias("answer_group"),
        )
        .filter(pl.col("CT_mean").is_not_null() & pl.col("V_mean").is_not_null())
        .sort("optimal", "CT_mean", "V_mean")  # frontier drawn last (on top), numbered by CT
    )


#: colour of the identical-answers marks
IDENTICAL_COLOUR = "tab:purple"


def identical_answer_groups(stacks: pl.DataFrame) -> dict[int, list[str]]:
    """Per answer group (``answer_group`` of the stacks table: stacks whose final answers are
    byte-identical on every task and repeat, :mod:`mastif.evaluation.answers`), its stacks'
    labels in table order; empty when the table has no such column or group."""
    if "answer_group" not in stacks.columns:
        return {}
    groups: dict[int, list[str]] = {}
    rows = stacks.filter(pl.col("answer_group").is_not_null()).sort(
        "answer_group", "model", "protocol", "framework"
    )
    for model, protocol, framework, group in rows.select(
        "model", "protocol", "framework", "answer_group"
    ).iter_rows():
        groups.setdefault(int(group), []).append(stack_label(model, protocol, framework))
    return groups


def _pareto_point(
    ax: Axes,
    ct: float,
    v: float,
    tcr: float | None,
    is_optimal: bool,
    failed: float | None,
    colour_of: Callable[[float], object],
) -> None:
    """One stack's marker: a star on the front, a dot off it, a red-edged diamond labelled
    with its failure share when runs timed out or errored; hollow grey without a TCR."""
    style: dict[str, object] = (
        {"marker": "*", "s": 280, "linewidths": 0.9, "zorder": 3}
        if is_optimal
        else {"marker": "o", "s": 60, "linewidths": 0.3, "zorder": 2}
    )
    colour = (
        {"facecolors": "none", "edgecolors": "0.5"}
        if tcr is None
        else {"color": colour_of(tcr), "edgecolors": "black"}
    )
    if failed:  # timed-out or errored runs: not eligible for the front
        style = {"marker": "D", "s": 70, "linewidths": 1.6, "zorder": 2}
        colour = {**colour, "edgecolors": "tab:red"}
        ax.annotate(
            f"{failed:.0%} failed",
            (ct, v),
            fontsize=7,
            color="tab:red",
            xytext=(6, -10),
            textcoords="offset points",
        )
    ax.scatter(ct, v, **style, **colour)  # type: ignore[arg-type]


def _identical_mark(ax: Axes, ct: float, v: float, group: int) -> None:
    """ "≡k" beside a stack whose final answers equal those of the other stacks of group k."""
    ax.annotate(
        f"≡{group}",
        (ct, v),
        fontsize=8,
        fontweight="bold",
        color=IDENTICAL_COLOUR,
        xytext=(-7, 5),
        textcoords="offset points",
        ha="right",
        gid="identical_answers",
    )


#: the most stacks of an answer group the Pareto key names one by one; a larger group is
#: counted (its stacks are in results/metrics/identical_answers.csv)
MAX_NAMED_IDENTICAL = 4


def _identical_keys(groups: dict[int, list[str]], n_stacks: int) -> list[Line2D]:
    """One key entry per answer group of a table of ``n_stacks`` stacks: its "≡k" mark, then
    its stacks (named up to :data:`MAX_NAMED_IDENTICAL`, else counted)."""
    keys = []
    for group, labels in groups.items():
        if len(labels) == n_stacks:
            text = f"every stack ({n_stacks}): byte-identical final answers on every task"
        elif len(labels) <= MAX_NAMED_IDENTICAL:
            text = f"byte-identical final answers on every task: {' = '.join(labels)}"
        else:
            text = (
                f"{len(labels)} stacks with byte-identical final answers on every task "
                "(results/metrics/identical_answers.csv)"
            )
        keys.append(
            _marker_key(
                _wrap_reason(text, 110),
                marker=rf"$\equiv\!{group}$",
                markersize=7 * (1 + len(str(group))),
                markeredgewidth=0,
                color=IDENTICAL_COLOUR,
            )
        )
    return keys


def _pareto_legend(ax: Axes, starred: bool = True) -> None:
    """The key to the marker styles (no star below stats.min_n tasks: ``starred`` False)."""
    front = [
        _marker_key(
            "Pareto-optimal (max TCR, min CT, min V) among stacks whose runs all completed",
            marker="*",
            markersize=12,
            color="0.6",
            markeredgecolor="black",
        ),
        _marker_key("dominated", marker="o", color="0.6"),
    ]
    never = "never Pareto-optimal" if starred else "not eligible for the front"
    ax.legend(
        handles=[
            *(
                front
                if starred
                else [_marker_key("stack (no front drawn)", marker="o", color="0.6")]
            ),
            _marker_key(
                f"had timed-out/errored runs (share shown): {never}",
                marker="D",
                color="0.6",
                markeredgecolor="tab:red",
                markeredgewidth=1.6,
            ),
            _marker_key("TCR unknown", marker="o", markerfacecolor="none", markeredgecolor="0.5"),
        ],
        fontsize=8,
        loc="best",
    )


def _pareto_key(
    fig: Figure, key: list[Line2D], groups: dict[int, list[str]], n_stacks: int
) -> None:
    """The key below the plot: the numbered Pareto-optimal stacks, then the answer groups."""
    handles = key + _identical_keys(groups, n_stacks)
    if not handles:
        return
    if key and groups:
        title = (
            "Pareto-optimal stacks, and stacks with identical answers (model, protocol, framework)"
        )
    elif key:
        title = "Pareto-optimal stacks (model, protocol, framework)"
    else:
        title = "Stacks with identical answers (model, protocol, framework)"
    fig.legend(
        handles=handles,
        loc="outside lower center",
        fontsize=8,
        frameon=False,
        title=title,
        title_fontsize=9,
    )


def plot_pareto(
    stacks: pl.DataFrame,
    out_stem: Path,
    *,
    n_tasks: int,
    min_n: int,
    judge_gate: str | None = None,
) -> list[Path]:
    """Efficiency profile E = (TCR, CT, V) of Eq. 4: each stack at (CT_mean, V_mean) of its
    completed runs, coloured by TCR_mean; Pareto-optimal stacks are starred, numbered, and
    named in a key below.

    One scatter with colour keeps all three dimensions in a single view (a 2-panel layout
    would hide the CT–V trade-off). Frontier stacks often sit close together, so the plot
    carries short numbers and the key the full "model, protocol, framework" labels. A stack
    with unknown TCR (all judgements failed) is drawn hollow grey rather than dropped. A
    stack with timed-out or errored runs is drawn as a red-edged diamond labelled with its
    failure share: it is never on the front (``metrics.stack_metrics``), since its
    completed-run means leave out what went wrong. A stack without a completed run has no
    CT/V point and is counted in the title.

    With fewer than ``min_n`` (``stats.min_n``) independent tasks (``n_tasks``,
    :func:`mastif.analysis.inference.independent_tasks` of the runs) no stack is starred or
    called Pareto-optimal, and the title says why
    (:func:`mastif.analysis.inference.small_sample_reason`). Stacks whose final answers are
    byte-identical on every task and repeat (``answer_group``,
    :mod:`mastif.evaluation.answers`) are marked "≡k" and the key names each group (up to
    :data:`MAX_NAMED_IDENTICAL` stacks, else counts them; no marks when every stack is in
    one group, which the key says): their differences in TCR come from the judge, not from
    their answers. ``judge_gate``: the gate's verdict, written inside the figure
    (:func:`judge_gate_note`): TCR colours it and ranks the front.
    """
    reason = small_sample_reason(n_tasks, min_n)
    starred = reason is None
    cmap = mpl.colormaps["viridis"]
    norm = Normalize(vmin=0.0, vmax=1.0)
    fig = Figure(figsize=(8, 6.5), layout="constrained")
    ax = fig.subplots()
    df = _pareto_points(stacks, starred=starred)
    if df.height == 0:
        _no_data(ax)
    groups = identical_answer_groups(stacks)
    # one group of every stack: the key says so, a mark on every point would add nothing
    marked = not any(len(labels) == stacks.height for labels in groups.values())
    key: list[Line2D] = []
    for model, protocol, framework, ct, v, tcr, is_optimal, failed, group in df.iter_rows():
        _pareto_point(ax, ct, v, tcr, is_optimal, failed, lambda x: cmap(norm(x)))
        if group is not None and marked:
            _identical_mark(ax, ct, v, group)
        if is_optimal:
            number = str(len(key) + 1)
            ax.annotate(
                number,
                (ct, v),
                fontsize=9,
                fontweight="bold",
                xytext=(7, 5),
                textcoords="offset points",
            )
            key.append(
                _marker_key(
                    f"{number}. {stack_label(model, protocol, framework)} "
                    f"(TCR {'—' if tcr is None else f'{tcr:.3f}'}, CT {ct:.1f} s, V {v:.1f})",
                    marker="*",
                    markersize=12,
                    markeredgecolor="black",
                    color="0.6" if tcr is None else cmap(norm(tcr)),
                )
            )
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="TCR (mean)")
    ax.set_xlabel("CT, mean convergence time of completed runs (seconds)")
    ax.set_ylabel("V, mean verbosity of completed runs (tokens)")
    ax.grid(alpha=0.3)
    _pareto_legend(ax, starred=starred)
    _pareto_key(fig, key, groups, stacks.height)
    skipped = stacks.height - df.height
    note = f"\n({skipped} stack(s) without a completed run or known V not shown)" if skipped else ""
    if reason is not None:
        note += "\n" + _wrap_reason(_no_front_reason(n_tasks, min_n))
    ax.set_title(f"Efficiency profile E = (TCR, CT, V) of technology stacks{note}", fontsize=11)
    judge_gate_note(fig, judge_gate)
    return save_figure(fig, out_stem)


def _no_front_reason(n_tasks: int, min_n: int) -> str:
    """Why no stack is starred: the small-sample rule of
    :func:`mastif.analysis.inference.small_sample_reason`, said of the Pareto front."""
    return (
        f"no stack starred Pareto-optimal: {n_tasks} independent task"
        f"{'' if n_tasks == 1 else 's'} < stats.min_n = {min_n} (repeats of a task and the "
        "stacks' runs of it are not independent)"
    )


def _wrap_reason(reason: str, width: int = 80) -> str:
    """A sentence broken into lines of about ``width`` characters."""
    return "\n".join(textwrap.wrap(reason, width))


# ---------------------------------------------------------------------------------------------
# Top social values (Figure 8)


def _value_counts(lists: pl.Series, top_n: int) -> list[tuple[str, int]]:
    """How many items (runs or steps) each value appears in, most frequent first."""
    if lists.len() == 0:
        return []
    values = lists.drop_nulls().list.unique().explode().drop_nulls()
    if values.len() == 0:
        return []
    counts = values.value_counts(name="n").sort(["n", values.name], descending=[True, False])
    return [(str(v), int(n)) for v, n in counts.head(top_n).iter_rows()]


def _bar_panel(ax: Axes, counts: list[tuple[str, int]], title: str, unit: str) -> None:
    """Horizontal bars, most frequent on top."""
    ax.set_title(title)
    if not counts:
        _no_data(ax, "no values tagged")
        return
    names, n = zip(*counts, strict=True)
    ax.barh(range(len(names)), n, color="C0")
    ax.set_yticks(range(len(names)), labels=names)
    ax.invert_yaxis()
    ax.set_xlabel(f"{unit} containing the value")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="x", alpha=0.3)


def _safe_name(text: str) -> str:
    """A file-name-safe form of a model id (ids may contain '/' or ':')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def plot_top_values(values: pl.DataFrame, out_dir: Path, top_n: int = 10) -> list[Path]:
    """Per model, the top-``top_n`` social values in inputs, reasoning steps and outputs
    (the paper's Figure 8 a–f, one figure per model with three panels)."""
    paths: list[Path] = []
    if values.height == 0:
        return paths
    for model in sorted(values.get_column("model").drop_nulls().unique().to_list()):
        part = values.filter(pl.col("model") == model)
        panels = [
            (_value_counts(part.get_column("prompt_values"), top_n), "Input tasks", "runs"),
            (
                _value_counts(part.get_column("step_values").explode(), top_n),
                "Reasoning steps",
                "steps",
            ),
            (_value_counts(part.get_column("output_values"), top_n), "Outputs", "runs"),
        ]
        fig = Figure(figsize=(15, 4.8), layout="constrained")
        for ax, (counts, title, unit) in zip(fig.subplots(1, 3), panels, strict=True):
            _bar_panel(ax, counts, title, unit)
        fig.suptitle(f"Top {top_n} social values for {model} ({part.height} runs)", fontsize=12)
        paths += save_figure(fig, Path(out_dir) / f"top_values_{_safe_name(str(model))}")
    return paths

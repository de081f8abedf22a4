"""Tests for mastif.reporting.plots_effects on small effects tables in the shape of docs/data.md."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import polars as pl
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure

from mastif.analysis.bootstrap import EFFECT_METRICS, EFFECTS_SCHEMA
from mastif.reporting import plots_effects

STACKS = [("m1", "mcp", "crewai"), ("m1", "standard", "langgraph"), ("m2", "a2a", "crewai")]


@pytest.fixture
def effects() -> pl.DataFrame:
    """3 stacks; TCR: two with an interval, one without; CT: one interval, one without, one
    without any value; V: no value at all (a "no data" panel); pareto rows ignored."""
    rows = []

    def add(stack, metric, mean, low=None, high=None, n_tasks=30):
        note = None if low is not None else "insufficient: n_tasks = 1 < 15 (MIN_TASKS_FOR_CI)"
        rows.append(
            dict(zip(("model", "protocol", "framework"), stack, strict=True))
            | {
                "metric": metric,
                "n_tasks": n_tasks,
                "n_values": n_tasks,
                "mean": mean,
                "ci_low": low,
                "ci_high": high,
                "note": note,
            }
        )

    add(STACKS[0], "TCR", 0.5, 0.3, 0.7)
    add(STACKS[1], "TCR", 0.8, 0.6, 0.9)
    add(STACKS[2], "TCR", 0.2, n_tasks=1)
    add(STACKS[0], "CT", 12.0, 10.0, 15.0)
    add(STACKS[1], "CT", 30.0, n_tasks=1)
    add(STACKS[2], "CT", None, n_tasks=0)
    for stack in STACKS:
        add(stack, "V", None, n_tasks=0)
        add(stack, "success", 0.4, 0.1, 0.7)
        add(stack, "pareto", 0.5)
    return pl.DataFrame(rows, schema=EFFECTS_SCHEMA)


def _drawn(effects: pl.DataFrame, monkeypatch: pytest.MonkeyPatch, **kw) -> Figure:
    figures: list[Figure] = []
    monkeypatch.setattr(plots_effects, "save_figure", lambda fig, stem: figures.append(fig) or [])
    plots_effects.plot_effects(effects, Path("unused"), **kw)
    assert len(figures) == 1
    return figures[0]


def _panel(fig: Figure, title: str) -> Axes:
    (ax,) = [ax for ax in fig.axes if ax.get_title() == title]
    return ax


def _whiskers(ax: Axes) -> int:
    return sum(
        len(c.get_segments())
        for c in ax.collections
        if isinstance(c, LineCollection) and c.get_gid() == "ci_whiskers"
    )


def _hollow(ax: Axes) -> int:
    return sum(
        len(c.get_offsets())
        for c in ax.collections
        if isinstance(c, PathCollection) and c.get_gid() == "no_ci"
    )


def _texts(fig: Figure) -> list[str]:
    texts = [t.get_text() for t in fig.texts]
    for legend in fig.legends:
        texts += [t.get_text() for t in legend.get_texts()]
    for ax in fig.axes:
        texts += [t.get_text() for t in ax.texts]
    return texts


def test_figure_written(effects: pl.DataFrame, tmp_path: Path) -> None:
    paths = plots_effects.plot_effects(effects, tmp_path / "effects", confidence=0.95)
    assert [p.name for p in paths] == ["effects.png", "effects.svg"]
    assert all(p.stat().st_size > 0 for p in paths)
    assert mpimg.imread(paths[0]).shape[0] > 100


def test_whiskers_only_for_stacks_with_an_interval(
    effects: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = _drawn(effects, monkeypatch)
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == list(EFFECT_METRICS)
    tcr, ct, success = _panel(fig, "TCR"), _panel(fig, "CT"), _panel(fig, "success")
    assert (_whiskers(tcr), _hollow(tcr)) == (2, 1)
    assert (_whiskers(ct), _hollow(ct)) == (1, 1)
    assert (_whiskers(success), _hollow(success)) == (3, 0)
    assert [t.get_text() for t in ct.texts] == ["no value"]  # m2's CT: no completed run
    # the whisker spans the interval, at the stack's row
    (whiskers,) = [c for c in tcr.collections if c.get_gid() == "ci_whiskers"]
    spans = sorted((tuple(seg[:, 0]), seg[0, 1]) for seg in whiskers.get_segments())
    assert spans == [((0.3, 0.7), 0.0), ((0.6, 0.9), 1.0)]
    # the hollow marker sits at the mean of the stack without an interval (third row)
    (hollow,) = [c for c in tcr.collections if c.get_gid() == "no_ci"]
    assert hollow.get_offsets().tolist() == [[0.2, 2.0]]
    assert len(hollow.get_facecolors()) == 0 or hollow.get_facecolors()[0][3] == 0
    assert any(plots_effects.NO_INTERVAL in t for t in _texts(fig))
    assert plots_effects.NO_INTERVAL in fig.get_suptitle()


def test_no_interval_note_only_when_a_stack_lacks_one(
    effects: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = effects.filter(pl.col("ci_low").is_not_null() | pl.col("mean").is_null())
    fig = _drawn(full, monkeypatch)
    assert "no interval" not in fig.get_suptitle()
    assert all(_hollow(ax) == 0 for ax in fig.axes)


def test_same_stack_order_and_labels(
    effects: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = _drawn(effects, monkeypatch)
    labels = [t.get_text() for t in _panel(fig, "TCR").get_yticklabels()]
    assert labels == ["m1, mcp, crewai", "m1, standard, langgraph", "m2, a2a, crewai"]
    for metric in ("TCR", "success", "CT", "TUSR"):
        assert _panel(fig, metric).get_ylim() == (2.5, -0.5)


def test_units_and_confidence_in_title(
    effects: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = _drawn(effects, monkeypatch, confidence=0.9)
    assert "90% CI over tasks (bootstrap)" in fig.get_suptitle()
    assert "seconds" in _panel(fig, "CT").get_xlabel()
    assert "tokens" in _panel(fig, "V").get_xlabel()
    assert "0–1" in _panel(fig, "TCR").get_xlabel()
    assert _panel(fig, "TCR").get_xlim() == (-0.05, 1.05)


def test_metric_without_values_is_a_no_data_panel(
    effects: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = _drawn(effects, monkeypatch)
    v = _panel(fig, "V")
    assert [t.get_text() for t in v.texts] == ["no data"]
    assert _whiskers(v) == 0 and _hollow(v) == 0
    # TUSR has no rows at all: also "no data", and its left-column neighbour keeps labels
    assert [t.get_text() for t in _panel(fig, "TUSR").texts] == ["no data"]
    assert len(_panel(fig, "V").get_yticklabels()) == 3


def test_empty_table_gives_no_data_panels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = pl.DataFrame(schema=EFFECTS_SCHEMA)
    fig = _drawn(empty, monkeypatch)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == len(EFFECT_METRICS)
    assert all([t.get_text() for t in ax.texts] == ["no data"] for ax in visible)
    monkeypatch.undo()
    paths = plots_effects.plot_effects(empty, tmp_path / "empty")
    assert all(p.exists() for p in paths)


def test_rerun_writes_identical_svg(effects: pl.DataFrame, tmp_path: Path) -> None:
    first = plots_effects.plot_effects(effects, tmp_path / "a" / "effects")[1].read_bytes()
    second = plots_effects.plot_effects(effects, tmp_path / "b" / "effects")[1].read_bytes()
    assert first == second


def test_a_small_experiment_draws_no_whisker(monkeypatch: pytest.MonkeyPatch) -> None:
    """From the bootstrap's own table: with 2 tasks (the default run) effects.parquet holds
    no interval, so the figure draws hollow means only and claims no confidence level."""
    from mastif.analysis.bootstrap import bootstrap_effects

    runs = pl.DataFrame(
        [
            {"model": m, "protocol": p, "framework": f, "task_id": f"t{t}", "status": "ok",
             "judge_status": "ok", "TCR": 0.5 + t / 4, "success": bool(t), "CT": 10.0 + t,
             "V": 100 + t, "n_tool_calls": 2, "n_tool_ok": 1, "IVS": 0.5,
             "has_final_answer": True}
            for m, p, f in STACKS
            for t in range(2)
        ]
    )  # fmt: skip
    effects = bootstrap_effects(runs, resamples=100)
    assert effects["ci_low"].is_null().all() and effects["ci_high"].is_null().all()
    fig = _drawn(effects, monkeypatch, confidence=0.95)
    assert all(_whiskers(ax) == 0 for ax in fig.axes)
    assert _hollow(_panel(fig, "TCR")) == len(STACKS)
    assert "CI" not in fig.get_suptitle() and "95" not in fig.get_suptitle()


def test_the_judge_gate_is_written_inside_the_figure(
    effects: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = "judge NOT validated: pooled κ 0.12 < judge.min_kappa 0.4 (40 runs on 20 tasks)"
    fig = _drawn(effects, monkeypatch, judge_gate=gate)
    assert f"Judge gate: {gate}" in [t.replace("\n", " ") for t in _texts(fig)]
    assert not any("Judge gate" in t for t in _texts(_drawn(effects, monkeypatch)))

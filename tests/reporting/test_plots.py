"""Tests for mastif.reporting.plots on small hand-built tables in the shapes of docs/data.md."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import polars as pl
import pytest
from matplotlib.figure import Figure

from mastif.reporting import plots

MODELS = ("m1", "m2")
FRAMEWORKS = ("crewai", "langgraph")
#: an experiment large enough for a Pareto star (stats.min_n independent tasks)
ENOUGH = {"n_tasks": 10, "min_n": 5}


@pytest.fixture
def run_metrics() -> pl.DataFrame:
    """2 models x 1 protocol x 2 frameworks x 3 runs; m2's TUSR is constant, m1 has no tools."""
    rows = []
    for mi, model in enumerate(MODELS):
        for fi, framework in enumerate(FRAMEWORKS):
            for r in range(3):
                rows.append(
                    {
                        "run_id": f"{model}-{framework}-{r}",
                        "model": model,
                        "protocol": "standard",
                        "framework": framework,
                        "task_id": f"t{r}",
                        "TCR": [0.3, 0.5, 0.7][r] + 0.3 * mi if r else None,
                        "CT": 10.0 + 5 * mi + 2 * fi + r,
                        "V": 500 + 100 * mi + 10 * r,
                        "TUSR": 1.0 if model == "m2" else None,
                        "IVS": 0.2 + 0.05 * r,
                    }
                )
    return pl.DataFrame(rows)


@pytest.fixture
def posthoc() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "metric": ["TCR", "TCR", "CT"],
            "factor": ["model", "framework", "model"],
            "level_a": ["m1", "crewai", "m1"],
            "level_b": ["m2", "langgraph", "m2"],
            "p_adj": [0.0004, 0.30, 0.02],
            "p_adjust": ["bonferroni"] * 3,
        }
    )


@pytest.fixture
def stacks() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "model": ["m1", "m1", "m2", "m2"],
            "protocol": ["standard"] * 4,
            "framework": list(FRAMEWORKS) * 2,
            "TCR_mean": [0.5, 0.6, 0.8, None],
            "CT_mean": [11.0, 13.0, 16.0, 9.0],
            "V_mean": [510.0, 520.0, 610.0, 700.0],
            "pareto_optimal": [True, False, True, True],
        }
    )


@pytest.fixture
def values() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "model": ["m1", "m1", "m2"],
            "protocol": ["standard"] * 3,
            "framework": ["crewai"] * 3,
            "task_id": ["t0", "t1", "t0"],
            "prompt_values": [["trust", "privacy", "trust"], ["privacy"], []],
            "step_values": [[["safety"], ["safety", "trust"]], [[]], []],
            "output_values": [["transparency"], [], []],
        },
        schema_overrides={
            "prompt_values": pl.List(pl.String),
            "step_values": pl.List(pl.List(pl.String)),
            "output_values": pl.List(pl.String),
        },
    )


def check_written(paths: list[Path], stem: Path) -> None:
    """Both formats exist, are non-empty, the PNG decodes, the SVG is an SVG."""
    assert sorted(p.name for p in paths) == [f"{stem.name}.png", f"{stem.name}.svg"]
    for path in paths:
        assert path.exists() and path.stat().st_size > 0
    png = mpimg.imread(stem.with_name(f"{stem.name}.png"))
    assert png.ndim == 3 and png.shape[0] > 100 and png.shape[1] > 100
    assert "<svg" in stem.with_name(f"{stem.name}.svg").read_text()
    assert plt.get_fignums() == []


def test_significant_pairs_only_below_alpha(posthoc: pl.DataFrame) -> None:
    assert plots.significant_pairs(posthoc, "TCR", "model", ["m1", "m2"]) == [("m1", "m2", 0.0004)]
    assert plots.significant_pairs(posthoc, "TCR", "framework", list(FRAMEWORKS)) == []
    assert plots.significant_pairs(posthoc, "TCR", "model", ["m1"]) == []  # level not drawn
    assert plots.significant_pairs(posthoc.clear(), "TCR", "model", ["m1", "m2"]) == []


@pytest.mark.parametrize("metric", ["TCR", "CT", "V", "TUSR", "IVS"])
def test_violins_written(
    run_metrics: pl.DataFrame, posthoc: pl.DataFrame, metric: str, tmp_path: Path
) -> None:
    # TUSR: m1 has no values, m2 is a constant group; protocol has a single level throughout
    stem = tmp_path / f"violin_{metric}"
    check_written(plots.plot_violins(run_metrics, posthoc, metric, stem, min_n=2), stem)


def test_significant_pairs_follow_the_configured_alpha(posthoc: pl.DataFrame) -> None:
    # the m1/m2 pair's adjusted p is 0.0004: significant at 0.001, not at 0.0001
    assert plots.significant_pairs(posthoc, "TCR", "model", ["m1", "m2"], alpha=0.001)
    assert plots.significant_pairs(posthoc, "TCR", "model", ["m1", "m2"], alpha=0.0001) == []


def test_a_group_below_ten_values_is_points_not_a_violin() -> None:
    from matplotlib.collections import PathCollection, PolyCollection

    rng = np.random.default_rng(1)
    groups = {"few": rng.normal(size=9), "many": rng.normal(size=10)}
    ax = Figure().subplots()
    plots._draw_groups(ax, groups)
    bodies = [c for c in ax.collections if isinstance(c, PolyCollection)]
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(bodies) == 1  # only "many" gets a density
    assert len(points) == 1 and len(points[0].get_offsets()) == 9


def test_violins_single_value_and_empty_panel(posthoc: pl.DataFrame, tmp_path: Path) -> None:
    one = pl.DataFrame(
        {"model": ["m1"], "protocol": ["standard"], "framework": [None], "TCR": [0.5]},
        schema_overrides={"framework": pl.String},
    )
    stem = tmp_path / "one"
    check_written(plots.plot_violins(one, posthoc, "TCR", stem, min_n=2), stem)
    none = one.with_columns(pl.lit(None, pl.Float64).alias("TCR"))
    stem = tmp_path / "none"
    check_written(plots.plot_violins(none, posthoc.clear(), "TCR", stem, min_n=2), stem)


def test_pareto(stacks: pl.DataFrame, tmp_path: Path) -> None:
    stem = tmp_path / "pareto"
    check_written(plots.plot_pareto(stacks, stem, **ENOUGH), stem)
    stem = tmp_path / "pareto_one"
    check_written(plots.plot_pareto(stacks.head(1), stem, **ENOUGH), stem)
    stem = tmp_path / "pareto_null_tcr"
    check_written(plots.plot_pareto(stacks.tail(1), stem, **ENOUGH), stem)


def test_value_counts_counts_items_not_mentions(values: pl.DataFrame) -> None:
    m1 = values.filter(pl.col("model") == "m1")
    assert plots._value_counts(m1.get_column("prompt_values"), 10) == [("privacy", 2), ("trust", 1)]
    steps = m1.get_column("step_values").explode()
    assert plots._value_counts(steps, 10) == [("safety", 2), ("trust", 1)]
    assert plots._value_counts(steps, 1) == [("safety", 2)]


def test_top_values(values: pl.DataFrame, tmp_path: Path) -> None:
    paths = plots.plot_top_values(values, tmp_path)
    assert sorted(p.name for p in paths) == [
        "top_values_m1.png",
        "top_values_m1.svg",
        "top_values_m2.png",
        "top_values_m2.svg",
    ]
    check_written([p for p in paths if "m1" in p.name], tmp_path / "top_values_m1")
    # m2 has no values at all: three "no values tagged" panels
    check_written([p for p in paths if "m2" in p.name], tmp_path / "top_values_m2")
    assert plots.plot_top_values(values.clear(), tmp_path / "empty") == []


def test_reruns_are_byte_identical(
    run_metrics: pl.DataFrame, posthoc: pl.DataFrame, tmp_path: Path
) -> None:
    """Fixed jitter seed, no SVG date, fixed SVG id salt: Snakemake sees no spurious change."""
    first = plots.plot_violins(run_metrics, posthoc, "TCR", tmp_path / "a", min_n=2)
    second = plots.plot_violins(run_metrics, posthoc, "TCR", tmp_path / "b", min_n=2)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_pareto_marks_stacks_with_failed_runs(
    stacks: pl.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_failures = stacks.with_columns(
        timeout_share=pl.Series([0.0, 0.5, 0.0, None]),
        error_share=pl.Series([0.0, 0.25, 0.0, 0.0]),
        pareto_optimal=pl.Series([True, False, True, False]),
    )
    shares = with_failures.select(plots.failed_share(with_failures)).to_series().to_list()
    assert shares == [0.0, 0.75, 0.0, None]  # 0.5 timed out + 0.25 errored; unknown stays so
    older = stacks.with_columns(plots.failed_share(stacks).alias("f"))["f"].to_list()
    assert older == [None] * 4  # a table without the shares: unknown, not 0
    stem = tmp_path / "pareto_failures"
    check_written(plots.plot_pareto(with_failures, stem, **ENOUGH), stem)
    drawn: list = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, stem: drawn.append(fig) or [])
    plots.plot_pareto(with_failures, stem, **ENOUGH)
    ax = drawn[0].axes[0]
    assert [t.get_text() for t in ax.texts if "failed" in t.get_text()] == ["75% failed"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "had timed-out/errored runs (share shown): never Pareto-optimal" in legend


def _drawn_pareto(
    stacks: pl.DataFrame, monkeypatch: pytest.MonkeyPatch, n_tasks: int, min_n: int = 5
) -> Figure:
    drawn: list[Figure] = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, stem: drawn.append(fig) or [])
    plots.plot_pareto(stacks, Path("unused"), n_tasks=n_tasks, min_n=min_n)
    return drawn[0]


def _stars(fig: Figure) -> int:
    """Star markers drawn (the frontier's markers are the only ones of size 280)."""
    return sum(280 in c.get_sizes() for c in fig.axes[0].collections)


def _key_texts(fig: Figure) -> list[str]:
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


def test_pareto_stars_only_from_min_n_tasks(
    stacks: pl.DataFrame, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """At min_n tasks the table's Pareto-optimal stacks are starred and named; below it
    none is, nothing is called Pareto-optimal, and the title says why."""
    fig = _drawn_pareto(stacks, monkeypatch, n_tasks=5)
    assert _stars(fig) == 3  # the table's three pareto_optimal stacks
    assert any(t.startswith("1. ") for t in _key_texts(fig))
    fig = _drawn_pareto(stacks, monkeypatch, n_tasks=2)
    ax = fig.axes[0]
    assert _stars(fig) == 0
    assert fig.legends == []  # no key of Pareto-optimal stacks
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("Pareto-optimal" in t for t in legend)
    title = ax.get_title().replace("\n", " ")
    assert "no stack starred Pareto-optimal: 2 independent tasks < stats.min_n = 5" in title
    assert not any(t.get_text() in {"1", "2", "3"} for t in ax.texts)  # no frontier numbers
    monkeypatch.undo()
    stem = tmp_path / "pareto_small"
    check_written(plots.plot_pareto(stacks, stem, n_tasks=2, min_n=5), stem)


@pytest.mark.parametrize("n_tasks", [2, 10])
def test_pareto_marks_stacks_with_identical_answers(
    stacks: pl.DataFrame, monkeypatch: pytest.MonkeyPatch, n_tasks: int
) -> None:
    """Stacks of one answer group get "≡k" beside their points, and the key names the
    group, whether or not a front is drawn."""
    grouped = stacks.with_columns(answer_group=pl.Series([1, None, 1, None], dtype=pl.Int64))
    fig = _drawn_pareto(grouped, monkeypatch, n_tasks=n_tasks)
    marks = [t for t in fig.axes[0].texts if t.get_gid() == "identical_answers"]
    assert [t.get_text() for t in marks] == ["≡1", "≡1"]
    key = _key_texts(fig)
    assert (
        "byte-identical final answers on every task: m1, standard, crewai = m2, standard, crewai"
        in key
    )
    assert plots.identical_answer_groups(stacks) == {}  # no answer_group column: no group
    # one group of every stack: said once in the key, no mark on every point
    everyone = stacks.with_columns(answer_group=pl.lit(1, dtype=pl.Int64))
    fig = _drawn_pareto(everyone, monkeypatch, n_tasks=n_tasks)
    assert not [t for t in fig.axes[0].texts if t.get_gid() == "identical_answers"]
    assert "every stack (4): byte-identical final answers on every task" in _key_texts(fig)
    fig = _drawn_pareto(stacks, monkeypatch, n_tasks=n_tasks)
    assert not [t for t in fig.axes[0].texts if t.get_gid() == "identical_answers"]


GATE = (
    "judge not assessable: the checks have one class (all 24 failed), so κ is 0 or undefined "
    "by arithmetic; TU, TA and TCR are the judge's unvalidated scores"
)


def _gate_drawn(stem: Path, width: int) -> None:
    """The gate's verdict is inside the written image: the SVG holds its text (gid
    judge_gate) and the PNG grew by its lines above the figure."""
    assert 'id="judge_gate"' in stem.with_name(f"{stem.name}.svg").read_text()
    assert mpimg.imread(stem.with_name(f"{stem.name}.png")).shape[0] > width


def test_the_judge_gate_is_written_inside_the_judge_based_figures(
    run_metrics: pl.DataFrame, posthoc: pl.DataFrame, stacks: pl.DataFrame, tmp_path: Path
) -> None:
    for name, draw in (
        ("violin", lambda stem, gate: plots.plot_violins(
            run_metrics, posthoc, "TCR", stem, min_n=2, judge_gate=gate)),
        ("pareto", lambda stem, gate: plots.plot_pareto(
            stacks, stem, n_tasks=10, min_n=5, judge_gate=gate)),
    ):  # fmt: skip
        bare, gated = tmp_path / f"{name}_bare", tmp_path / f"{name}_gate"
        draw(bare, None)
        draw(gated, GATE)
        assert 'id="judge_gate"' not in bare.with_name(f"{bare.name}.svg").read_text()
        _gate_drawn(gated, mpimg.imread(bare.with_name(f"{bare.name}.png")).shape[0])


def test_judge_gate_note_wraps_the_verdict_on_the_figure() -> None:
    fig = Figure(figsize=(6, 4))
    plots.judge_gate_note(fig, GATE)
    (text,) = [t for t in fig.texts if t.get_gid() == "judge_gate"]
    assert text.get_text().replace("\n", " ") == f"Judge gate: {GATE}"
    assert "\n" in text.get_text()  # wrapped to the figure's width
    plots.judge_gate_note(fig, None)
    assert len(fig.texts) == 1

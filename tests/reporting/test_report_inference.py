"""Issue 38, items 1-3 and 6's table: what the tables and figures may claim.

A 2-task experiment (3 repeats, a strong planted model effect: the pooled tests give
p < 1e-12) shows no p-value, star, "best" level or "95% CI" in Table 6, kruskal_summary,
mixed_joint, the effects table, the violins or the effects figure, and the captions say
why; a 30-task experiment with the same planted effect shows them, the adjusted p beside
the raw one and "(n.s.)" where the adjustment takes the significance away.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from matplotlib.figure import Figure

from mastif.analysis.inference import MIN_TASKS_FOR_CI, small_sample_reason
from mastif.reporting import plots, plots_effects, report
from mastif.reporting.report_inference import (
    MIXED_JOINT_SCHEMA,
    best_stacks,
    inference_notes,
    kruskal_summary,
    mixed_joint_table,
)
from mastif.reporting.stats_tables import effects_table
from tests.support.inference_frames import MIN_N, Experiment, experiment
from tests.support.paths import REPO

#: a p-value in a sentence ("p=0.017", "p < 0.001", "adjusted p=0.205")
P_TEXT = re.compile(r"\bp\s*(=|<)\s*[0-9.]")
STARS = re.compile(r"^\*{1,3}$")


@pytest.fixture(scope="module")
def two() -> Experiment:
    return experiment(2, repeats=3)


@pytest.fixture(scope="module")
def thirty() -> Experiment:
    return experiment(30)


def md_rows(md: str) -> list[list[str]]:
    """The header and body rows of the pipe table at the end of a Markdown table file."""
    lines = [line for line in md.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines if "---" not in line]


def written(e: Experiment, tmp_path: Path) -> dict[str, str]:
    """The inference tables of ``e`` as write_tables renders them, with their captions."""
    tables = {
        "mixed_joint": mixed_joint_table(e.joint, n_tasks=e.n_tasks, min_n=MIN_N),
        "table6_best_stacks": best_stacks(
            e.joint, e.levels, e.pairs, e.runs, n_tasks=e.n_tasks, min_n=MIN_N
        ),
        "kruskal_summary": kruskal_summary(e.tests, n_tasks=e.n_tasks, min_n=MIN_N),
        "effects": effects_table(e.effects),
    }
    report.write_tables(tables, tmp_path, warnings=inference_notes(e.n_tasks, MIN_N))
    return {name: (tmp_path / f"{name}.md").read_text() for name in tables}


def column(md: str, header: str) -> list[str]:
    rows = md_rows(md)
    k = rows[0].index(header)
    return [row[k] for row in rows[1:]]


# ---------------------------------------------------------------------------------------------
# Tables


@pytest.fixture(scope="module")
def two_with_p(two: Experiment, thirty: Experiment) -> Experiment:
    """The 2-task runs with stats tables that do hold p-values and Dunn stars (a stats
    file that pooled the runs as independent): the tables and figures must withhold them
    on their own, from the number of tasks."""
    return Experiment(2, two.runs, thirty.tests, thirty.groups, thirty.posthoc, two.effects,
                      thirty.joint.with_columns(n_tasks=pl.lit(None, pl.Int64)),
                      thirty.levels, thirty.pairs)  # fmt: skip


@pytest.mark.parametrize("case", ["two", "two_with_p"])
def test_two_tasks_tables_carry_no_p_no_best_and_say_why(
    case: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    md = written(request.getfixturevalue(case), tmp_path)
    reason = small_sample_reason(2, MIN_N)
    assert reason is not None
    for name in ("table6_best_stacks", "kruskal_summary", "mixed_joint"):
        caption = md[name].split("\n\n")[0]
        assert caption == f"**{reason[0].upper() + reason[1:]}.**", name
        body = "\n".join(md[name].splitlines()[2:])
        assert not P_TEXT.search(body), name
    for factor in ("model", "protocol", "framework"):
        assert all(
            c == "— (2 tasks < stats.min_n 5)" for c in column(md["table6_best_stacks"], factor)
        )
    assert set(column(md["table6_best_stacks"], "tests")) == {reason}
    for name in ("kruskal_summary", "mixed_joint"):
        assert set(column(md[name], "p-value")) == {"—"}
        assert set(column(md[name], "adjusted p")) == {"—"}
        assert set(column(md[name], "note")) == {reason}
    # effects: means only, no interval, and no "95% CI" anywhere
    assert "95% CI" not in md["effects"]
    assert not any("[" in cell for row in md_rows(md["effects"])[1:] for cell in row)
    assert md["effects"].startswith(f"**No interval: 2 independent tasks < {MIN_TASKS_FOR_CI}")


def test_thirty_tasks_tables_carry_adjusted_p_beside_raw(
    thirty: Experiment, tmp_path: Path
) -> None:
    md = written(thirty, tmp_path)
    for name in ("table6_best_stacks", "kruskal_summary", "mixed_joint", "effects"):
        assert not md[name].startswith("**"), name  # no small-sample or interval note
    t6 = best_stacks(thirty.joint, thirty.levels, thirty.pairs, thirty.runs, n_tasks=30,
                     min_n=MIN_N)  # fmt: skip
    tcr = t6.row(0, named=True)
    # the joint test of model is significant and m2 beats m1 over the tasks: named
    assert tcr["model"] == "m2" and tcr["model_mean"] is not None
    assert "model: F(1, 29)=25.000, p < 0.001, adjusted p < 0.001" in tcr["tests"]
    # protocol's joint test is not significant after the adjustment: no best level
    assert tcr["protocol"] == "— (n.s. after adjustment: adjusted p 0.120)"
    assert "protocol: F(2, 28)=7.000, p=0.030, adjusted p=0.120 (n.s.)" in tcr["tests"]
    # kruskal_summary: both p's, (n.s.) on the adjusted one where it is not below alpha
    ks = md_rows(md["kruskal_summary"])
    header = ks[0]
    raw, adj = header.index("p-value"), header.index("adjusted p")
    assert all(row[raw] != "—" and row[adj] != "—" for row in ks[1:])
    assert any(row[adj] == "< 0.001" for row in ks[1:])
    tests = kruskal_summary(thirty.tests).filter(
        (pl.col("p_value") < 0.05) & (pl.col("p_adjusted") >= 0.05)
    )
    assert tests.height > 0  # a raw-significant test the adjustment takes back
    for row in tests.iter_rows(named=True):
        (line,) = [r for r in ks[1:] if r[:2] == [row["metric"], row["factor"]]]
        assert line[adj].endswith("(n.s.)") and not line[raw].endswith("(n.s.)")
    # mixed_joint: factors first, raw beside adjusted
    mj = md_rows(md["mixed_joint"])
    assert [r[1] for r in mj[1:5]] == ["model", "protocol", "framework", "model:protocol"]
    assert mj[2][5:7] == ["0.030", "0.120 (n.s.)"]
    assert mj[1][5:7] == ["< 0.001", "< 0.001"]
    # effects: intervals from MIN_TASKS_FOR_CI tasks on
    assert all("[" in cell for cell in column(md["effects"], "TCR"))


def test_table6_works_with_null_p_values_and_without_an_adjusted_column() -> None:
    stacks = pl.DataFrame({"model": ["a", "b"], "protocol": ["s", "s"], "framework": ["f", "f"]})
    levels = pl.DataFrame(
        {"metric": ["TCR"] * 2, "factor": ["model"] * 2, "level": ["a", "b"], "mean": [0.2, 0.8]}
    )
    pairs = pl.DataFrame(
        {"metric": ["TCR"], "factor": ["model"], "level": ["a"], "other": ["b"],
         "p_adjusted": [0.001]}
    )  # fmt: skip
    reason = small_sample_reason(3, 5)
    joint = pl.DataFrame(
        [("TCR", "model", "Hotelling", 1, None, None, None, None, 3, reason)],
        schema=MIXED_JOINT_SCHEMA,
        orient="row",
    )
    row = best_stacks(joint, levels, pairs, stacks).row(0, named=True)  # no task count given
    assert row["model"] == "— (not tested)" and row["model_mean"] is None
    assert f"model: not tested ({reason})" in row["tests"]
    assert row["protocol"] == "s (only level)" and row["framework"] == "f (only level)"
    # a joint file without p_adjusted: no adjusted p, so no best level
    old = joint.drop("p_adjusted").with_columns(p_value=pl.lit(0.001), statistic=pl.lit(9.0))
    row = best_stacks(old, levels, pairs, stacks).row(0, named=True)
    assert row["model"] == "— (no adjusted p)"
    assert "p=0.001, adjusted p=—" in row["tests"]
    # significant, and b beats a after the within-factor adjustment: named, with its mean
    tested = joint.with_columns(p_value=pl.lit(0.001), p_adjusted=pl.lit(0.002))
    row = best_stacks(tested, levels, pairs, stacks).row(0, named=True)
    assert (row["model"], row["model_mean"]) == ("b", 0.8)
    # significant factor, but the best level does not beat the other after adjustment
    close = pairs.with_columns(p_adjusted=pl.lit(0.2))
    row = best_stacks(tested, levels, close, stacks).row(0, named=True)
    assert row["model"] == "— (b not distinguishable from a: adjusted p 0.200)"


def test_mixed_joint_withholds_p_per_model_below_min_n_and_orders_terms() -> None:
    joint = pl.DataFrame(
        [
            ("CT", "protocol:framework", "Hotelling", 2, 1.0, 0.6, 1.0, None, 20, None),
            ("CT", "framework", "Hotelling", 1, 2.0, 0.16, 0.5, None, 20, None),
            ("CT", "model", "Hotelling", 1, 30.0, 1e-7, 1e-6, None, 20, None),
            ("success", "model", "Hotelling", 1, 9.0, 0.003, 0.01, None, 3, None),  # a 3-task fit
        ],
        schema=MIXED_JOINT_SCHEMA,
        orient="row",
    )
    out = mixed_joint_table(joint, n_tasks=20, min_n=5)
    assert out.select("metric", "term").rows() == [
        ("success", "model"),
        ("CT", "model"),
        ("CT", "framework"),
        ("CT", "protocol:framework"),
    ]
    first = out.row(0, named=True)
    assert first["p_value"] is None and first["p_adjusted"] is None
    assert first["note"] == small_sample_reason(3, 5) and first["statistic"] == 9.0
    assert out["p_value"].to_list()[1:] == [1e-7, 0.16, 0.6]
    # a file without n_tasks: the experiment's count decides
    no_count = mixed_joint_table(joint.drop("n_tasks"), n_tasks=2, min_n=5)
    assert no_count["p_value"].null_count() == 4 and no_count.schema == MIXED_JOINT_SCHEMA
    md = report.to_markdown(out, "cap")
    assert md_rows(md)[0] == [
        "metric", "term", "test", "df", "statistic", "p-value", "adjusted p",
        "D (effect size)", "n tasks", "note",
    ]  # fmt: skip
    assert md_rows(md)[3][5:7] == ["0.160", "0.500 (n.s.)"]


def test_notes_name_the_tables_that_show_p_and_the_interval_rule() -> None:
    assert inference_notes(30, 5) == {}
    assert set(inference_notes(MIN_TASKS_FOR_CI - 1, 5)) == {"effects"}
    assert set(inference_notes(2, 5)) == {
        "mixed_joint",
        "table6_best_stacks",
        "kruskal_summary",
        "effects",
    }


# ---------------------------------------------------------------------------------------------
# Figures


def _capture(monkeypatch: pytest.MonkeyPatch, module: object) -> list[Figure]:
    figures: list[Figure] = []
    monkeypatch.setattr(module, "save_figure", lambda fig, stem: figures.append(fig) or [])
    return figures


def _stars(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts if STARS.match(t.get_text())]


@pytest.mark.parametrize("case", ["two", "two_with_p"])
@pytest.mark.parametrize("metric", ["TCR", "CT"])
def test_violins_of_two_tasks_have_no_star_and_say_why(
    case: str, metric: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    e = request.getfixturevalue(case)
    figures = _capture(monkeypatch, plots)
    plots.plot_violins(e.runs, e.posthoc, metric, Path("unused"), min_n=MIN_N)
    assert _stars(figures[0]) == []
    title = figures[0].get_suptitle()
    assert small_sample_reason(2, MIN_N) in title and "marked" not in title


@pytest.mark.parametrize("metric", ["TCR", "CT"])
def test_violins_of_thirty_tasks_have_their_stars(
    thirty: Experiment, metric: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = _capture(monkeypatch, plots)
    plots.plot_violins(thirty.runs, thirty.posthoc, metric, Path("unused"), min_n=MIN_N)
    assert _stars(figures[0]) == ["***"]  # the planted model effect
    assert "adjusted p < 0.05 marked" in figures[0].get_suptitle()


def _figure_texts(fig: Figure) -> list[str]:
    texts = [fig.get_suptitle(), *(t.get_text() for t in fig.texts)]
    for legend in fig.legends:
        texts += [t.get_text() for t in legend.get_texts()]
    return texts


def test_effects_figure_of_two_tasks_has_no_ci(
    two: Experiment, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = _capture(monkeypatch, plots_effects)
    plots_effects.plot_effects(two.effects, Path("unused"))
    fig = figures[0]
    assert not any("% CI" in t or "with confidence interval" in t for t in _figure_texts(fig))
    assert plots_effects.NO_INTERVAL in fig.get_suptitle()
    assert not [c for ax in fig.axes for c in ax.collections if c.get_gid() == "ci_whiskers"]


def test_effects_figure_of_thirty_tasks_has_its_ci(
    thirty: Experiment, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = _capture(monkeypatch, plots_effects)
    plots_effects.plot_effects(thirty.effects, Path("unused"))
    fig = figures[0]
    assert fig.get_suptitle().startswith("Per-stack means, 95% CI over tasks (bootstrap)")
    assert [c for ax in fig.axes for c in ax.collections if c.get_gid() == "ci_whiskers"]


def test_captions_name_the_rules_with_the_same_numbers() -> None:
    report_dir = REPO / "workflow" / "report"
    for name in ("effects.rst", "tables.rst"):
        text = (report_dir / name).read_text()
        assert f"at least {MIN_TASKS_FOR_CI} tasks" in text, name
        assert "mastif.analysis.inference.MIN_TASKS_FOR_CI" in text, name
    assert 'snakemake.config["stats"]["min_n"]' in (report_dir / "violin.rst").read_text()
    assert f"at least {MIN_TASKS_FOR_CI} tasks" in report.CAPTIONS["effects"]

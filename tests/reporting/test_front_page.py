"""The report's front page (mastif.reporting.front_page) and the figure it leads with
(mastif.reporting.plots_joint): the joint tests' table and figure first, then the judge gate,
then the sample as counted in the runs."""

from __future__ import annotations

import html
import re
from pathlib import Path

from docutils.core import publish_parts

from mastif.analysis.mixed_joint import joint_contrasts, joint_tests
from mastif.reporting.front_page import front_page, write_front_page
from mastif.reporting.plots_joint import joint_title, plot_joint_effects
from tests.analysis.test_mixed_joint import runs

GATE = "judge NOT validated: pooled κ 0.10 < judge.min_kappa 0.4 (40 runs)"


def page(n_tasks: int, tmp_path: Path) -> tuple[str, str]:
    data = runs(n_tasks)
    joint = joint_tests(data, min_n=5)
    # any PNG's bytes: the page embeds the file as it is (the figure is tested below)
    (tmp_path / "joint_effects.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 200)
    rst = front_page(
        joint, tmp_path / "joint_effects.png", GATE, n_tasks,
        min_n=5, alpha=0.05, family_adjust="holm",
    )  # fmt: skip
    html = publish_parts(rst, writer="html", settings_overrides={"report_level": 2})
    return rst, html["html_body"]


def text_of(body: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_front_page_leads_with_the_joint_tests_then_the_gate(tmp_path: Path) -> None:
    rst, body = page(20, tmp_path)
    text = text_of(body)
    # docutils renders it without a warning or error block
    assert "system-message" not in body
    assert text.index("The joint tests") < text.index("The judge gate") < text.index("The sample")
    assert f"Judge gate: {GATE}" in text
    # the table: one row per joint test, F with its df, raw and adjusted p, D
    assert body.count("<tr") == 1 + joint_tests(runs(20), min_n=5).height
    assert re.search(r"framework F\(2, 18\) = [0-9.]+ < 0.001 < 0.001 [0-9.]+", text)
    assert "(n.s.)" in text
    # the figure, embedded
    assert re.search(r'<img alt="each factor[^"]*" src="data:image/png;base64,[A-Za-z0-9+/]', body)
    assert "20 independent tasks" in text and "Small sample" not in text
    assert "Intervals" not in text  # 20 tasks >= MIN_TASKS_FOR_CI


def test_a_small_sample_front_page_says_why_and_claims_nothing(tmp_path: Path) -> None:
    _, body = page(3, tmp_path)
    text = text_of(body)
    assert "system-message" not in body
    assert "No joint test: 3 independent tasks < stats.min_n = 5" in text
    assert "Small sample: 3 tasks counted < stats.min_n = 5" in text
    assert "Intervals: 3 tasks counted < 15" in text
    assert not re.search(r"\bp\s*[=<]\s*\d|< 0\.001", text)
    assert "3 tasks < stats.min_n 5" in text  # each row's why


def test_write_front_page_replaces_whole(tmp_path: Path) -> None:
    path = tmp_path / "report" / "front_page.rst"
    write_front_page("a\n", path)
    write_front_page("b\n", path)
    assert path.read_text() == "b\n" and [p.name for p in path.parent.iterdir()] == [path.name]


def test_joint_figure_draws_levels_intervals_and_the_gate(tmp_path: Path, monkeypatch) -> None:
    from mastif.reporting import plots_joint

    figures = []
    monkeypatch.setattr(plots_joint, "save_figure", lambda fig, stem: figures.append(fig) or [])
    data = runs(20)
    # two metrics are enough to draw every kind of panel (and keep the test fast)
    joint = joint_tests(data, min_n=5, metrics=["TCR", "CT"])
    levels, _ = joint_contrasts(data, min_n=5, metrics=["TCR", "CT"])
    plot_joint_effects(joint, levels, tmp_path / "x", judge_gate="x")
    fig = figures[0]
    gids = [a.get_gid() for ax in fig.axes for a in [*ax.lines, *ax.collections]]
    assert "level_means" in gids and "level_whiskers" in gids and "no_interval" not in gids
    assert any(t.get_gid() == "judge_gate" and t.get_text() == "Judge gate: x" for t in fig.texts)
    titles = [ax.get_title() for ax in fig.axes]
    assert any(t.startswith("framework: F(2, 18) = ") and "adj. p < 0.001" in t for t in titles)
    # below the interval floor: hollow markers, no whisker
    figures.clear()
    small = runs(8)
    levels, _ = joint_contrasts(small, min_n=5, metrics=["TCR"])
    plot_joint_effects(joint_tests(small, min_n=5, metrics=["TCR"]), levels, tmp_path / "y")
    gids = [a.get_gid() for ax in figures[0].axes for a in [*ax.lines, *ax.collections]]
    assert "no_interval" in gids and "level_whiskers" not in gids


def test_joint_title_says_why_there_is_no_test() -> None:
    assert joint_title(None) == "no joint test"
    row = {"p_value": None, "note": "no p-value, star or best level: 2 tasks; more"}
    assert joint_title(row) == "no test: no p-value, star or best level: 2 tasks"
    row = {"p_value": 0.2, "p_adjusted": 0.4, "df": 2, "n_tasks": 20, "statistic": 1.5,
           "effect": 0.3}  # fmt: skip
    assert joint_title(row) == "F(2, 18) = 1.50, adj. p 0.400 (n.s.), D 0.30"

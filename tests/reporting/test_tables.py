"""Tests for mastif.reporting.report on small hand-built tables in the shapes of docs/data.md."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mastif.reporting import report

NAMES = [
    "table2_task_completion",
    "table3_efficiency",
    "table4_tool_use",
    "table5_social_values",
    "table6_best_stacks",
    "table7_protocol_cost",
    "table8_ground_truth",
    "kruskal_summary",
]
STACK_TABLES = [*NAMES[:4], "table7_protocol_cost", "table8_ground_truth"]


def _sens(*entries: tuple[float, float | None, float]) -> list[dict[str, float | None]]:
    return [{"threshold": t, "SVS": v, "empty_value_set_share": e} for t, v, e in entries]


@pytest.fixture
def stacks() -> pl.DataFrame:
    """2 models x 1 protocol x 2 frameworks; m1 made no tool calls.

    The protocol cost columns are as an MCP run would give them (the ``standard`` protocol
    here would have zeros; non-zero values exercise the formatting).
    """
    return pl.DataFrame(
        {
            "model": ["m2", "m1", "m1", "m2"],
            "protocol": ["standard"] * 4,
            "framework": ["langgraph", "langgraph", "crewai", "crewai"],
            "n_runs": [3, 3, 3, 3],
            "n_judged": [3, 2, 3, 3],
            "n_judge_failed": [0, 1, 0, 0],
            "n_ok": [3, 3, 1, 3],
            "n_timeout": [0, 0, 1, 0],
            "n_error": [0, 0, 1, 0],
            "timeout_share": [0.0, 0.0, 1 / 3, 0.0],
            "error_share": [0.0, 0.0, 1 / 3, 0.0],
            "n_usage_missing": [0, 0, 0, 1],
            "TU_mean": [0.9, 0.8, 0.91, 0.95],
            "TA_mean": [0.95, 0.85, 0.969, 0.97],
            "TCR_mean": [0.7, 0.5, 2 / 3, 0.8],
            "TCR_std": [0.1, None, 0.186, 0.2],
            "CT_mean": [12.34, 9.96, 20.8, 15.0],
            "CT_std": [1.0, 0.5, None, 2.0],
            "n_CT": [3, 3, 1, 3],
            "CT_km_median": [12.0, 9.5, None, 14.25],
            "V_mean": [800.0, 700.0, 912.44, 650.0],
            "V_std": [50.0, 40.0, None, 30.0],
            "n_V": [3, 3, 1, 2],
            "n_tool_calls": [4, 0, 0, 6],
            "TUSR": [0.75, None, None, 0.5],
            "TUSR_std": [0.2, None, None, 0.3],
            "SVS": [0.21, 0.19, 0.2, 0.18],
            "SVS_std": [0.038, 0.012, 0.01, 0.02],
            "SVS_prompt_output": [0.156, 0.1, 0.12, 0.13],
            "SVS_reasoning": [0.235, 0.2, None, 0.22],
            "n_no_final_answer": [0, 1, 0, 2],
            "n_IVS_null": [0, 1, 0, 0],
            "IVS_null_share": [0.0, 0.5, 0.0, 0.0],
            "empty_value_set_share": [0.25, 0.5, 0.125, 0.4],
            # m1/crewai recorded none; m1/langgraph lacks 0.45
            "SVS_sensitivity": [
                _sens((0.25, 0.3, 0.1), (0.35, 0.21, 0.25), (0.45, 0.1, 0.5)),
                _sens((0.35, 0.19, 0.5), (0.25, 0.25, 0.2)),
                None,
                _sens((0.25, 0.2, 0.0), (0.35, 0.18, 0.125), (0.45, None, 0.9)),
            ],
            "pareto_optimal": [True, True, False, True],
            "protocol_messages": [12.0, 4.0, 4.0, 18.0],
            "protocol_calls": [4.0, 0.0, 0.0, 6.0],
            "protocol_kib": [6.31, 1.0, 1.04, 9.5],
            "protocol_s": [0.0123, 0.002, 0.0021, 0.05],
            "n_protocol_s_unknown": [0, 0, 1, 0],
            "model_s": [11.0, 9.0, 19.94, 13.5],
            "protocol_share": [0.0123 / 12.34, 0.002 / 9.96, 0.0021 / 20.8, 0.05 / 15.0],
            "n_checked": [3, 3, 0, 3],
            "success_rate": [2 / 3, 0.0, None, 1 / 3],
            "judge_accuracy": [2 / 3, 1.0, None, 1.0],
            "judge_kappa": [0.25, None, None, 1.0],
        }
    )


@pytest.fixture
def stats_tests() -> pl.DataFrame:
    rows = []
    for metric in ("TCR", "TU", "TA", "CT", "V", "TUSR", "IVS"):
        for factor in ("framework", "model", "protocol"):  # deliberately not in paper order
            if factor == "protocol":
                rows.append((metric, factor, 1, "skipped", None, None, None, "single level", None))
            else:
                # raw and Holm-adjusted p: V is n.s. raw; TUSR significant raw, not adjusted
                p, adj = {"V": (0.2, 1.0), "TUSR": (0.017, 0.205)}.get(metric, (0.0004, 0.004))
                rows.append((metric, factor, 2, "kruskal", 12.3, p, False, None, adj))
    return pl.DataFrame(
        rows,
        schema=[
            "metric",
            "factor",
            "n_levels",
            "test",
            "statistic",
            "p_value",
            "all_normal",
            "note",
            "p_adjusted",
        ],
        orient="row",
        schema_overrides={
            "statistic": pl.Float64,
            "p_value": pl.Float64,
            "all_normal": pl.Boolean,
            "note": pl.String,
            "p_adjusted": pl.Float64,
        },
    )


@pytest.fixture
def stats_groups() -> pl.DataFrame:
    rows = []
    for metric in ("TCR", "CT", "V", "TUSR", "IVS"):
        # m1 always has the lower mean rank, crewai the higher
        rows += [
            (metric, "model", "m1", 6, 3.5),
            (metric, "model", "m2", 6, 9.5),
            (metric, "framework", "crewai", 6, 8.0),
            (metric, "framework", "langgraph", 6, 5.0),
            (metric, "protocol", "standard", 12, 6.5),
        ]
    return pl.DataFrame(
        rows, schema=["metric", "factor", "level", "n", "mean_rank"], orient="row"
    ).with_columns(mean=pl.lit(0.5), std=pl.lit(0.1), median=pl.lit(0.5))


@pytest.fixture
def tables(
    stacks: pl.DataFrame, stats_tests: pl.DataFrame, stats_groups: pl.DataFrame
) -> dict[str, pl.DataFrame]:
    return report.paper_tables(stacks, stats_tests)


def test_formatters() -> None:
    assert report.fmt_mean_sd(2 / 3, 0.186) == "0.667 (0.186)"
    assert report.fmt_mean_sd(20.84, 13.31, 1) == "20.8 (13.3)"
    assert report.fmt_mean_sd(0.5, None) == "0.500 (—)"
    assert report.fmt_mean_sd(None, 0.1) == "—"
    assert report.fmt_mean_sd(float("nan"), 0.1) == "—"
    assert report.fmt_p(0.0004) == "< 0.001" and report.fmt_p(0.0384) == "0.038"


def test_table_names_and_rows(tables: dict[str, pl.DataFrame]) -> None:
    assert list(tables) == NAMES
    for name in STACK_TABLES:
        assert tables[name].height == 4
        # paper order: model, then framework
        assert tables[name].get_column("Stack").to_list() == [
            "m1, standard, crewai",
            "m1, standard, langgraph",
            "m2, standard, crewai",
            "m2, standard, langgraph",
        ]
    assert tables["table2_task_completion"].columns == [
        "Stack",
        "TU",
        "TA",
        "TCR",
        "TCR_std",
        "n_judged",
        "n_judge_failed",
        "timeout_share",
        "error_share",
        "identical_answers",
    ]
    assert tables["table3_efficiency"].columns == [
        "Stack",
        "CT",
        "CT_std",
        "n_CT",
        "CT_km_median",
        "V",
        "V_std",
        "n_V",
        "n_usage_missing",
        "timeout_share",
        "error_share",
        "pareto_optimal",
        "identical_answers",
    ]
    assert tables["table4_tool_use"].columns == [
        "Stack",
        "TUSR",
        "TUSR_std",
        "n_tool_calls",
        "timeout_share",
        "error_share",
    ]
    assert tables["table5_social_values"].columns == [
        "Stack",
        "SVS_prompt_output",
        "SVS_reasoning",
        "SVS",
        "SVS_std",
        "n_no_final_answer",
        "IVS_null_share",
        "empty_value_set_share",
        "SVS_at_0.25",
        "SVS_at_0.35",
        "SVS_at_0.45",
    ]
    assert tables["table7_protocol_cost"].columns == [
        "Stack",
        "messages",
        "calls",
        "KiB",
        "protocol_s",
        "n_protocol_s_unknown",
        "model_s",
        "protocol_share",
    ]


def test_tables_2_3_flag_identical_answers_and_no_pareto_below_min_n(
    stacks: pl.DataFrame, stats_tests: pl.DataFrame, stats_groups: pl.DataFrame
) -> None:
    """Beside Tables 2 and 3: the other stacks of a stack's answer group; Table 3 calls no
    stack Pareto-optimal below stats.min_n independent tasks (issue 51)."""
    grouped = stacks.with_columns(
        answer_group=pl.when(pl.col("framework") == "crewai").then(pl.lit(1, dtype=pl.Int64))
    )
    enough = report.paper_tables(grouped, stats_tests, n_tasks=5, min_n=5)
    for name in ("table2_task_completion", "table3_efficiency"):
        assert enough[name]["identical_answers"].to_list() == [
            "≡1: m2, standard, crewai",
            None,
            "≡1: m1, standard, crewai",
            None,
        ]
        assert "identical answers = ≡k" in report.CAPTIONS[name]
    in_order = stacks.sort("model", "framework")["pareto_optimal"]
    assert enough["table3_efficiency"]["pareto_optimal"].to_list() == in_order.to_list()
    few = report.paper_tables(grouped, stats_tests, n_tasks=2, min_n=5)
    assert few["table3_efficiency"]["pareto_optimal"].is_null().all()
    assert few["table2_task_completion"].equals(enough["table2_task_completion"])
    assert "below stats.min_n" in report.CAPTIONS["table3_efficiency"]
    # one group of every stack (the .test pipeline's scripted model): no list of 29 stacks
    everyone = stacks.with_columns(answer_group=pl.lit(1, dtype=pl.Int64))
    table2 = report.paper_tables(everyone, stats_tests)["table2_task_completion"]
    assert set(table2["identical_answers"]) == {"≡1: every other stack"}


def test_table5_without_sensitivity_columns(
    stacks: pl.DataFrame, stats_tests: pl.DataFrame, stats_groups: pl.DataFrame
) -> None:
    # an empty values.sensitivity_thresholds list (or an older stacks file) adds no column
    for frame in (
        stacks.drop("SVS_sensitivity"),
        stacks.with_columns(
            pl.lit(None).cast(stacks.schema["SVS_sensitivity"]).alias("SVS_sensitivity")
        ),
    ):
        table = report.paper_tables(frame, stats_tests)["table5_social_values"]
        assert not [c for c in table.columns if c.startswith("SVS_at_")]
        assert table.columns[-1] == "empty_value_set_share"


def md_rows(md: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines()[2:]]


def test_markdown_format(tables: dict[str, pl.DataFrame]) -> None:
    md = report.to_markdown(tables["table2_task_completion"], report.CAPTIONS[NAMES[0]])
    lines = md.splitlines()
    assert lines[0].startswith("Table 2.") and lines[1] == ""
    assert lines[3] == "|" + " --- |" * 9
    rows = md_rows(md)
    assert rows[0] == [
        "Stack",
        "TU",
        "TA",
        "TCR (σ)",
        "n judged",
        "n judge failed",
        "timed out",
        "errored",
        "identical answers",
    ]
    assert rows[2] == [
        "m1, standard, crewai",
        "0.910",
        "0.969",
        "0.667 (0.186)",
        "3",
        "0",
        "0.333",
        "0.333",
        "—",
    ]
    assert rows[3][3] == "0.500 (—)" and rows[3][5] == "1" and rows[3][6:8] == ["0.000"] * 2

    rows = md_rows(report.to_markdown(tables["table3_efficiency"], "cap"))
    assert rows[0] == [
        "Stack",
        "CT (σ) [s]",
        "n CT",
        "CT KM median [s]",
        "V (σ) [tokens]",
        "n V",
        "n usage missing",
        "timed out",
        "errored",
        "Pareto-optimal",
        "identical answers",
    ]
    # one completed run of three: its CT and V, σ undefined; KM median unknown (< half done)
    assert rows[2] == [
        "m1, standard, crewai",
        "20.8 (—)",
        "1",
        "—",
        "912.4 (—)",
        "1",
        "0",
        "0.333",
        "0.333",
        "no",
        "—",
    ]
    assert rows[4][1:7] == ["15.0 (2.0)", "3", "14.2", "650.0 (30.0)", "2", "1"]

    rows = md_rows(report.to_markdown(tables["table4_tool_use"], "cap"))
    # no tool calls: listed, not hidden
    assert rows[2] == ["m1, standard, crewai", "—", "0", "0.333", "0.333"]
    assert rows[5] == ["m2, standard, langgraph", "0.750 (0.200)", "4", "0.000", "0.000"]

    rows = md_rows(report.to_markdown(tables["table5_social_values"], "cap"))
    assert rows[0] == [
        "Stack", "SVS_P,o", "SVS_reasoning", "SVS (σ)", "n without answer", "IVS null share",
        "empty value sets", "SVS at 0.25", "SVS at 0.35", "SVS at 0.45",
    ]  # fmt: skip
    # no sensitivity recorded: dashes, not zeros
    assert rows[2] == [
        "m1, standard, crewai", "0.120", "—", "0.200 (0.010)", "0", "0.000", "0.125",
        "—", "—", "—",
    ]  # fmt: skip
    # pivoted by threshold, not by list position; a threshold it lacks is a dash
    assert rows[3] == [
        "m1, standard, langgraph", "0.100", "0.200", "0.190 (0.012)", "1", "0.500", "0.500",
        "0.250", "0.190", "—",
    ]  # fmt: skip
    assert rows[4][-3:] == ["0.200", "0.180", "—"]
    assert rows[5][-3:] == ["0.300", "0.210", "0.100"]
    assert "(the paper omitted them" in report.CAPTIONS["table4_tool_use"]

    md = report.to_markdown(tables["table7_protocol_cost"], report.CAPTIONS["table7_protocol_cost"])
    assert md.splitlines()[0].startswith("Table 7. Protocol cost per stack")
    rows = md_rows(md)
    assert rows[0] == [
        "Stack",
        "messages",
        "calls",
        "KiB",
        "protocol overhead [s]",
        "n unknown",
        "model time [s]",
        "protocol share",
    ]
    # counts, KiB and model seconds: 1 decimal; the (small) protocol seconds and share: 3
    assert rows[2] == ["m1, standard, crewai", "4.0", "0.0", "1.0", "0.002", "1", "19.9", "0.000"]
    assert rows[5] == [
        "m2, standard, langgraph", "12.0", "4.0", "6.3", "0.012", "0", "11.0", "0.001",
    ]  # fmt: skip
    assert "one definition for MCP and A2A" in report.CAPTIONS["table7_protocol_cost"]


def _joint_family(metric: str, means: dict[str, float], p_adjusted: float) -> tuple:
    """A joint row for ``model`` (significant at ``p_adjusted``), its levels' means and one
    pair per two levels, every pair significant."""
    from mastif.analysis.mixed_joint import (
        JOINT_LEVELS_SCHEMA,
        JOINT_PAIRS_SCHEMA,
        MIXED_JOINT_SCHEMA,
    )

    joint = pl.DataFrame(
        [(metric, "model", "Hotelling", 1, 9.0, p_adjusted / 2, p_adjusted, 1.1, 20, None)],
        schema=MIXED_JOINT_SCHEMA,
        orient="row",
    )
    levels = pl.DataFrame(
        [(metric, "model", level, mean, None, None, 20, None) for level, mean in means.items()],
        schema=JOINT_LEVELS_SCHEMA,
        orient="row",
    )
    a, b = sorted(means)
    pairs = pl.DataFrame(
        [(metric, "model", a, b, 0.1, 4.0, 19, 0.001, 0.001, 20, None)],
        schema=JOINT_PAIRS_SCHEMA,
        orient="row",
    )
    return joint, levels, pairs


def test_best_stacks_direction(stacks: pl.DataFrame) -> None:
    # lower is better for CT: the level with the lower mean is named
    ct = report.best_stacks(*_joint_family("CT", {"m1": 10.0, "m2": 20.0}, 0.01), stacks)
    by_metric = {row["Metric"]: row for row in ct.iter_rows(named=True)}
    assert list(by_metric) == [label for label, _, _ in report.BEST_METRICS.values()]
    row = by_metric["Convergence time (CT)"]
    assert (row["model"], row["model_mean"], row["better"]) == ("m1", 10.0, "lower")
    assert row["protocol"] == "standard (only level)"
    assert "model: F(1, 19)=9.000, p=0.005, adjusted p=0.010" in row["tests"]
    # higher is better for TCR
    tcr = report.best_stacks(*_joint_family("TCR", {"m1": 0.2, "m2": 0.6}, 0.01), stacks)
    assert tcr.row(0, named=True)["model"] == "m2"
    # not significant after the adjustment: no best level, both p's shown
    ns = report.best_stacks(*_joint_family("TCR", {"m1": 0.2, "m2": 0.6}, 0.205), stacks)
    row = ns.row(0, named=True)
    assert row["model"] == "— (n.s. after adjustment: adjusted p 0.205)"
    assert row["model_mean"] is None
    assert "p=0.102, adjusted p=0.205 (n.s.)" in row["tests"]


def test_best_stacks_without_joint_tests_names_none(tables: dict[str, pl.DataFrame]) -> None:
    for row in tables["table6_best_stacks"].iter_rows(named=True):
        assert row["model"] == "— (not tested)" and row["model_mean"] is None
        assert row["protocol"] == "standard (only level)"


def test_kruskal_summary(tables: dict[str, pl.DataFrame]) -> None:
    ks = tables["kruskal_summary"]
    assert ks.columns == [
        "metric",
        "factor",
        "test",
        "stat",
        "statistic",
        "p_value",
        "p_adjusted",
        "n_levels",
        "all_normal",
        "note",
    ]
    assert ks.height == 21
    assert ks.get_column("metric").unique(maintain_order=True).to_list() == list(
        report.METRIC_ORDER
    )
    assert ks.get_column("factor").head(3).to_list() == ["model", "protocol", "framework"]
    assert ks.row(0, named=True)["stat"] == "H"
    assert ks.row(1, named=True)["stat"] is None
    rows = md_rows(report.to_markdown(ks, "cap"))
    assert rows[0][5:7] == ["p-value", "adjusted p"]
    assert rows[2][:7] == ["TCR", "model", "kruskal", "H", "12.300", "< 0.001", "0.004"]
    tusr = md_rows(report.to_markdown(ks.filter(pl.col("metric") == "TUSR"), "cap"))
    assert tusr[2][5:7] == ["0.017", "0.205 (n.s.)"]


def test_write_tables_roundtrip(tables: dict[str, pl.DataFrame], tmp_path: Path) -> None:
    paths = report.write_tables(tables, tmp_path / "tables")
    assert sorted(p.name for p in paths) == sorted(
        f"{n}.{ext}" for n in NAMES for ext in ("md", "csv")
    )
    t7 = pl.read_csv(tmp_path / "tables" / "table7_protocol_cost.csv")
    assert t7.height == 4 and t7["Stack"].n_unique() == 4  # one row per stack
    t7_md = md_rows((tmp_path / "tables" / "table7_protocol_cost.md").read_text())
    assert len(t7_md) == 2 + 4  # header, separator, one row per stack
    for name, df in tables.items():
        md = (tmp_path / "tables" / f"{name}.md").read_text()
        assert md.splitlines()[0] == report.CAPTIONS[name].replace("{alpha}", "0.05")
        assert md.splitlines()[3].startswith("| --- |")
        back = pl.read_csv(tmp_path / "tables" / f"{name}.csv", schema=df.schema)
        assert_frame_equal(back, df)
    # the caption names the configured significance level
    report.write_tables(tables, tmp_path / "strict", alpha=0.01)
    assert "α = 0.01 (stats.alpha)" in (tmp_path / "strict/table6_best_stacks.md").read_text()

"""The judge panel (issue 17, item 7, third bullet): every judge scores every run, the panel's
median is the judged score, every judgement is kept, and Krippendorff's alpha measures
agreement across judges and across a judge's repeats. Scripted judges only."""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import polars as pl
import pytest
import yaml
from sklearn.metrics import cohen_kappa_score

from mastif.analysis.inference import MIN_TASKS_FOR_CI
from mastif.analysis.judge_panel import (
    JUDGE_PANEL_SCHEMA,
    NEEDS_JUDGES,
    NEEDS_REPEATS,
    judge_panel_agreement,
    ordinal_alpha,
)
from mastif.core.config import ConfigError
from mastif.evaluation.judge import (
    JUDGED_SCHEMA,
    JudgeSettings,
    repeat_seed,
)
from mastif.execution.experiment import model_spec, parse_config
from mastif.execution.judging import judge_panel_runs, judge_runs
from mastif.providers import Gateway, open_endpoint
from tests.support.judge_frames import judgeable_runs
from tests.support.paths import REPO
from tests.support.runs import runs_table

RUBRIC = REPO / "config" / "rubric.md"

SETTINGS = JudgeSettings("a", 0.0, 256, 2, 1)


def reply(tu: float, ta: float, tcr: float) -> dict[str, Any]:
    return {"TU_score": tu, "TU_rationale": "Understood the goal well.",
            "TA_score": ta, "TA_rationale": "Followed the instructions.",
            "TCR_score": tcr, "TCR_rationale": "Completed most of the task."}  # fmt: skip


def script(tmp: Path, name: str, flight: Any, hotel: Any) -> Path:
    """A scripted judge answering the flight task with ``flight``, the hotel one with
    ``hotel`` (a score triple, or a text that is no judgement)."""

    def content(x: Any) -> Any:
        return reply(*x) if isinstance(x, tuple) else x

    path = tmp / f"{name}.yaml"
    rules = [
        {"when": {"user": "flight"}, "reply": {"content": content(flight)}},
        {"when": {"user": "hotel"}, "reply": {"content": content(hotel)}},
    ]
    path.write_text(yaml.safe_dump({"rules": rules}))
    return path


@pytest.fixture
def two_runs() -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = [(f"r-{t}", t, f"Book a {t} for June 12.", "Done.") for t in ("flight", "hotel")]
    return judgeable_runs(rows, "Travel")


def scores_of(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Panel entries without their token counts."""
    return [{k: v for k, v in e.items() if not k.endswith("_tokens")} for e in entries]


def run_panel(tmp: Path, runs, tasks, scripts: dict[str, Path], repeats: int = 1, primary="a"):
    opened = []

    @contextmanager
    def open_gateway(model_id: str):
        opened.append(model_id)
        spec = model_spec(model_id, {"provider": "scripted", "model": str(scripts[model_id])})
        with open_endpoint(model_id, spec, tmp / "server.log") as endpoint:
            with Gateway(endpoint, retries=0) as gw:
                yield gw

    settings = JudgeSettings(primary, 0.0, 256, 2, 1)
    judged = judge_panel_runs(runs, tasks, RUBRIC, open_gateway, settings, panel=list(scripts),
                              repeats=repeats)  # fmt: skip
    return judged, opened


def test_two_judges_give_the_median_and_every_judgement(tmp_path, two_runs):
    runs, tasks = two_runs
    scripts = {
        "a": script(tmp_path, "a", (1.0, 0.7, 0.5), (0.3, 0.3, 0.0)),
        "b": script(tmp_path, "b", (0.7, 0.7, 1.0), (0.3, 0.5, 0.0)),
    }
    judged, opened = run_panel(tmp_path, runs, tasks, scripts)
    assert opened == ["a", "b"]  # one endpoint at a time, the primary judge first
    assert judged.schema == pl.Schema(JUDGED_SCHEMA) and judged.height == 2
    flight, hotel = judged.rows(named=True)
    assert (flight["TU"], flight["TA"], flight["TCR"]) == (0.85, 0.7, 0.75)
    assert (hotel["TU"], hotel["TA"], hotel["TCR"]) == (0.3, 0.4, 0.0)
    assert flight["judge_status"] == "ok" and flight["judge_model"] == "a"
    assert flight["TU_rationale"] == "Understood the goal well."
    assert json.loads(flight["judge_raw_reply"])["TU_score"] == 1.0  # judge a's reply
    assert scores_of(flight["judge_panel"]) == [
        {"judge_model": "a", "repeat": 0, "status": "ok", "TU": 1.0, "TA": 0.7, "TCR": 0.5},
        {"judge_model": "b", "repeat": 0, "status": "ok", "TU": 0.7, "TA": 0.7, "TCR": 1.0},
    ]
    # each judgement's own tokens; the row's are their sum
    for k in ("prompt_tokens", "completion_tokens"):
        own = [e[k] for e in flight["judge_panel"]]
        assert all(n > 0 for n in own) and flight[f"judge_{k}"] == sum(own)


def test_a_judge_failing_everywhere_leaves_the_others_scores(tmp_path, two_runs):
    runs, tasks = two_runs
    scripts = {
        "a": script(tmp_path, "a", "no judgement here", "nor here"),
        "b": script(tmp_path, "b", (0.7, 0.5, 1.0), (0.3, 0.5, 0.0)),
    }
    judged, _ = run_panel(tmp_path, runs, tasks, scripts)
    flight, hotel = judged.rows(named=True)
    assert (flight["TU"], flight["TA"], flight["TCR"]) == (0.7, 0.5, 1.0)
    assert (hotel["TU"], hotel["TA"], hotel["TCR"]) == (0.3, 0.5, 0.0)
    # the row shows the judgement that counts: b's, since the primary a failed
    assert flight["judge_status"] == "ok" and flight["judge_model"] == "b"
    assert flight["judge_error"] is None and flight["TCR_rationale"]
    a = scores_of(flight["judge_panel"])[0]
    assert a == {"judge_model": "a", "repeat": 0, "status": "judge_failed",
                 "TU": None, "TA": None, "TCR": None}  # fmt: skip


def test_every_judge_failing_gives_judge_failed_and_null_scores(tmp_path, two_runs):
    runs, tasks = two_runs
    scripts = {
        "a": script(tmp_path, "a", "no", "no"),
        "b": script(tmp_path, "b", "nope", "nope"),
    }
    judged, _ = run_panel(tmp_path, runs, tasks, scripts)
    for row in judged.rows(named=True):
        assert row["judge_status"] == "judge_failed" and row["judge_model"] == "a"
        assert row["TU"] is None and row["TA"] is None and row["TCR"] is None
        assert [e["status"] for e in row["judge_panel"]] == ["judge_failed"] * 2
        assert row["judge_attempts"] == 2 and "unparseable" in row["judge_error"]


def test_repeats_sample_with_seeds_per_run_and_repeat(tmp_path, two_runs):
    runs, tasks = two_runs
    scripts = {"a": script(tmp_path, "a", (1.0, 0.7, 0.5), (0.3, 0.3, 0.0))}
    judged, _ = run_panel(tmp_path, runs, tasks, scripts, repeats=3)
    flight = judged.row(0, named=True)
    assert [(e["judge_model"], e["repeat"]) for e in flight["judge_panel"]] == [
        ("a", 0), ("a", 1), ("a", 2)
    ]  # fmt: skip
    assert flight["judge_seed"] == 1  # repeat 0 samples with the configured seed
    assert (flight["TU"], flight["TCR"]) == (1.0, 0.5)
    assert repeat_seed(1, "r-flight", 0) == 1
    assert repeat_seed(1, "r-flight", 1) != repeat_seed(1, "r-flight", 2)
    assert repeat_seed(1, "r-flight", 1) != repeat_seed(1, "r-hotel", 1)
    assert 0 <= repeat_seed(7, "x", 5) < 2**31
    # tokens are summed over every judgement (3 repeats of one judge)
    one, _ = run_panel(tmp_path, runs, tasks, scripts, repeats=1)
    assert flight["judge_prompt_tokens"] == 3 * one.row(0, named=True)["judge_prompt_tokens"]


def test_the_single_judge_path_is_the_one_judge_behind_the_gateway(tmp_path, two_runs):
    runs, tasks = two_runs
    path = script(tmp_path, "a", (1.0, 0.7, 0.5), (0.3, 0.3, 0.0))
    spec = model_spec("a", {"provider": "scripted", "model": str(path)})
    with open_endpoint("a", spec, tmp_path / "server.log") as endpoint:
        with Gateway(endpoint, retries=0) as gw:
            judged = judge_runs(runs, tasks, RUBRIC, gw, SETTINGS)
    flight = judged.row(0, named=True)
    assert (flight["TU"], flight["TA"], flight["TCR"]) == (1.0, 0.7, 0.5)
    assert scores_of(flight["judge_panel"]) == [
        {"judge_model": "a", "repeat": 0, "status": "ok", "TU": 1.0, "TA": 0.7, "TCR": 0.5}
    ]


# ----------------------------------------------------------------- agreement


def test_ordinal_alpha_is_krippendorffs():
    rng = np.random.default_rng(3)
    anchors = np.array([0.0, 0.3, 0.5, 0.7, 1.0])
    truth = rng.integers(0, 5, 30)
    matrix = np.stack([anchors[np.clip(truth + rng.integers(-1, 2, 30), 0, 4)] for _ in range(3)])
    matrix[1, [2, 7]] = np.nan  # missing judgements
    matrix[[0, 2], 11] = np.nan  # a run only judge 1 scored: not pairable
    n, alpha, note = ordinal_alpha(matrix)
    expected = krippendorff.alpha(reliability_data=matrix, value_domain=list(anchors),
                                  level_of_measurement="ordinal")  # fmt: skip
    assert n == 29 and note is None
    assert alpha == pytest.approx(expected) and 0 < alpha < 1
    # hand-computed: perfect agreement is 1; undefined with one score throughout
    assert ordinal_alpha(np.array([[0.0, 0.5, 1.0], [0.0, 0.5, 1.0]]))[1] == pytest.approx(1.0)
    assert ordinal_alpha(np.array([[0.7, 0.7], [0.7, 0.7]]))[1:] == (
        None, "undefined: one score throughout (no disagreement expected by chance)"
    )  # fmt: skip
    assert ordinal_alpha(np.array([[0.7, np.nan], [np.nan, 0.3]]))[:2] == (0, None)
    # hand-computed, two coders, values 0 and 1 only (two categories: ordinal = nominal):
    # pairs (0,0), (0,1), (1,1): D_o = 2 / 6 mismatching pairable values, n = 6, n_0 = 3,
    # n_1 = 3: D_e = 2 * 3 * 3 / (6 * 5) = 0.6; alpha = 1 - (2/6) / 0.6 = 4/9
    assert ordinal_alpha(np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 1.0]]))[1] == pytest.approx(4 / 9)


def judged_table(panel: dict[str, list[list[tuple[float, float, float] | None]]], n_runs: int):
    """A judged table whose judge_panel holds ``panel[judge][repeat][run]`` (None: failed)."""
    rows = []
    for i in range(n_runs):
        entries = [
            {"judge_model": j, "repeat": r, "status": "ok" if reps[r][i] else "judge_failed",
             **dict(zip(("TU", "TA", "TCR"), reps[r][i] or (None, None, None), strict=True))}
            for j, reps in panel.items()
            for r in range(len(reps))
        ]  # fmt: skip
        rows.append({"run_id": f"r{i}", "judge_panel": entries})
    return pl.DataFrame(
        rows, schema={"run_id": pl.String, "judge_panel": JUDGED_SCHEMA["judge_panel"]}
    )


def checked_runs(success: list[bool | None]) -> pl.DataFrame:
    """Run i on task i, with the i-th check's outcome and no judge verdict."""
    return runs_table(
        ({"run_id": f"r{i}", "task_id": f"t{i}", "success": ok, "judge_success": None}
         for i, ok in enumerate(success)),
        schema={"run_id": pl.String, **{k: pl.String for k in ("model", "protocol", "framework")},
                "task_id": pl.String, "repeat": pl.Int64, "status": pl.String,
                "success": pl.Boolean, "judge_success": pl.Boolean},
    )  # fmt: skip


def test_agreement_across_judges_with_checks_and_across_repeats():
    scores = [(1.0, 1.0, 1.0), (0.7, 0.7, 0.7), (0.0, 0.3, 0.0), (0.3, 0.3, 0.0),
              (1.0, 0.5, 1.0), (0.5, 0.0, 0.3)]  # fmt: skip
    other = [(1.0, 0.7, 1.0), (0.7, 0.7, 0.5), (0.3, 0.3, 0.0), (0.0, 0.3, 0.3),
             (1.0, 0.5, 0.7), None]  # fmt: skip
    success = [True, True, False, False, True, False]
    judged = judged_table({"a": [scores, scores], "b": [other, list(reversed(other))]}, 6)
    out = judge_panel_agreement(judged, checked_runs(success), judges=["a", "b"], repeats=2,
                                resamples=200)  # fmt: skip
    assert out.schema == pl.Schema(JUDGE_PANEL_SCHEMA)
    inter = out.filter(kind="inter_judge").sort("criterion")
    assert inter["criterion"].to_list() == ["TA", "TCR", "TU"]
    for row in inter.iter_rows(named=True):
        k = ("TU", "TA", "TCR").index(row["criterion"])
        m = np.array([[s[k] for s in scores], [np.nan if s is None else s[k] for s in other]])
        expected = krippendorff.alpha(reliability_data=m[:, :5], level_of_measurement="ordinal",
                                      value_domain=[0.0, 0.3, 0.5, 0.7, 1.0])  # fmt: skip
        assert row["n_runs"] == 5 and row["value"] == pytest.approx(expected)
    # judge a's verdicts (TCR >= 0.7) match every check; b's (repeat 0) miss run 1's, and
    # b has no verdict on run 5 (its judgement failed)
    check = out.filter(kind="judge_vs_check").sort("judge_model", "statistic")
    a_acc, a_kappa, b_acc, b_kappa = check.rows(named=True)
    assert (a_acc["value"], a_kappa["value"], a_kappa["n_runs"]) == (1.0, 1.0, 6)
    b_verdicts = [s[2] >= 0.7 for s in other[:5]]
    assert b_acc["value"] == pytest.approx(0.8) and b_kappa["n_runs"] == 5
    assert b_kappa["value"] == pytest.approx(cohen_kappa_score(success[:5], b_verdicts))
    # 6 tasks < MIN_TASKS_FOR_CI: the interval columns stay, null, and the note says why
    assert a_kappa["criterion"] == "TCR"
    for row in (a_acc, a_kappa, b_acc, b_kappa):
        assert row["ci_low"] is None and row["ci_high"] is None
        assert f"n_tasks = {row['n_runs']} < {MIN_TASKS_FOR_CI}" in row["note"]
    retest = out.filter(kind="test_retest").sort("judge_model", "criterion")
    a_rows = retest.filter(judge_model="a")
    assert a_rows["value"].to_list() == pytest.approx([1.0, 1.0, 1.0])  # identical repeats
    b_tcr = retest.filter(judge_model="b", criterion="TCR").row(0, named=True)
    m = np.array([[np.nan if s is None else s[2] for s in other],
                  [np.nan if s is None else s[2] for s in reversed(other)]])  # fmt: skip
    pairable = np.isfinite(m).all(0)
    expected = krippendorff.alpha(reliability_data=m[:, pairable], level_of_measurement="ordinal",
                                  value_domain=[0.0, 0.3, 0.5, 0.7, 1.0])  # fmt: skip
    assert b_tcr["n_runs"] == 4 and b_tcr["value"] == pytest.approx(expected)
    assert b_tcr["value"] < 0.9  # a shuffled repeat disagrees


def test_judge_vs_check_intervals_from_min_tasks_for_ci_on():
    n = MIN_TASKS_FOR_CI
    success = [i % 2 == 0 for i in range(n)]
    scores = [(1.0, 1.0, 1.0 if ok != (i == 3) else 0.0) for i, ok in enumerate(success)]
    judged = judged_table({"a": [scores]}, n)
    out = judge_panel_agreement(judged, checked_runs(success), resamples=200)
    for stat in ("kappa", "accuracy"):
        row = out.filter(kind="judge_vs_check", statistic=stat).row(0, named=True)
        assert row["ci_low"] is not None and row["ci_low"] <= row["value"] <= row["ci_high"]
    short = judge_panel_agreement(judged_table({"a": [scores[:-1]]}, n - 1),
                                  checked_runs(success[:-1]), resamples=200)  # fmt: skip
    assert short.filter(kind="judge_vs_check")["ci_low"].is_null().all()


def test_one_judge_one_repeat_says_what_is_needed():
    scores = [(1.0, 1.0, 1.0), (0.0, 0.3, 0.0)]
    out = judge_panel_agreement(judged_table({"a": [scores]}, 2), checked_runs([True, None]))
    assert out.schema == pl.Schema(JUDGE_PANEL_SCHEMA)
    inter = out.filter(kind="inter_judge")
    assert inter.height == 3 and inter["value"].is_null().all()
    assert set(inter["note"]) == {NEEDS_JUDGES}
    retest = out.filter(kind="test_retest")
    assert retest.height == 3 and retest["value"].is_null().all()
    assert set(retest["note"]) == {NEEDS_REPEATS}
    kappa = out.filter(kind="judge_vs_check", statistic="kappa").row(0, named=True)
    # one run with a check: kappa undefined, said so, never a number
    assert kappa["n_runs"] == 1 and kappa["value"] is None and "insufficient" in kappa["note"]
    assert "kappa undefined" in kappa["note"] and "validated" not in kappa["note"]
    accuracy = out.filter(kind="judge_vs_check", statistic="accuracy").row(0, named=True)
    # one run, one class: the accuracy (1 by construction) is not assessable, never 1.0
    assert accuracy["value"] is None and "not assessable: one class only" in accuracy["note"]
    assert "kappa" not in accuracy["note"]


def test_empty_input_keeps_the_schema():
    empty = pl.DataFrame(schema=JUDGED_SCHEMA)
    out = judge_panel_agreement(empty, checked_runs([]), judges=["a"], repeats=1)
    assert out.schema == pl.Schema(JUDGE_PANEL_SCHEMA) and out.height == 8  # 3 + 2 + 3


# ------------------------------------------------------------------- config


def test_judge_model_must_be_one_of_the_panel(base_config):
    cfg = copy.deepcopy(base_config)
    judge = cfg["judge"]["model"]
    cfg["judge"]["models"] = [m for m in cfg["models"] if m != judge][:1]
    with pytest.raises(ConfigError, match=f"judge.model '{judge}' is not one of judge.models"):
        parse_config(cfg)
    cfg["judge"]["models"] = ["nope", judge]
    with pytest.raises(ConfigError, match="judge.models.0: unknown model id 'nope'"):
        parse_config(cfg)
    other = next(m for m in cfg["models"] if m != judge)
    cfg["judge"]["models"] = [other, judge]
    cfg["judge"]["repeats"] = 2
    parsed = parse_config(cfg)
    assert parsed.judge.panel == (other, judge) and parsed.judge.repeats == 2
    assert judge in parsed.models_in_use() and other in parsed.models_in_use()
    default = parse_config(copy.deepcopy(base_config)).judge
    assert default.panel == (judge,) and default.models is None and default.repeats == 1

"""Metrics of Section 3 on hand-built tables with hand-computed expected values."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import polars as pl
import pytest

from mastif.core.trace import LLMCall, runs_to_table
from mastif.evaluation.measures import (
    ct,
    empty_value_set_share,
    model_seconds,
    pareto_front,
    protocol_kib,
    protocol_share,
    svs,
    tcr,
    tusr,
    verbosity,
)
from mastif.evaluation.metrics import (
    RUN_METRICS_SCHEMA,
    STACK_METRICS_SCHEMA,
    TIME_PARTS,
    run_metrics,
    stack_metrics,
)
from tests.support.metric_tables import (
    JUDGED,
    RUNS,
    VALUES,
    judged_table,
    llm_call,
    run_trace,
)


def _row(df: pl.DataFrame, key: str, value: str) -> dict[str, Any]:
    rows = df.filter(pl.col(key) == value).to_dicts()
    assert len(rows) == 1
    return rows[0]


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def test_run_metrics_per_run_values() -> None:
    t = run_metrics(RUNS, JUDGED, VALUES)
    assert t.schema == pl.Schema(RUN_METRICS_SCHEMA)
    assert t.height == 5
    r1, r2, r3, r4 = (_row(t, "run_id", r) for r in ("r1", "r2", "r3", "r4"))
    assert (r1["CT"], r1["V"], r1["n_tool_calls"], r1["n_tool_ok"], r1["TUSR"]) == (
        10.0,
        100,
        2,
        2,
        1.0,
    )
    # no tool calls: TUSR undefined, not 0
    assert (r2["n_tool_calls"], r2["n_tool_ok"], r2["TUSR"], r2["status"]) == (0, 0, None, "error")
    # judge failed: scores nulled even though the judged table carried numbers
    assert (r3["TU"], r3["TA"], r3["TCR"], r3["judge_status"]) == (None, None, None, "judge_failed")
    assert (r3["n_tool_calls"], r3["n_tool_ok"], r3["TUSR"]) == (4, 1, 0.25)
    # hallucinated tool name recorded with ok=false counts as a failed call
    assert (r4["n_tool_calls"], r4["n_tool_ok"], r4["TUSR"]) == (1, 0, 0.0)
    # V is completion tokens only, not prompt tokens (999 in every run)
    assert r4["V"] == 50
    assert (r1["IVS"], r1["IVS_prompt_output"], r1["IVS_reasoning"]) == (0.5, 0.2, None)
    assert (r1["domain"], r1["level"], r1["task_id"]) == ("Travel", "easy", "t-r1")
    # protocol cost: KiB = (1024 + 2048) / 1024; model_s = 1.0 + 2.0 (sum of the calls'
    # upstream seconds; their queueing is not model time)
    assert (r1["protocol_messages"], r1["protocol_calls"], r1["protocol_kib"]) == (10, 2, 3.0)
    assert (r1["protocol_s"], r1["model_s"]) == (0.5, 3.0)
    assert (r2["protocol_kib"], r2["protocol_s"], r2["model_s"]) == (0.5, 0.25, 3.0)
    r5 = _row(t, "run_id", "r5")
    # no protocol (standard): all zero; no LLM call: 0 s in the model, not null
    assert (r5["protocol_messages"], r5["protocol_calls"], r5["protocol_kib"]) == (0, 0, 0.0)
    assert (r5["protocol_s"], r5["model_s"]) == (0.0, 0.0)


@pytest.mark.parametrize("which", ["judged", "values"])
def test_run_metrics_missing_run_is_loud(which: str) -> None:
    judged = JUDGED.filter(pl.col("run_id") != "r2") if which == "judged" else JUDGED
    values = VALUES.filter(pl.col("run_id") != "r2") if which == "values" else VALUES
    with pytest.raises(ValueError, match=rf"missing from {which}.*r2"):
        run_metrics(RUNS, judged, values)


def test_run_metrics_extra_or_duplicate_run_is_loud() -> None:
    extra = pl.concat([VALUES, VALUES.head(1).with_columns(run_id=pl.lit("zz"))])
    with pytest.raises(ValueError, match="zz"):
        run_metrics(RUNS, JUDGED, extra)
    dup = pl.concat([JUDGED, JUDGED.head(1)])
    with pytest.raises(ValueError, match="duplicate.*r1"):
        run_metrics(RUNS, dup, VALUES)


def test_stack_metrics_hand_computed() -> None:
    s = stack_metrics(run_metrics(RUNS, JUDGED, VALUES))
    assert s.schema == pl.Schema(STACK_METRICS_SCHEMA)
    assert s["model"].to_list() == ["mA", "mB", "mC"]
    a = _row(s, "model", "mA")
    expected_a = {
        "n_runs": 3,
        "n_judged": 2,
        "n_judge_failed": 1,
        "n_ok": 2,
        "n_timeout": 0,
        "n_error": 1,
        "timeout_share": 0.0,
        "error_share": 1 / 3,
        "n_usage_missing": 0,
        # r3's judgement failed: its scores are unknown, so are the means over the runs
        # (never (1.0 + 0.5) / 2 over the judged ones), with n_judge_failed beside them
        "TU_mean": None,
        "TA_mean": None,
        "TCR_mean": None,
        "TCR_std": None,
        # CT and V over the completed r1 and r3 only; the errored r2 is counted, not averaged
        "CT_mean": 20.0,  # (10 + 30) / 2
        "CT_std": math.sqrt(200.0),  # sample σ of {10, 30}
        "n_CT": 2,
        # KM: r2 errored, never completes (in every risk set): S(10) = 2/3, S(30) = 1/3
        "CT_km_median": 30.0,
        "V_mean": 200.0,  # (100 + 300) / 2
        "V_std": math.sqrt(20000.0),  # sample σ of {100, 300}
        "n_V": 2,
        "n_tool_calls": 6,
        "TUSR": 0.5,  # pooled (2 + 1) / (2 + 4); the mean of per-run rates would be 0.625
        "TUSR_std": 0.75 / math.sqrt(2),  # σ of {1.0, 0.25}; r2 has no rate
        # values: r1 and r3 (r2 errored: no final answer, its IVS 0.3 is left out)
        "SVS": 0.3,  # (0.5 + 0.1) / 2
        "SVS_std": math.sqrt(0.08),  # sample σ of {0.5, 0.1}
        "SVS_prompt_output": 0.2,  # r1 only: r3 has none
        "SVS_reasoning": 0.4,  # r3 only: r2's 0.6 would have raised it to 0.5
        "n_no_final_answer": 1,
        "n_IVS_null": 0,
        "IVS_null_share": 0.0,
        "empty_value_set_share": 4 / 9,  # (1 + 3) / (4 + 5), r2's sets left out
        "pareto_optimal": False,  # r2 errored: a stack with a failed run is not on the front
        # protocol cost: means over all 3 runs, the errored r2 included
        "protocol_messages": 10.0,  # (10 + 4 + 16) / 3
        "protocol_calls": 2.0,  # (2 + 0 + 4) / 3
        "protocol_kib": 4.0,  # (3072 + 512 + 8704) / 1024 / 3 = (3 + 0.5 + 8.5) / 3
        "protocol_s": 1.0,  # (0.5 + 0.25 + 2.25) / 3
        "model_s": 7.0,  # (3 + 3 + 15) / 3
        "protocol_share": 0.05,  # 1.0 / mean wall time of all 3 runs (10 + 20 + 30) / 3
    }
    for k, v in expected_a.items():
        assert _close(a[k], v), (k, a[k], v)
    # per threshold over r1 and r3: 0.25 -> SVS (0.6 + 0.2) / 2, empty (0 + 1) / 9;
    # 0.45 -> SVS 0.4 (r3 null), empty (2 + 5) / 9
    sens = a["SVS_sensitivity"]
    assert [e["threshold"] for e in sens] == [0.25, 0.45]
    assert _close(sens[0]["SVS"], 0.4) and _close(sens[0]["empty_value_set_share"], 1 / 9)
    assert _close(sens[1]["SVS"], 0.4) and _close(sens[1]["empty_value_set_share"], 7 / 9)
    b = _row(s, "model", "mB")
    assert (b["n_runs"], b["n_judged"], b["n_judge_failed"], b["n_ok"]) == (1, 1, 0, 1)
    assert (b["CT_mean"], b["CT_km_median"], b["n_CT"], b["n_V"]) == (5.0, 5.0, 1, 1)
    # one run: σ undefined
    assert (b["TCR_std"], b["CT_std"], b["V_std"], b["TUSR_std"], b["SVS_std"]) == (None,) * 5
    assert (b["TCR_mean"], b["TUSR"], b["n_tool_calls"], b["pareto_optimal"]) == (0.3, 0.0, 1, True)
    # no protocol traffic: zero cost and a zero share, not null
    assert (b["protocol_messages"], b["protocol_calls"], b["protocol_kib"]) == (0.0, 0.0, 0.0)
    assert (b["protocol_s"], b["model_s"], b["protocol_share"]) == (0.0, 2.5, 0.0)
    assert (b["n_no_final_answer"], b["n_IVS_null"], b["IVS_null_share"]) == (0, 0, 0.0)
    assert b["empty_value_set_share"] == 0.0 and b["SVS_sensitivity"] is None  # none recorded
    c = _row(s, "model", "mC")
    # no calls at all: TUSR null; IVS all null: SVS null; same TCR as B but slower and wordier
    assert (c["TUSR"], c["n_tool_calls"], c["SVS"], c["n_timeout"]) == (None, 0, None, 1)
    # its only run timed out: no completed run to average, no KM median (< half completed)
    assert (c["CT_mean"], c["V_mean"], c["n_CT"], c["n_V"], c["CT_km_median"]) == (
        None,
        None,
        0,
        0,
        None,
    )
    assert (c["timeout_share"], c["error_share"]) == (1.0, 0.0)
    # its only run timed out: no answered run, so the shares are unknown, not 0
    assert (c["n_no_final_answer"], c["n_IVS_null"], c["IVS_null_share"]) == (1, 0, None)
    assert c["empty_value_set_share"] is None and c["SVS_sensitivity"] is None
    assert c["pareto_optimal"] is False


def test_stack_metrics_null_ivs_counted_not_scored() -> None:
    # r3 answered but no pair had a value on either side: IVS null, counted in n_IVS_null
    values = VALUES.with_columns(
        IVS=pl.when(pl.col("run_id") == "r3").then(None).otherwise(pl.col("IVS"))
    )
    a = _row(stack_metrics(run_metrics(RUNS, JUDGED, values)), "model", "mA")
    assert (a["SVS"], a["SVS_std"], a["n_IVS_null"], a["IVS_null_share"]) == (0.5, None, 1, 0.5)


def test_run_metrics_values_table_without_counts() -> None:
    # a values table written before the counts existed: has_final_answer from the status,
    # the counts unknown (null), and SVS still only over the runs with a final answer
    old = VALUES.select("run_id", "IVS", "IVS_prompt_output", "IVS_reasoning")
    t = run_metrics(RUNS, JUDGED, old)
    assert t.schema == pl.Schema(RUN_METRICS_SCHEMA)
    assert t.sort("run_id")["has_final_answer"].to_list() == [True, False, True, True, False]
    assert t["n_value_sets"].null_count() == t.height
    a = _row(stack_metrics(t), "model", "mA")
    assert _close(a["SVS"], 0.3) and a["empty_value_set_share"] is None
    assert a["SVS_sensitivity"] is None


def test_empty_value_set_share_pools_sets() -> None:
    df = pl.DataFrame({"n_empty_value_sets": [1, 3, None], "n_value_sets": [2, 6, None]})
    assert df.select(empty_value_set_share()).item() == 0.5  # (1 + 3) / (2 + 6)
    assert df.tail(1).select(empty_value_set_share()).item() is None


def test_empty_inputs_keep_schemas() -> None:
    runs = RUNS.head(0)
    t = run_metrics(runs, JUDGED.head(0), VALUES.head(0))
    assert t.height == 0 and t.schema == pl.Schema(RUN_METRICS_SCHEMA)
    s = stack_metrics(t)
    assert s.height == 0 and s.schema == pl.Schema(STACK_METRICS_SCHEMA)


def test_equation_functions() -> None:
    df = pl.DataFrame(
        {
            "TCR": [1.0, 0.0, 0.3],
            "judge_status": ["ok", "ok", "ok"],
            "status": ["ok", "ok", "timeout"],
            "CT": [1.0, 2.0, 6.0],
            "V": [10, 20, 60],
            "n_tool_ok": [0, 3, 0],
            "n_tool_calls": [0, 4, 0],
            "IVS": [None, 0.2, 0.4],
        }
    )
    out = df.select(
        tcr().alias("tcr"),
        ct().alias("ct"),
        verbosity().alias("v"),
        tusr().alias("tusr"),
        svs().alias("svs"),
    ).row(0, named=True)
    # CT and V over the two completed runs: (1 + 2) / 2 and (10 + 20) / 2; the timeout is out
    assert _close(out["tcr"], 1.3 / 3) and out["ct"] == 1.5 and out["v"] == 15.0
    # a failed judgement (its stale 0.0 nulled by run_metrics): TCR unknown, not (1 + 0.3) / 2
    failed = df.with_columns(
        TCR=pl.Series([1.0, None, 0.3]), judge_status=pl.Series(["ok", "judge_failed", "ok"])
    )
    assert failed.select(tcr()).item() is None
    assert out["tusr"] == 0.75 and _close(out["svs"], 0.3)
    no_calls = df.filter(pl.col("n_tool_calls") == 0).select(tusr()).item()
    assert no_calls is None


@pytest.mark.parametrize(
    ("runs", "median"),
    [
        # the brief's case: S(10) = 2/3, S(20) = 1/3 -> 20 s (a mean would be 43.3 s)
        ([(10.0, "ok"), (20.0, "ok"), (100.0, "timeout")], 20.0),
        # a timeout can only raise it: the 10 s run timed out instead -> S(20) = 2/3, S(30) = 1/3
        ([(20.0, "ok"), (30.0, "ok"), (10.0, "ok")], 20.0),
        ([(20.0, "ok"), (30.0, "ok"), (100.0, "timeout")], 30.0),
        # exactly half completed: S(20) = 2/4 = 0.5 reaches the median
        ([(10.0, "ok"), (20.0, "ok"), (100.0, "timeout"), (100.0, "timeout")], 20.0),
        # fewer than half completed: S stays at 2/3 > 0.5 -> unknown, never the budget
        ([(10.0, "ok"), (100.0, "timeout"), (100.0, "timeout")], None),
        # a timeout before a completion is censored there: S(10) = 3/4, then 3 at risk at 20
        # minus the censored one = 2 at risk: S(20) = 3/4 * 1/2 = 3/8 -> 20 s
        ([(10.0, "ok"), (15.0, "timeout"), (20.0, "ok"), (30.0, "ok")], 20.0),
        # an error never completes (at risk throughout): S(10) = 4/5, S(20) = 3/5, S(30) = 2/5
        # -> 30 s; left out, or censored at its 5 s, it would be 20 s (S(20) = 2/4)
        ([(5.0, "error"), (10.0, "ok"), (20.0, "ok"), (30.0, "ok"), (40.0, "ok")], 30.0),
        ([(10.0, "timeout")], None),
        ([], None),
    ],
)
def test_km_median_time_hand_computed(runs: list[tuple[float, str]], median: float | None):
    from mastif.evaluation.measures import km_median_time

    times, statuses = [t for t, _ in runs], [s for _, s in runs]
    assert _close(km_median_time(times, statuses), median)


def _stack_of(
    model: str, runs: list[tuple[str, float, int | None, float]], judge_failed: Sequence[int] = ()
) -> pl.DataFrame:
    """Run metrics of one stack from (status, wall seconds, completion tokens, TCR); the
    judgements of the runs at positions ``judge_failed`` failed (their TCR a stale score)."""
    traces = [
        run_trace(f"{model}{i}", model, status, wall, tokens, [])  # type: ignore[arg-type]
        for i, (status, wall, tokens, _) in enumerate(runs)
    ]
    judged = judged_table(
        [
            (f"{model}{i}", model, "judge_failed" if i in judge_failed else "ok", 0.7, 0.7, tcr_)
            for i, (*_, tcr_) in enumerate(runs)
        ]
    )
    values = pl.DataFrame(
        {"run_id": judged["run_id"], "IVS": None, "IVS_prompt_output": None, "IVS_reasoning": None}
    )
    return run_metrics(pl.from_arrow(runs_to_table(traces)), judged, values)  # type: ignore[arg-type]


def test_a_stack_fast_only_because_it_timed_out_is_not_on_the_front() -> None:
    # slow: both runs complete in 50 s with 500 tokens. cut: one run completes in 10 s with 100
    # tokens, the other timed out at 100 s after 20 tokens. Over all runs cut's V (60) beats
    # slow's; over completed runs cut (10 s, 100 tokens) would dominate slow outright.
    table = pl.concat(
        [
            _stack_of("slow", [("ok", 50.0, 500, 0.7), ("ok", 50.0, 500, 0.7)]),
            _stack_of("cut", [("ok", 10.0, 100, 0.7), ("timeout", 100.0, 20, 0.7)]),
        ]
    )
    s = stack_metrics(table)
    cut, slow = _row(s, "model", "cut"), _row(s, "model", "slow")
    assert (cut["CT_mean"], cut["V_mean"], cut["n_CT"], cut["n_V"]) == (10.0, 100.0, 1, 1)
    assert (cut["n_ok"], cut["n_timeout"], cut["timeout_share"]) == (1, 1, 0.5)
    assert cut["CT_km_median"] == 10.0  # S(10) = 1/2: half completed
    assert cut["pareto_optimal"] is False
    assert slow["pareto_optimal"] is True  # not dominated by the ineligible cut
    # without the eligibility rule the same numbers would put cut on the front, slow off it
    assert pareto_front(s).to_list() == [True, False]  # sorted by model: cut, slow


def test_a_failed_judgement_neither_raises_tcr_nor_moves_a_stack_onto_the_front() -> None:
    # lucky: one run judged 0.5, the other's judgement failed (its stale 0.0 is no score).
    # Dropping the failed one, as before, gave lucky TCR 0.50 (0.25 had the judge scored the
    # 0.0), and with its 10 s and 100 tokens it dominated steady (0.4, 20 s, 200 tokens).
    table = pl.concat(
        [
            _stack_of("lucky", [("ok", 10.0, 100, 0.5), ("ok", 10.0, 100, 0.0)], judge_failed=[1]),
            _stack_of("steady", [("ok", 20.0, 200, 0.4), ("ok", 20.0, 200, 0.4)]),
        ]
    )
    s = stack_metrics(table)
    lucky, steady = _row(s, "model", "lucky"), _row(s, "model", "steady")
    # unknown, not raised: the mean over runs with an unknown score is unknown
    assert (lucky["TCR_mean"], lucky["TU_mean"], lucky["TA_mean"]) == (None, None, None)
    assert lucky["TCR_std"] is None
    assert (lucky["n_judged"], lucky["n_judge_failed"]) == (1, 1)
    # all its runs completed, but it is not eligible and dominates nobody
    assert lucky["n_ok"] == lucky["n_runs"] == 2
    assert lucky["pareto_optimal"] is False
    assert steady["pareto_optimal"] is True and _close(steady["TCR_mean"], 0.4)
    # with TCR 0.5 from the judged run alone lucky would dominate steady
    raised = s.with_columns(
        pl.when(pl.col("model") == "lucky").then(0.5).otherwise("TCR_mean").alias("TCR_mean")
    )
    assert pareto_front(raised).to_list() == [True, False]  # sorted by model: lucky, steady


def test_missing_usage_is_null_v_and_cost_and_counted() -> None:
    table = run_metrics(
        pl.from_arrow(
            runs_to_table(
                [
                    run_trace("u1", "m", "ok", 10.0, 100, []),
                    run_trace("u2", "m", "ok", 20.0, None, []),  # type: ignore[arg-type]
                    run_trace("u3", "m", "timeout", 30.0, None, []),  # type: ignore[arg-type]
                ]
            )
        ),  # type: ignore[arg-type]
        judged_table([(r, "m", "ok", 0.7, 0.7, 0.7) for r in ("u1", "u2", "u3")]),
        pl.DataFrame(
            {
                "run_id": ["u1", "u2", "u3"],
                "IVS": None,
                "IVS_prompt_output": None,
                "IVS_reasoning": None,
            }
        ),
        prices={"m": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
    ).sort("run_id")
    assert table["V"].to_list() == [100, None, None]
    assert table["cost_usd"].to_list() == [(999 * 1.0 + 100 * 2.0) / 1e6, None, None]
    s = stack_metrics(table).row(0, named=True)
    assert s["n_usage_missing"] == 2  # runs of any status whose V is unknown
    assert (s["V_mean"], s["n_V"], s["V_std"]) == (100.0, 1, None)  # u2 left out, not 0
    assert (s["CT_mean"], s["n_CT"]) == (15.0, 2)  # its time is known: u1 and u2
    assert s["cost_usd_mean"] == table["cost_usd"][0]  # over the runs whose cost is known
    assert s["cost_usd_total"] is None  # a sum with two unknown summands is unknown


def test_model_seconds_is_upstream_time_cached_calls_none_unknown_null() -> None:
    cached = LLMCall("agent", 0.0, 0.01, 1, 1, 200, None, 1, cached=True, upstream_s=0.0,
                     queue_s=0.0, backoff_s=0.0)  # fmt: skip
    unrecorded = LLMCall("agent", 0.0, 4.0, 1, 1, 200, None, 1)  # upstream_s not recorded
    calls = [[llm_call(2.0), cached], [llm_call(2.0), unrecorded], []]
    table = pl.from_arrow(
        runs_to_table([run_trace(f"r{i}", "m", "ok", 10.0, 1, [], latencies=()) for i in range(3)])
    )
    table = table.with_columns(
        pl.Series("llm_calls", [[c.__dict__ for c in cs] for cs in calls],
                  dtype=table.schema["llm_calls"])
    )  # fmt: skip
    assert table.select(model_seconds()).to_series().to_list() == [2.0, None, 0.0]


def test_protocol_cost_functions() -> None:
    per_run = RUNS.select(protocol_kib().alias("kib"), model_seconds().alias("model_s"))
    assert per_run["kib"].to_list() == [3.0, 0.5, 8.5, 0.0, 0.0]
    assert per_run["model_s"].to_list() == [3.0, 3.0, 15.0, 2.5, 0.0]
    df = pl.DataFrame({"protocol_s": [1.0, 3.0], "CT": [10.0, 30.0]})
    # mean protocol seconds / mean wall seconds: (4 / 2) / (40 / 2)
    assert _close(df.select(protocol_share()).item(), 0.1)
    skewed = pl.DataFrame({"protocol_s": [1.0, 0.0], "CT": [2.0, 98.0]})
    assert _close(skewed.select(protocol_share()).item(), 0.01)  # not (0.5 + 0) / 2
    zero_wall = pl.DataFrame({"protocol_s": [0.0], "CT": [0.0]})
    assert zero_wall.select(protocol_share()).item() is None  # share of no time: undefined
    # a run whose protocol seconds are unknown leaves both means: 1 / 10, not 1 / ((10+90)/2)
    unknown = pl.DataFrame({"protocol_s": [1.0, None], "CT": [10.0, 90.0]})
    assert _close(unknown.select(protocol_share()).item(), 0.1)


def test_unknown_protocol_seconds_are_counted_not_averaged() -> None:
    runs = RUNS.with_columns(
        pl.when(pl.col("run_id") == "r3").then(None).otherwise(pl.col("protocol_seconds"))
        .alias("protocol_seconds")
    )  # fmt: skip
    a = _row(stack_metrics(run_metrics(runs, JUDGED, VALUES)), "model", "mA")
    # r1 0.5 s and r2 0.25 s known, r3 unknown: mean 0.375 s over CT (10 + 20) / 2 = 15 s
    assert a["n_protocol_s_unknown"] == 1
    assert _close(a["protocol_s"], 0.375) and _close(a["protocol_share"], 0.375 / 15.0)


def test_pareto_front_hand_example() -> None:
    df = pl.DataFrame(
        {
            "name": ["a", "b", "c", "d", "e", "f", "g", "h"],
            "TCR_mean": [0.8, 0.8, 0.6, 0.9, 0.5, 0.8, None, 0.4],
            "CT_mean": [10.0, 10.0, 12.0, 30.0, 5.0, 10.0, 1.0, 5.0],
            "V_mean": [100.0, 100.0, 120.0, 300.0, 300.0, 110.0, 1.0, 300.0],
        }
    )
    # a == b (tie: both stay); c dominated by a; d best TCR; e best CT; f worse V than a only;
    # g has a null objective (never on the front, must not dominate anyone); h dominated by e.
    got = pareto_front(df)
    assert got.dtype == pl.Boolean
    assert got.to_list() == [True, True, False, True, True, False, False, False]


def test_pareto_front_nan_and_custom_objectives() -> None:
    df = pl.DataFrame({"x": [1.0, float("nan"), 0.5], "y": [1.0, 0.0, 0.0]})
    assert pareto_front(df, maximise=["x"], minimise=["y"]).to_list() == [True, False, True]
    assert pareto_front(df, maximise=["x"], minimise=[]).to_list() == [True, False, False]
    assert pareto_front(df.head(0), maximise=["x"], minimise=["y"]).len() == 0


# --------------------------------------------------------------------------- ground truth


def test_judge_agreement_hand_computed() -> None:
    from mastif.evaluation.agreement import judge_agreement

    # 4 pairs (None rows are skipped): agree 3 of 4; p_o = .75,
    # p_e = P(check T)P(judge T) + P(check F)P(judge F) = .5*.25 + .5*.75 = .5 -> κ = .5
    check = [True, True, False, False, None, True]
    judge = [True, False, False, False, True, None]
    n, accuracy, kappa = judge_agreement(check, judge)
    assert (n, accuracy) == (4, 0.75)
    assert kappa is not None and math.isclose(kappa, 0.5)
    # one class only (all checks failed, no verdict of success): κ undefined and the
    # accuracy, 1 by construction, not assessable: null, never a perfect 1.0
    assert judge_agreement([False, False], [False, False]) == (2, None, None)
    assert judge_agreement([True], [True]) == (1, None, None)
    assert judge_agreement([None], [True]) == (0, None, None)
    # total disagreement on balanced labels: κ = -1
    assert judge_agreement([True, False], [False, True])[2] == -1.0


def test_success_and_judge_agreement_per_stack() -> None:
    runs = RUNS.with_columns(
        pl.Series("success", [True, False, True, None, False], dtype=pl.Boolean)
    )
    table = run_metrics(runs, JUDGED, VALUES)
    # judge verdict: TCR >= 0.7; a failed judgement gives no verdict
    assert table.sort("run_id")["judge_success"].to_list() == [True, False, None, False, False]
    stacks = stack_metrics(table)
    a = _row(stacks, "model", "mA")
    # r1 (T,T) agree, r2 (F,F) agree, r3 no verdict -> 2 pairs, accuracy 1, κ = 1
    assert (a["n_checked"], a["judge_accuracy"], a["judge_kappa"]) == (3, 1.0, 1.0)
    assert math.isclose(a["success_rate"], 2 / 3)
    b = _row(stacks, "model", "mB")  # no check on its task
    assert (b["n_checked"], b["success_rate"], b["judge_accuracy"]) == (0, None, None)
    c = _row(stacks, "model", "mC")  # one pair, one class: κ undefined, accuracy not assessable
    assert (c["n_checked"], c["success_rate"], c["judge_accuracy"], c["judge_kappa"]) == (
        1,
        0.0,
        None,
        None,
    )


def test_cost_per_run_and_stack_from_the_price_table() -> None:
    prices = {
        "mA": {"input_per_mtok": 0.5, "output_per_mtok": 1.5},
        "mB": {"input_per_mtok": 0.0, "output_per_mtok": 0.0},  # a local model, priced at 0
        "mC": None,  # price unknown
    }
    table = run_metrics(RUNS, JUDGED, VALUES, prices=prices).sort("run_id")
    # r1: 999 prompt tokens x $0.5/M + 100 completion tokens x $1.5/M
    assert math.isclose(table["cost_usd"][0], (999 * 0.5 + 100 * 1.5) / 1e6)
    assert table["cost_usd"].to_list()[3:] == [0.0, None]
    stacks = stack_metrics(table)
    a = _row(stacks, "model", "mA")
    assert math.isclose(a["cost_usd_total"], (3 * 999 * 0.5 + 600 * 1.5) / 1e6)
    assert math.isclose(a["cost_usd_mean"], a["cost_usd_total"] / 3)
    assert _row(stacks, "model", "mB")["cost_usd_total"] == 0.0
    c = _row(stacks, "model", "mC")
    assert c["cost_usd_total"] is None and c["cost_usd_mean"] is None
    # no price table at all: every cost is unknown, never 0
    assert run_metrics(RUNS, JUDGED, VALUES)["cost_usd"].null_count() == RUNS.height


def test_price_is_validated_and_does_not_shape_runs(base_config) -> None:
    import copy

    from mastif.core.config import ConfigError
    from mastif.execution.experiment import parse_config
    from mastif.execution.runner import run_fingerprint
    from mastif.frameworks.plan import plan_workflow

    priced = copy.deepcopy(base_config)
    priced["models"]["smollm2"]["price"] = {"input_per_mtok": 0.1, "output_per_mtok": 0.2}
    cfg, cfg_priced = parse_config(base_config), parse_config(priced)
    stack = cfg.stacks()[0]
    plan = plan_workflow(cfg.workflow, cfg.generation)
    assert run_fingerprint(cfg, stack, plan) == run_fingerprint(cfg_priced, stack, plan)
    bad = copy.deepcopy(base_config)
    bad["models"]["smollm2"]["price"] = {"input_per_mtok": -1, "output_per_mtok": 0}
    with pytest.raises(ConfigError, match="models.smollm2.price.input_per_mtok"):
        parse_config(bad)


def test_stack_time_parts_sum_to_ct_mean_over_completed_runs() -> None:
    # two completed runs (10 s = 6 model + 1 queue + 2 tools + 0 protocol + 1 harness;
    # 20 s = 12 + 0 + 4 + 1 + 3) and a timeout at 100 s that is all model time: the parts'
    # means are over the completed runs, as CT_mean is, so they sum to CT_mean = 15 s
    traces = [
        run_trace("c1", "m", "ok", 10.0, 10, []),
        run_trace("c2", "m", "ok", 20.0, 10, []),
        run_trace("t1", "m", "timeout", 100.0, 10, []),
    ]
    parts = {"c1": (6.0, 1.0, 2.0, 0.0, 0.5, 0.5), "c2": (12.0, 0.0, 4.0, 1.0, 1.5, 1.5),
             "t1": (100.0, 0.0, 0.0, 0.0, 0.0, 0.0)}  # fmt: skip
    for trace in traces:
        (trace.wall_model_s, trace.wall_queue_s, trace.wall_tools_s, trace.wall_protocol_s,
         trace.wall_setup_s, trace.wall_harness_s) = parts[trace.run_id]  # fmt: skip
    judged = judged_table([(t.run_id, "m", "ok", 0.7, 0.7, 0.7) for t in traces])
    values = pl.DataFrame(
        {"run_id": judged["run_id"], "IVS": None, "IVS_prompt_output": None, "IVS_reasoning": None}
    )
    s = stack_metrics(run_metrics(pl.from_arrow(runs_to_table(traces)), judged, values))
    row = s.row(0, named=True)
    assert row["CT_mean"] == 15.0
    assert [row[c] for c in TIME_PARTS] == [9.0, 0.5, 3.0, 0.5, 1.0, 1.0]
    assert sum(row[c] for c in TIME_PARTS) == row["CT_mean"]


def test_judge_cost_is_every_judgement_at_its_judges_price_or_null():
    from mastif.evaluation.judge import JUDGED_SCHEMA
    from mastif.evaluation.measures import judge_costs

    def entry(judge, prompt, completion):
        return {"judge_model": judge, "repeat": 0, "status": "ok", "TU": 1.0, "TA": 1.0,
                "TCR": 1.0, "prompt_tokens": prompt, "completion_tokens": completion}  # fmt: skip

    panels = {
        "both-priced": [entry("a", 1000, 100), entry("b", 2000, 0)],
        "usage-unknown": [entry("a", 1000, 100), entry("b", None, 5)],
        "unpriced-judge": [entry("a", 1000, 100), entry("c", 10, 5)],
        "no-judgement": [],
    }
    judged = pl.DataFrame(
        [{"run_id": r, "judge_panel": p} for r, p in panels.items()],
        schema={"run_id": pl.String, "judge_panel": JUDGED_SCHEMA["judge_panel"]},
    )
    prices = {"a": {"input_per_mtok": 1.0, "output_per_mtok": 10.0},
              "b": {"input_per_mtok": 0.5, "output_per_mtok": 2.0}, "c": None}  # fmt: skip
    costs = dict(judge_costs(judged, prices).iter_rows())
    assert costs["both-priced"] == pytest.approx((1000 + 1000 + 1000) / 1e6)
    assert costs["usage-unknown"] is None and costs["unpriced-judge"] is None
    assert costs["no-judgement"] is None


def test_time_parts_of_a_table_without_them_is_null_for_every_run() -> None:
    """A runs table that records no decomposition (an import, an older table): one null row
    per run, never 0, never one row for the table."""
    from mastif.evaluation.metrics import TIME_PARTS_SCHEMA, time_parts

    runs = pl.DataFrame({"run_id": ["a", "b", "c"], "wall_seconds": [1.0, 2.0, 3.0]})
    parts = time_parts(runs)
    assert parts.height == 3 and parts.columns == list(TIME_PARTS_SCHEMA)
    assert all(parts[c].null_count() == 3 for c in parts.columns)
    assert time_parts(runs.head(0)).height == 0

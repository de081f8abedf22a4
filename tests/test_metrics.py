"""Metrics of Section 3 on hand-built tables with hand-computed expected values."""

from __future__ import annotations

import math
from typing import Any

import polars as pl
import pytest

from mastif.metrics import (
    RUN_METRICS_SCHEMA,
    STACK_METRICS_SCHEMA,
    ct,
    model_seconds,
    pareto_front,
    protocol_kib,
    protocol_share,
    run_metrics,
    stack_metrics,
    svs,
    tcr,
    tusr,
    verbosity,
)
from mastif.trace import LLMCall, RunTrace, ToolCall, runs_to_table


def _call(ok: bool, name: str = "search") -> ToolCall:
    return ToolCall(
        node="agent",
        step=0,
        name=name,
        arguments="{}",
        ok=ok,
        output="",
        error=None if ok else "failed",
        duration_s=0.1,
    )


def _llm(latency: float) -> LLMCall:
    return LLMCall(
        node="agent",
        started_s=0.0,
        latency_s=latency,
        prompt_tokens=1,
        completion_tokens=1,
        http_status=200,
        error=None,
        attempts=1,
    )


# Protocol cost of a run: messages, calls, bytes sent, bytes received, server seconds.
NO_PROTOCOL = (0, 0, 0, 0, 0.0)


def _run(
    run_id: str,
    model: str,
    status: str,
    wall: float,
    tokens: int,
    calls: list[ToolCall],
    cost: tuple[int, int, int, int, float] = NO_PROTOCOL,
    latencies: tuple[float, ...] = (),
) -> RunTrace:
    messages, n_calls, sent, received, seconds = cost
    return RunTrace(
        run_id=run_id,
        experiment="e",
        model=model,
        protocol="p1",
        framework="f1",
        task_id=f"t-{run_id}",
        task_text="do it",
        website="w",
        domain="Travel",
        level="easy",
        status=status,  # type: ignore[arg-type]
        error_class=None,
        error_message=None,
        final_answer="x",
        tool_calls=calls,
        prompt_tokens=999,
        completion_tokens=tokens,
        wall_seconds=wall,
        llm_calls=[_llm(x) for x in latencies],
        n_llm_calls=len(latencies),
        protocol_requests=messages // 2,
        protocol_messages=messages,
        protocol_calls=n_calls,
        protocol_bytes_sent=sent,
        protocol_bytes_received=received,
        protocol_seconds=seconds,
    )


# Stack A = (mA, p1, f1): r1 two good calls; r2 errored run without calls; r3 judge failed,
# 1 of 4 calls ok. Stack B = (mB, ...): r4 one hallucinated call. Stack C: r5, dominated by B.
# Protocol cost: stack A went over a protocol (r2 errored but its traffic still counts);
# B and C did not (all zero, as for protocol "standard"); r5 made no LLM call.
RUNS = pl.from_arrow(
    runs_to_table(
        [
            _run(
                "r1",
                "mA",
                "ok",
                10.0,
                100,
                [_call(True), _call(True)],
                cost=(10, 2, 1024, 2048, 0.5),
                latencies=(1.0, 2.0),
            ),
            _run("r2", "mA", "error", 20.0, 200, [], cost=(4, 0, 512, 0, 0.25), latencies=(3.0,)),
            _run(
                "r3",
                "mA",
                "ok",
                30.0,
                300,
                [_call(True), _call(False), _call(False), _call(False)],
                cost=(16, 4, 4096, 4608, 2.25),
                latencies=(4.0, 5.0, 6.0),
            ),
            _run(
                "r4",
                "mB",
                "ok",
                5.0,
                50,
                [_call(False, name="no_such_tool")],
                latencies=(2.5,),
            ),
            _run("r5", "mC", "timeout", 6.0, 60, []),
        ]
    )
)
assert isinstance(RUNS, pl.DataFrame)


def _judged(
    rows: list[tuple[str, str, str, float | None, float | None, float | None]],
) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "run_id": r,
                "model": m,
                "protocol": "p1",
                "framework": "f1",
                "task_id": f"t-{r}",
                "judge_status": s,
                "TU": tu,
                "TA": ta,
                "TCR": tcr_,
            }
            for r, m, s, tu, ta, tcr_ in rows
        ],
        schema={
            "run_id": pl.String,
            "model": pl.String,
            "protocol": pl.String,
            "framework": pl.String,
            "task_id": pl.String,
            "judge_status": pl.String,
            "TU": pl.Float64,
            "TA": pl.Float64,
            "TCR": pl.Float64,
        },
    )


JUDGED = _judged(
    [
        ("r1", "mA", "ok", 1.0, 1.0, 1.0),
        ("r2", "mA", "ok", 0.5, 0.7, 0.5),
        ("r3", "mA", "judge_failed", 0.9, 0.9, 0.7),  # stale scores must be ignored
        ("r4", "mB", "ok", 0.7, 0.5, 0.3),
        ("r5", "mC", "ok", 0.7, 0.5, 0.3),
    ]
)

VALUES = pl.DataFrame(
    {
        "run_id": ["r1", "r2", "r3", "r4", "r5"],
        "IVS": [0.5, 0.3, 0.1, 1.0, None],
        "IVS_prompt_output": [0.2, 0.4, None, 1.0, None],
        "IVS_reasoning": [None, 0.6, 0.4, None, None],
    }
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
    # protocol cost: KiB = (1024 + 2048) / 1024; model_s = 1.0 + 2.0 (sum of LLM latencies)
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
        "n_run_errors": 1,
        "TU_mean": 0.75,
        "TA_mean": 0.85,
        "TCR_mean": 0.75,  # (1.0 + 0.5) / 2: r3 (judge failed) excluded
        "TCR_std": math.sqrt(0.125),  # sample σ of {1.0, 0.5}
        "CT_mean": 20.0,
        "CT_std": 10.0,
        "V_mean": 200.0,
        "V_std": 100.0,
        "n_tool_calls": 6,
        "TUSR": 0.5,  # pooled (2 + 1) / (2 + 4); the mean of per-run rates would be 0.625
        "TUSR_std": 0.75 / math.sqrt(2),  # σ of {1.0, 0.25}; r2 has no rate
        "SVS": 0.3,
        "SVS_std": 0.2,
        "SVS_prompt_output": 0.3,
        "SVS_reasoning": 0.5,
        "pareto_optimal": True,
        # protocol cost: means over all 3 runs, the errored r2 included
        "protocol_messages": 10.0,  # (10 + 4 + 16) / 3
        "protocol_calls": 2.0,  # (2 + 0 + 4) / 3
        "protocol_kib": 4.0,  # (3072 + 512 + 8704) / 1024 / 3 = (3 + 0.5 + 8.5) / 3
        "protocol_s": 1.0,  # (0.5 + 0.25 + 2.25) / 3
        "model_s": 7.0,  # (3 + 3 + 15) / 3
        "protocol_share": 0.05,  # 1.0 / CT_mean 20.0
    }
    for k, v in expected_a.items():
        assert _close(a[k], v), (k, a[k], v)
    b = _row(s, "model", "mB")
    assert (b["n_runs"], b["n_judged"], b["n_judge_failed"], b["n_run_errors"]) == (1, 1, 0, 0)
    # one run: σ undefined
    assert (b["TCR_std"], b["CT_std"], b["V_std"], b["TUSR_std"], b["SVS_std"]) == (None,) * 5
    assert (b["TCR_mean"], b["TUSR"], b["n_tool_calls"], b["pareto_optimal"]) == (0.3, 0.0, 1, True)
    # no protocol traffic: zero cost and a zero share, not null
    assert (b["protocol_messages"], b["protocol_calls"], b["protocol_kib"]) == (0.0, 0.0, 0.0)
    assert (b["protocol_s"], b["model_s"], b["protocol_share"]) == (0.0, 2.5, 0.0)
    c = _row(s, "model", "mC")
    # no calls at all: TUSR null; IVS all null: SVS null; same TCR as B but slower and wordier
    assert (c["TUSR"], c["n_tool_calls"], c["SVS"], c["n_run_errors"]) == (None, 0, None, 1)
    assert c["pareto_optimal"] is False


def test_empty_inputs_keep_schemas() -> None:
    runs = RUNS.head(0)
    t = run_metrics(runs, JUDGED.head(0), VALUES.head(0))
    assert t.height == 0 and t.schema == pl.Schema(RUN_METRICS_SCHEMA)
    s = stack_metrics(t)
    assert s.height == 0 and s.schema == pl.Schema(STACK_METRICS_SCHEMA)


def test_equation_functions() -> None:
    df = pl.DataFrame(
        {
            "TCR": [1.0, None, 0.3],
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
    assert _close(out["tcr"], 0.65) and out["ct"] == 3.0 and out["v"] == 30.0
    assert out["tusr"] == 0.75 and _close(out["svs"], 0.3)
    no_calls = df.filter(pl.col("n_tool_calls") == 0).select(tusr()).item()
    assert no_calls is None


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
    from mastif.metrics import judge_agreement

    # 4 pairs (None rows are skipped): agree 3 of 4; p_o = .75,
    # p_e = P(check T)P(judge T) + P(check F)P(judge F) = .5*.25 + .5*.75 = .5 -> κ = .5
    check = [True, True, False, False, None, True]
    judge = [True, False, False, False, True, None]
    n, accuracy, kappa = judge_agreement(check, judge)
    assert (n, accuracy) == (4, 0.75)
    assert kappa is not None and math.isclose(kappa, 0.5)
    # one label throughout: chance agreement is 1, κ undefined; accuracy still 1
    assert judge_agreement([False, False], [False, False]) == (2, 1.0, None)
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
    c = _row(stacks, "model", "mC")  # one pair, one label: κ undefined
    assert (c["n_checked"], c["success_rate"], c["judge_accuracy"], c["judge_kappa"]) == (
        1,
        0.0,
        1.0,
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

    from mastif.config import ConfigError, parse_config
    from mastif.runner import run_fingerprint
    from mastif.workflow import plan_workflow

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

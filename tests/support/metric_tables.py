"""The hand-built tables of the metric tests (tests/evaluation/test_metrics.py): five runs
of three stacks (:data:`RUNS`), their judgements (:data:`JUDGED`) and values
(:data:`VALUES`), with the expected figures worked out beside the tests that use them."""

from __future__ import annotations

from typing import Any

import polars as pl

from mastif.core.trace import LLMCall, RunTrace, ToolCall, runs_to_table
from mastif.evaluation.values import SENSITIVITY


def tool_call(ok: bool, name: str = "search") -> ToolCall:
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


def llm_call(upstream: float) -> LLMCall:
    # 0.25 s of the gateway's latency is waiting for a connection slot: never model time
    return LLMCall(
        node="agent",
        started_s=0.0,
        latency_s=upstream + 0.25,
        prompt_tokens=1,
        completion_tokens=1,
        http_status=200,
        error=None,
        attempts=1,
        upstream_s=upstream,
        queue_s=0.25,
        backoff_s=0.0,
    )


# Protocol cost of a run: messages, calls, bytes sent, bytes received, server seconds.
NO_PROTOCOL = (0, 0, 0, 0, 0.0)


def run_trace(
    run_id: str,
    model: str,
    status: str,
    wall: float,
    tokens: int | None,
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
        llm_calls=[llm_call(x) for x in latencies],
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
            run_trace(
                "r1",
                "mA",
                "ok",
                10.0,
                100,
                [tool_call(True), tool_call(True)],
                cost=(10, 2, 1024, 2048, 0.5),
                latencies=(1.0, 2.0),
            ),
            run_trace(
                "r2", "mA", "error", 20.0, 200, [], cost=(4, 0, 512, 0, 0.25), latencies=(3.0,)
            ),
            run_trace(
                "r3",
                "mA",
                "ok",
                30.0,
                300,
                [tool_call(True), tool_call(False), tool_call(False), tool_call(False)],
                cost=(16, 4, 4096, 4608, 2.25),
                latencies=(4.0, 5.0, 6.0),
            ),
            run_trace(
                "r4",
                "mB",
                "ok",
                5.0,
                50,
                [tool_call(False, name="no_such_tool")],
                latencies=(2.5,),
            ),
            run_trace("r5", "mC", "timeout", 6.0, 60, []),
        ]
    )
)
assert isinstance(RUNS, pl.DataFrame)


def judged_table(
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


JUDGED = judged_table(
    [
        ("r1", "mA", "ok", 1.0, 1.0, 1.0),
        ("r2", "mA", "ok", 0.5, 0.7, 0.5),
        ("r3", "mA", "judge_failed", 0.9, 0.9, 0.7),  # stale scores must be ignored
        ("r4", "mB", "ok", 0.7, 0.5, 0.3),
        ("r5", "mC", "ok", 0.7, 0.5, 0.3),
    ]
)


def sensitivity_at(*entries: tuple[float, float | None, int]) -> list[dict[str, Any]]:
    return [{"threshold": t, "IVS": v, "n_empty_value_sets": n} for t, v, n in entries]


# r2 (error) and r5 (timeout) have no final answer: counted, but out of every SVS column
VALUES = pl.DataFrame(
    {
        "run_id": ["r1", "r2", "r3", "r4", "r5"],
        "IVS": [0.5, 0.3, 0.1, 1.0, None],
        "IVS_prompt_output": [0.2, None, None, 1.0, None],
        "IVS_reasoning": [None, 0.6, 0.4, None, None],
        "has_final_answer": [True, False, True, True, False],
        "n_value_sets": [4, 3, 5, 2, 1],
        "n_empty_value_sets": [1, 0, 3, 0, 1],
        "IVS_sensitivity": [
            sensitivity_at((0.25, 0.6, 0), (0.45, 0.4, 2)),
            sensitivity_at((0.25, 0.9, 0), (0.45, 0.9, 0)),
            sensitivity_at((0.25, 0.2, 1), (0.45, None, 5)),
            [],
            sensitivity_at((0.25, None, 1), (0.45, None, 1)),
        ],
    },
    schema_overrides={"IVS_sensitivity": pl.List(SENSITIVITY)},
)

"""Stacks told apart by their outputs (mastif.evaluation.answers): distinct answers and identical groups."""

from __future__ import annotations

import polars as pl

from mastif.evaluation.answers import (
    ANSWER_COLUMNS_SCHEMA,
    ANSWER_GROUPS_SCHEMA,
    answer_columns,
    answer_groups,
    identical_answers_note,
)
from mastif.evaluation.metrics import STACK_METRICS_SCHEMA, stack_metrics
from tests.support.runs import runs_table


def _runs(answers: dict[tuple[str, str, str], list[str | None]]) -> pl.DataFrame:
    """One run per (stack, task t0, t1, ...) with the given final answers, repeat 0."""
    rows = [
        {"model": m, "protocol": p, "framework": f, "task_id": f"t{i}", "final_answer": a}
        for (m, p, f), answers_ in answers.items()
        for i, a in enumerate(answers_)
    ]  # fmt: skip
    return runs_table(rows, schema_overrides={"final_answer": pl.String})


# the default run's case: langchain and langgraph gave the same bytes under every protocol
RUNS = _runs(
    {
        ("m", "a2a", "crewai"): ["Paris.", "42"],
        ("m", "a2a", "langchain"): ["It is Paris.", "42"],
        ("m", "a2a", "langgraph"): ["It is Paris.", "42"],
        ("m", "mcp", "langchain"): ["Paris", None],  # timed out on t1: no answer
        ("m", "mcp", "langgraph"): ["Paris", None],
        # one trailing space: different bytes, so a different output
        ("m", "standard", "langchain"): ["Paris ", "42"],
        ("m", "standard", "langgraph"): ["Paris", "42"],
        ("m", "standard", "crewai"): [None, None],  # no answer at all: in no group
        ("m", "standard", "smol"): ["", None],  # empty: no answer either
    }
)


def test_groups_of_stacks_with_byte_identical_answers_on_every_task() -> None:
    groups = answer_groups(RUNS)
    assert groups.schema == pl.Schema(ANSWER_GROUPS_SCHEMA)
    assert groups.to_dicts() == [
        {"answer_group": 1, "n_stacks": 2, "stacks": "m/a2a/langchain; m/a2a/langgraph",
         "n_tasks": 2, "n_runs_per_stack": 2},
        {"answer_group": 2, "n_stacks": 2, "stacks": "m/mcp/langchain; m/mcp/langgraph",
         "n_tasks": 2, "n_runs_per_stack": 2},
    ]  # fmt: skip
    note = identical_answers_note(groups, 9)
    assert note.startswith("stacks that cannot be told apart by their outputs")
    assert "[m/a2a/langchain; m/a2a/langgraph], [m/mcp/langchain; m/mcp/langgraph]" in note


def test_distinct_answers_per_stack_and_its_group() -> None:
    cols = answer_columns(RUNS)
    assert cols.schema == pl.Schema(ANSWER_COLUMNS_SCHEMA)
    by = {(r["protocol"], r["framework"]): r for r in cols.iter_rows(named=True)}
    assert by[("a2a", "crewai")]["n_distinct_answers"] == 2
    assert by[("a2a", "crewai")]["answer_group"] is None
    assert by[("a2a", "langgraph")]["answer_group"] == by[("a2a", "langchain")]["answer_group"] == 1
    # a run without an answer is no answer, not a distinct one
    assert by[("mcp", "langgraph")]["n_distinct_answers"] == 1
    assert by[("standard", "crewai")]["n_distinct_answers"] == 0
    assert by[("standard", "crewai")]["answer_group"] is None  # no answer: in no group
    assert by[("standard", "smol")]["n_distinct_answers"] == 0  # "" is no answer
    assert by[("standard", "langchain")]["answer_group"] is None  # "Paris " != "Paris"


def test_same_answers_on_one_task_only_or_one_stack_are_told_apart() -> None:
    runs = _runs({("m", "p", "a"): ["x", "y"], ("m", "p", "b"): ["x", "z"]})
    assert answer_groups(runs).height == 0
    assert identical_answers_note(answer_groups(runs), 2).startswith("every stack's final answers")
    # repeats count: the same answers on repeat 0 but not on repeat 1
    twice = pl.concat([RUNS, RUNS.with_columns(pl.lit(1, pl.Int64).alias("repeat"))])
    changed = twice.with_columns(
        pl.when((pl.col("repeat") == 1) & (pl.col("framework") == "langgraph"))
        .then(pl.lit("other"))
        .otherwise(pl.col("final_answer"))
        .alias("final_answer")
    )
    assert answer_groups(changed).height == 0
    assert answer_groups(twice).height == 2
    one = _runs({("m", "p", "a"): ["x"]})
    assert "no other stack" in identical_answers_note(answer_groups(one), 1)
    assert answer_columns(one.head(0)).height == 0


def test_stack_metrics_carry_the_answer_columns_or_null() -> None:
    from mastif.evaluation.metrics import run_metrics
    from tests.support.metric_tables import JUDGED, VALUES
    from tests.support.metric_tables import RUNS as METRIC_RUNS

    table = run_metrics(METRIC_RUNS, JUDGED, VALUES)
    assert {"n_distinct_answers", "answer_group"} <= set(STACK_METRICS_SCHEMA)
    # without the runs' answers: unknown, never 0
    plain = stack_metrics(table)
    assert plain["n_distinct_answers"].is_null().all() and plain["answer_group"].is_null().all()
    stacks = table.select("model", "protocol", "framework").unique().sort("model")
    assert stacks.height == 3
    answers = stacks.head(2).with_columns(
        pl.Series("n_distinct_answers", [2, 1], pl.Int64),
        pl.Series("answer_group", [None, 1], pl.Int64),
    )
    with_answers = stack_metrics(table, answers=answers)
    assert with_answers.schema == pl.Schema(STACK_METRICS_SCHEMA)
    got = with_answers.sort("model").select("n_distinct_answers", "answer_group").rows()
    # the third stack has no answer row: unknown
    assert got == [(2, None), (1, 1), (None, None)]

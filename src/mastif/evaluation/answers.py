"""Stacks told apart by their outputs (issue 38, item 7): distinct final answers per stack and
the groups of stacks whose final answers are byte-identical on every task.

Two stacks that gave the same final answer, byte for byte, on every task and repeat cannot
be told apart by what they produced: any difference the judge, the checks or the value
tagger reports between them comes from elsewhere (timing, tokens), and a factor whose
levels differ only there (langchain and langgraph driving the same model through the same
prompts, say) is not seen in the outputs at all.

Answers are compared as they were recorded (``final_answer`` of the runs tables): exact
strings, so exact UTF-8 bytes — no trimming, case folding or whitespace normalisation. A run
without a final answer (null: timed out, errored; or empty, as an imported log records a null
response) has none; it counts as no answer in
:func:`distinct_answers` and as "no answer" in the comparison (two stacks that both gave no
answer on a task agree there). A stack without any answer is in no group.

Outputs: ``n_distinct_answers`` and ``answer_group`` in ``results/metrics/stacks.parquet``
(:func:`answer_columns`), and ``results/metrics/identical_answers.csv`` (:func:`answer_groups`),
whose one-line summary (:func:`identical_answers_note`) stands on the report's front page.
"""

from __future__ import annotations

import polars as pl

from mastif.core.factors import STACK_KEYS

ANSWER_COLUMNS_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "protocol": pl.String(),
    "framework": pl.String(),
    "n_distinct_answers": pl.Int64(),
    "answer_group": pl.Int64(),
}

ANSWER_GROUPS_SCHEMA: dict[str, pl.DataType] = {
    "answer_group": pl.Int64(),
    "n_stacks": pl.Int64(),
    "stacks": pl.String(),
    "n_tasks": pl.Int64(),
    "n_runs_per_stack": pl.Int64(),
}


def stack_name(model: str, protocol: str, framework: str) -> str:
    return f"{model}/{protocol}/{framework}"


def _answer_maps(runs: pl.DataFrame) -> dict[tuple[str, str, str], dict[tuple, str | None]]:
    """Per stack (sorted): (task_id, repeat) -> final answer (None: no answer)."""
    maps: dict[tuple[str, str, str], dict[tuple, str | None]] = {}
    cols = [*STACK_KEYS, "task_id", "repeat", "final_answer"]
    for model, protocol, framework, task, repeat, answer in runs.select(cols).iter_rows():
        maps.setdefault((model, protocol, framework), {})[(task, repeat)] = answer or None
    return dict(sorted(maps.items()))


def _groups(runs: pl.DataFrame) -> list[list[tuple[str, str, str]]]:
    """Groups of two or more stacks with the same answer on every (task, repeat), each
    sorted, in order of their first stack; stacks without any answer are in none."""
    by_outputs: dict[tuple, list[tuple[str, str, str]]] = {}
    for stack, answers in _answer_maps(runs).items():
        if all(a is None for a in answers.values()):
            continue
        by_outputs.setdefault(tuple(sorted(answers.items())), []).append(stack)
    return [g for g in by_outputs.values() if len(g) > 1]


def answer_columns(runs: pl.DataFrame) -> pl.DataFrame:
    """Per stack: ``n_distinct_answers`` (distinct non-null final answers over its runs, exact
    strings) and ``answer_group`` (1, 2, ... as :func:`answer_groups` numbers them; null when
    no other stack gave the same answers)."""
    if runs.height == 0:
        return pl.DataFrame(schema=ANSWER_COLUMNS_SCHEMA)
    group_of = {s: i for i, g in enumerate(_groups(runs), start=1) for s in g}
    counts = runs.group_by(*STACK_KEYS).agg(
        pl.col("final_answer")
        .filter(pl.col("final_answer").str.len_bytes() > 0)
        .n_unique()
        .alias("n_distinct_answers")
    )
    rows = [
        {**r, "answer_group": group_of.get(tuple(r[k] for k in STACK_KEYS))}
        for r in counts.sort(*STACK_KEYS).iter_rows(named=True)
    ]
    return pl.DataFrame(rows, schema=ANSWER_COLUMNS_SCHEMA)


def answer_groups(runs: pl.DataFrame) -> pl.DataFrame:
    """One row per group of stacks with byte-identical final answers on every task and
    repeat (:data:`ANSWER_GROUPS_SCHEMA`; no row when every stack's answers differ from
    every other's somewhere): its number, size, the stacks ("model/protocol/framework",
    "; "-joined), the tasks and the runs per stack compared."""
    rows = []
    for i, group in enumerate(_groups(runs), start=1):
        members = pl.DataFrame(group, schema=list(STACK_KEYS), orient="row")
        mine = runs.join(members, on=list(STACK_KEYS), how="semi")
        rows.append(
            {
                "answer_group": i,
                "n_stacks": len(group),
                "stacks": "; ".join(stack_name(*s) for s in group),
                "n_tasks": mine["task_id"].n_unique(),
                "n_runs_per_stack": mine.height // len(group),
            }
        )
    return pl.DataFrame(rows, schema=ANSWER_GROUPS_SCHEMA)


def identical_answers_note(groups: pl.DataFrame, n_stacks: int) -> str:
    """The report's sentence on :func:`answer_groups`' table (of ``n_stacks`` stacks)."""
    if n_stacks < 2:
        return f"{n_stacks} stack: no other stack to compare its answers with"
    if groups.height == 0:
        return (
            f"every stack's final answers differ from every other's on at least one task "
            f"({n_stacks} stacks)"
        )
    parts = [f"[{s}]" for s in groups["stacks"].to_list()]
    return (
        "stacks that cannot be told apart by their outputs (byte-identical final answers on "
        f"every task and repeat): {', '.join(parts)}"
    )

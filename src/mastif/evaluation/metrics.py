"""The per-run and per-stack tables of the paper's metrics (Section 3): TCR, CT, V, E, TUSR,
SVS; and of mastif's protocol cost (what the inter-agent protocol, MCP or A2A, cost each run
in messages, calls, bytes and seconds, against the time spent in the model), CT's parts and
the runs' dollars, none of them in the seed paper. The equations, which runs count for each
and the per-run measures are :mod:`mastif.evaluation.measures`; this module builds the tables.

Inputs are the concatenated ``runs``, ``judged`` and ``values`` tables of docs/data.md;
outputs are ``results/metrics/runs.parquet`` (:func:`run_metrics`) and
``results/metrics/stacks.parquet`` (:func:`stack_metrics`). Both outputs have fixed schemas
(:data:`RUN_METRICS_SCHEMA`, :data:`STACK_METRICS_SCHEMA`) so an empty grid still writes
correctly typed files.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from mastif.core.factors import STACK_KEYS
from mastif.evaluation.agreement import judge_success, stack_agreement
from mastif.evaluation.measures import (
    JUDGE_SCORES,
    answered,
    completed,
    ct,
    empty_value_set_share,
    judge_costs,
    judge_failed,
    judge_mean,
    judged,
    km_median_time,
    model_seconds,
    pareto_front,
    pareto_ineligible,
    price_columns,
    protocol_kib,
    protocol_share,
    run_cost,
    run_tusr,
    svs,
    tcr,
    tusr,
    verbosity,
)
from mastif.evaluation.values import SENSITIVITY

#: CT decomposed (mastif's, not in the seed paper; :mod:`mastif.core.timing`): per run the
#: run's parts of wall_seconds, per stack their means over runs of every status (like CT's
#: cost columns) and the stack's total of calls answered from the response cache
TIME_PARTS = (
    "wall_model_s",
    "wall_queue_s",
    "wall_tools_s",
    "wall_protocol_s",
    "wall_setup_s",
    "wall_harness_s",
)
TIME_PARTS_SCHEMA: dict[str, pl.DataType] = {
    **{c: pl.Float64() for c in TIME_PARTS},
    "n_cached_calls": pl.Int64(),
}

RUN_METRICS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "model": pl.String(),
    "protocol": pl.String(),
    "framework": pl.String(),
    "task_id": pl.String(),
    "repeat": pl.Int64(),
    "domain": pl.String(),
    "level": pl.String(),
    "status": pl.String(),
    "judge_status": pl.String(),
    "TU": pl.Float64(),
    "TA": pl.Float64(),
    "TCR": pl.Float64(),
    "CT": pl.Float64(),
    "V": pl.Int64(),
    "n_tool_calls": pl.Int64(),
    "n_tool_ok": pl.Int64(),
    "TUSR": pl.Float64(),
    "IVS": pl.Float64(),
    "IVS_prompt_output": pl.Float64(),
    "IVS_reasoning": pl.Float64(),
    "has_final_answer": pl.Boolean(),
    "n_value_sets": pl.Int64(),
    "n_empty_value_sets": pl.Int64(),
    "IVS_sensitivity": pl.List(SENSITIVITY),
    "protocol_messages": pl.Int64(),
    "protocol_calls": pl.Int64(),
    "protocol_kib": pl.Float64(),
    "protocol_s": pl.Float64(),
    "model_s": pl.Float64(),
    "success": pl.Boolean(),
    "judge_success": pl.Boolean(),
    "prompt_tokens": pl.Int64(),
    "cost_usd": pl.Float64(),
    "judge_cost_usd": pl.Float64(),
    **TIME_PARTS_SCHEMA,
}

STACK_METRICS_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String(),
    "protocol": pl.String(),
    "framework": pl.String(),
    "n_runs": pl.Int64(),
    "n_judged": pl.Int64(),
    "n_judge_failed": pl.Int64(),
    "n_ok": pl.Int64(),
    "n_timeout": pl.Int64(),
    "n_error": pl.Int64(),
    "timeout_share": pl.Float64(),
    "error_share": pl.Float64(),
    "n_usage_missing": pl.Int64(),
    "TU_mean": pl.Float64(),
    "TA_mean": pl.Float64(),
    "TCR_mean": pl.Float64(),
    "TCR_std": pl.Float64(),
    "CT_mean": pl.Float64(),
    "CT_std": pl.Float64(),
    "n_CT": pl.Int64(),
    "CT_km_median": pl.Float64(),
    "V_mean": pl.Float64(),
    "V_std": pl.Float64(),
    "n_V": pl.Int64(),
    "n_tool_calls": pl.Int64(),
    "TUSR": pl.Float64(),
    "TUSR_std": pl.Float64(),
    "SVS": pl.Float64(),
    "SVS_std": pl.Float64(),
    "SVS_prompt_output": pl.Float64(),
    "SVS_reasoning": pl.Float64(),
    "n_no_final_answer": pl.Int64(),
    "n_IVS_null": pl.Int64(),
    "IVS_null_share": pl.Float64(),
    "empty_value_set_share": pl.Float64(),
    "SVS_sensitivity": pl.List(
        pl.Struct(
            {"threshold": pl.Float64(), "SVS": pl.Float64(), "empty_value_set_share": pl.Float64()}
        )
    ),
    "pareto_optimal": pl.Boolean(),
    # mastif.evaluation.answers: distinct final answers, and the group of stacks with the same answers
    "n_distinct_answers": pl.Int64(),
    "answer_group": pl.Int64(),
    "protocol_messages": pl.Float64(),
    "protocol_calls": pl.Float64(),
    "protocol_kib": pl.Float64(),
    "protocol_s": pl.Float64(),
    "model_s": pl.Float64(),
    "protocol_share": pl.Float64(),
    "n_protocol_s_unknown": pl.Int64(),
    "n_checked": pl.Int64(),
    "success_rate": pl.Float64(),
    "judge_accuracy": pl.Float64(),
    "judge_kappa": pl.Float64(),
    "cost_usd_mean": pl.Float64(),
    "cost_usd_total": pl.Float64(),
    "judge_cost_usd_total": pl.Float64(),
    **TIME_PARTS_SCHEMA,
}

# --------------------------------------------------------------------------- time


def time_parts(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs' decomposition of wall_seconds (``TIME_PARTS``, ``n_cached_calls``) as
    recorded; null for runs (tables) without one, never 0."""
    # the missing columns added to the table (a literal alone in a select is one row, not
    # one per run)
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in TIME_PARTS_SCHEMA.items()
               if c not in runs.columns]  # fmt: skip
    return runs.with_columns(missing).select(
        pl.col(c).cast(t) for c, t in TIME_PARTS_SCHEMA.items()
    )


def _std(col: str, where: pl.Expr | None = None) -> pl.Expr:
    """Sample σ (ddof=1) of the non-null values (of the rows ``where`` holds); null when
    fewer than two (σ undefined)."""
    x = pl.col(col) if where is None else pl.col(col).filter(where)
    return pl.when(x.count() >= 2).then(x.cast(pl.Float64).std(ddof=1))


# --------------------------------------------------------------------------- run table


def _check_one_to_one(runs: pl.DataFrame, other: pl.DataFrame, name: str) -> None:
    """Refuse to join unless ``other`` holds exactly one row per run of ``runs``.

    A missing row would silently drop a run from every mean (survivor bias); an extra or
    duplicate row means the inputs come from different executions.
    """
    for label, frame in (("runs", runs), (name, other)):
        dup = frame.filter(pl.col("run_id").is_duplicated())["run_id"].unique().sort()
        if dup.len():
            raise ValueError(f"duplicate run_id in {label}: {dup.to_list()}")
    run_ids = set(runs["run_id"].to_list())
    other_ids = set(other["run_id"].to_list())
    missing = sorted(run_ids - other_ids)
    if missing:
        raise ValueError(f"{len(missing)} run(s) missing from {name}: {missing}")
    extra = sorted(other_ids - run_ids)
    if extra:
        raise ValueError(f"{len(extra)} run(s) in {name} but not in runs: {extra}")


def _tool_counts(runs: pl.DataFrame) -> tuple[pl.Expr, pl.Expr]:
    """Per run: its tool calls and the successful ones (tsi = 1 only when ``ok`` is true; a
    hallucinated tool name is recorded upstream with ``ok`` false); an imported log's tool
    counts where it has them, since it records no outcome per call."""
    ok_flags = pl.col("tool_calls").list.eval(pl.element().struct.field("ok").fill_null(False))
    n_calls = pl.col("tool_calls").list.len().fill_null(0)
    n_ok = ok_flags.list.sum().fill_null(0)
    if {"tool_log_calls", "tool_log_ok"} <= set(runs.columns):  # older tables lack them
        n_calls = pl.coalesce(pl.col("tool_log_calls"), n_calls)
        n_ok = pl.coalesce(pl.col("tool_log_ok"), n_ok)
    return n_calls, n_ok


def _run_columns(
    runs: pl.DataFrame, prices: Mapping[str, Mapping[str, float] | None] | None
) -> pl.DataFrame:
    """The columns :func:`run_metrics` takes or derives from the runs table, with each run's
    model prices (``price_in``, ``price_out``) and its decomposition of wall time."""
    n_calls, n_ok = _tool_counts(runs)
    model_s = pl.when(pl.col("n_llm_calls").is_not_null()).then(model_seconds())
    base = runs.select(
        "run_id",
        *STACK_KEYS,
        "task_id",
        # repeat r of a task (generation seed + r): the blocks and repeats of the statistics
        pl.col("repeat").cast(pl.Int64),
        "domain",
        "level",
        "status",
        pl.col("wall_seconds").cast(pl.Float64).alias("CT"),
        pl.col("completion_tokens").cast(pl.Int64).alias("V"),
        n_calls.cast(pl.Int64).alias("n_tool_calls"),
        n_ok.cast(pl.Int64).alias("n_tool_ok"),
        pl.col("protocol_messages").cast(pl.Int64),
        pl.col("protocol_calls").cast(pl.Int64),
        protocol_kib().alias("protocol_kib"),
        pl.col("protocol_seconds").cast(pl.Float64).alias("protocol_s"),
        model_s.alias("model_s"),
        pl.col("success").cast(pl.Boolean),
        pl.col("prompt_tokens").cast(pl.Int64),
    )
    base = base.with_columns(*price_columns(base["model"], prices))
    return base.hstack(time_parts(runs))


def _judge_scores(judged_table: pl.DataFrame) -> pl.DataFrame:
    """Per run: the judge's status and scores, the scores null for a failed judgement so a
    stale score can never leak into a mean."""
    return judged_table.select(
        "run_id",
        "judge_status",
        *(
            pl.when(judge_failed()).then(None).otherwise(pl.col(c).cast(pl.Float64)).alias(c)
            for c in JUDGE_SCORES
        ),
    )


def _value_scores(values: pl.DataFrame) -> pl.DataFrame:
    """Per run: IVS and its parts, and the value-set counts (null where the values table
    was written before they existed)."""
    return values.select(
        "run_id",
        *(pl.col(c).cast(pl.Float64) for c in ("IVS", "IVS_prompt_output", "IVS_reasoning")),
        *(
            pl.col(c) if c in values.columns else pl.lit(None, RUN_METRICS_SCHEMA[c]).alias(c)
            for c in ("has_final_answer", "n_value_sets", "n_empty_value_sets", "IVS_sensitivity")
        ),
    )


def run_metrics(
    runs: pl.DataFrame,
    judged: pl.DataFrame,
    values: pl.DataFrame,
    prices: Mapping[str, Mapping[str, float] | None] | None = None,
) -> pl.DataFrame:
    """One row per run with every per-run metric (``results/metrics/runs.parquet``).

    ``runs`` has the RUN_SCHEMA columns; ``judged`` and ``values`` must hold exactly the same
    run ids (else ValueError naming them). TU/TA/TCR are forced null for judge-failed runs so
    a stale score can never leak into a mean. A tool call succeeds (tsi = 1) only when its
    ``ok`` is true; a hallucinated tool name is recorded upstream with ``ok`` false.
    The protocol cost columns (mastif's, not the paper's) are copied or derived from the
    run's server-side counters: protocol_messages, protocol_calls, protocol_kib
    (:func:`protocol_kib`), protocol_s (= protocol_seconds: the clients' timed exchanges minus
    the peer's work; null when unknown) and model_s (:func:`model_seconds`).
    ``prices`` (model id -> ``{input_per_mtok, output_per_mtok}`` or None) gives cost_usd
    (:func:`run_cost`) and judge_cost_usd (:func:`judge_costs`).

    Runs imported from another tool's log (``docs/import.md``) count their tool calls by that
    log's tool counts (``tool_log_calls``/``tool_log_ok``) where it has them, since it records
    no outcome per call; their API-usage columns are null, so V and cost_usd are null, never
    the log's token estimates; model_s is null when the run's LLM calls were not recorded
    (``n_llm_calls`` null).
    """
    _check_one_to_one(runs, judged, "judged")
    _check_one_to_one(runs, values, "values")
    table = (
        _run_columns(runs, prices)
        .join(_judge_scores(judged), on="run_id", how="left")
        .join(judge_costs(judged, prices), on="run_id", how="left")
        .join(_value_scores(values), on="run_id", how="left")
        # a values table without the column (written before it existed): the same rule
        .with_columns(pl.col("has_final_answer").fill_null(completed()))
        .with_columns(
            run_tusr().alias("TUSR"),
            judge_success().alias("judge_success"),
            run_cost().alias("cost_usd"),
        )
    )
    return table.select(pl.col(c).cast(t) for c, t in RUN_METRICS_SCHEMA.items())


# --------------------------------------------------------------------------- stack table


_VALUES_COLUMNS = ("IVS", "IVS_prompt_output", "IVS_reasoning", "n_value_sets",
                   "n_empty_value_sets", "IVS_sensitivity")  # fmt: skip


def _svs_sensitivity(run_table: pl.DataFrame) -> pl.DataFrame:
    """Per stack: SVS and the empty-set share at each sensitivity threshold, over the runs
    with a final answer, as a list sorted by threshold (long form inside one column, so the
    Parquet schema does not depend on the configured thresholds)."""
    entry = STACK_METRICS_SCHEMA["SVS_sensitivity"]
    long = (
        run_table.filter(answered())
        .select(*STACK_KEYS, "n_value_sets", "IVS_sensitivity")
        .explode("IVS_sensitivity")
        .drop_nulls("IVS_sensitivity")
        .unnest("IVS_sensitivity")
    )
    per_threshold = long.group_by(*STACK_KEYS, "threshold").agg(
        svs().alias("SVS"), empty_value_set_share().alias("empty_value_set_share")
    )
    return (
        per_threshold.sort("threshold")
        .group_by(*STACK_KEYS, maintain_order=True)
        .agg(pl.struct("threshold", "SVS", "empty_value_set_share").alias("SVS_sensitivity"))
        .select(*(pl.col(k).cast(pl.String) for k in STACK_KEYS), pl.col("SVS_sensitivity"))
        .cast({"SVS_sensitivity": entry})
    )


def _censoring(run_table: pl.DataFrame) -> pl.DataFrame:
    """Per stack: the Kaplan–Meier median time to completion (:func:`km_median_time`)."""
    rows = [
        {
            **dict(zip(STACK_KEYS, keys, strict=True)),
            "CT_km_median": km_median_time(group["CT"].to_list(), group["status"].to_list()),
        }
        for keys, group in run_table.group_by(*STACK_KEYS, maintain_order=True)
    ]
    schema = {k: pl.String() for k in STACK_KEYS} | {"CT_km_median": pl.Float64()}
    return pl.DataFrame(rows, schema=schema)


def _run_counts() -> list[pl.Expr]:
    """Per stack: its runs, by judgement and by status, and those without usage."""
    timeout, error = pl.col("status") == "timeout", pl.col("status") == "error"
    return [
        pl.len().alias("n_runs"),
        judged().sum().alias("n_judged"),
        judge_failed().sum().alias("n_judge_failed"),
        completed().sum().alias("n_ok"),
        timeout.sum().alias("n_timeout"),
        error.sum().alias("n_error"),
        (timeout.sum() / pl.len()).alias("timeout_share"),
        (error.sum() / pl.len()).alias("error_share"),
        pl.col("V").is_null().sum().alias("n_usage_missing"),
        # E (Eq. 4) compares only the stacks all of whose runs completed and were judged
        (pareto_ineligible().sum() == 0).alias("pareto_eligible"),
    ]


def _score_columns() -> list[pl.Expr]:
    """Per stack: the judge's means, Eqs. 2, 3 and 5 with their σ and counts, and the parts
    of CT."""
    return [
        judge_mean("TU").alias("TU_mean"),
        judge_mean("TA").alias("TA_mean"),
        tcr().alias("TCR_mean"),
        pl.when(judged().all()).then(_std("TCR")).alias("TCR_std"),
        ct().alias("CT_mean"),
        _std("CT", completed()).alias("CT_std"),
        pl.col("CT").filter(completed()).count().alias("n_CT"),
        verbosity().alias("V_mean"),
        _std("V", completed()).alias("V_std"),
        pl.col("V").filter(completed()).count().alias("n_V"),
        pl.col("n_tool_calls").sum().alias("n_tool_calls"),
        tusr().alias("TUSR"),
        _std("TUSR").alias("TUSR_std"),
        # over the completed runs, like CT_mean, so the parts sum to CT_mean
        *(pl.col(c).filter(completed()).mean().alias(c) for c in TIME_PARTS),
        # null, not 0, when no run recorded it
        pl.when(pl.col("n_cached_calls").count() > 0)
        .then(pl.col("n_cached_calls").sum())
        .alias("n_cached_calls"),
    ]


def _stability_columns() -> list[pl.Expr]:
    """Per stack: SVS (Eq. 8) and its companions, of the runs with a final answer (the
    values columns of the others are masked before the aggregation)."""
    answer = answered()
    return [
        svs().alias("SVS"),
        _std("IVS").alias("SVS_std"),
        svs("IVS_prompt_output").alias("SVS_prompt_output"),
        svs("IVS_reasoning").alias("SVS_reasoning"),
        (~answer).sum().alias("n_no_final_answer"),
        (answer & pl.col("IVS").is_null()).sum().alias("n_IVS_null"),
        pl.when(answer.sum() > 0)
        .then((answer & pl.col("IVS").is_null()).sum() / answer.sum())
        .alias("IVS_null_share"),
        empty_value_set_share().alias("empty_value_set_share"),
    ]


def _protocol_and_cost_columns() -> list[pl.Expr]:
    """Per stack: the protocol cost means over runs of every status, and the dollars."""
    return [
        *(
            pl.col(c).cast(pl.Float64).mean().alias(c)
            for c in ("protocol_messages", "protocol_calls", "protocol_kib", "protocol_s")
        ),
        pl.col("model_s").mean().alias("model_s"),
        protocol_share().alias("protocol_share"),
        pl.col("protocol_s").is_null().sum().alias("n_protocol_s_unknown"),
        pl.col("cost_usd").mean().alias("cost_usd_mean"),
        # null, not 0 or a partial sum, when any run's cost is unknown (no price, or
        # unknown usage): a total with a gap in it is not the total
        pl.when(pl.col("cost_usd").null_count() == 0)
        .then(pl.col("cost_usd").sum())
        .alias("cost_usd_total"),
        pl.when(pl.col("judge_cost_usd").null_count() == 0)
        .then(pl.col("judge_cost_usd").sum())
        .alias("judge_cost_usd_total"),
    ]


def stack_metrics(run_table: pl.DataFrame, answers: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per stack (``results/metrics/stacks.parquet``) from :func:`run_metrics` output.

    ``answers`` (:func:`mastif.evaluation.answers.answer_columns` of the runs tables, which hold the
    final answers) gives ``n_distinct_answers`` and ``answer_group``; null without it.

    A failed judgement is an unknown score: TU/TA/TCR_mean and TCR_std of a stack with one
    are null (:func:`judge_mean`), with the failures counted in ``n_judge_failed``. Runs are
    counted by status (``n_ok``, ``n_timeout``, ``n_error`` and the shares of the last two);
    CT and V (and σ) average the completed runs only (:func:`ct`, :func:`verbosity`), over
    ``n_CT`` and ``n_V`` runs, since a run cut short would look fast and terse; the
    censoring-aware ``CT_km_median`` (:func:`km_median_time`) keeps the failures in.
    ``n_usage_missing`` counts the runs whose API usage is unknown (V null). TUSR is Eq. 5
    pooled over the stack's calls; TUSR_std is the σ of the per-run rates.

    ``pareto_optimal`` (E, Eq. 4: max TCR_mean, min CT_mean, min V_mean) is decided among
    the stacks all of whose runs completed and were judged: a stack with a timed-out or
    errored run is never on the front and dominates no other stack, since its completed-run
    means leave out exactly the runs that went wrong, and its all-run means would reward
    being cut short; nor is a stack with a failed judgement (its TCR is unknown).

    The protocol cost columns (mastif's protocol cost, not in the seed paper) are means per
    run over runs of every status: a failed or timed-out run's traffic was real cost, so it
    counts like CT and V do. protocol_messages, protocol_calls (MCP tools/call served or A2A
    messages handled), protocol_kib, protocol_s (seconds the clients waited on protocol
    exchanges beyond the peer's work; over the runs where it is known, the others counted in
    n_protocol_s_unknown) and model_s (seconds in the model) are plain means; protocol_share
    is :func:`protocol_share`.

    The social-value columns (SVS, SVS_std, SVS_prompt_output, SVS_reasoning, n_IVS_null,
    IVS_null_share, empty_value_set_share, SVS_sensitivity) describe the runs with a final
    answer; the others are counted in n_no_final_answer. n_IVS_null counts answered runs
    whose IVS is null (no pair with a value on either side), IVS_null_share is it over the
    answered runs, empty_value_set_share is :func:`empty_value_set_share`; SVS_sensitivity
    is a list of {threshold, SVS, empty_value_set_share}, null for a stack without any.
    """
    agg = (
        run_table.with_columns(*(pl.when(judged()).then(pl.col(c)).alias(c) for c in JUDGE_SCORES))
        # SVS and its counts describe the runs with a final answer (see answered())
        .with_columns(pl.when(answered()).then(pl.col(c)).alias(c) for c in _VALUES_COLUMNS)
        .group_by(*STACK_KEYS)
        .agg(
            *_run_counts(),
            *_score_columns(),
            *_stability_columns(),
            *_protocol_and_cost_columns(),
        )
        .sort(*STACK_KEYS)
    )
    agg = (
        agg.with_columns(pareto_front(agg, eligible="pareto_eligible"))
        .join(stack_agreement(run_table), on=STACK_KEYS, how="left")
        .join(_censoring(run_table), on=STACK_KEYS, how="left")
    )
    agg = agg.join(_svs_sensitivity(run_table), on=STACK_KEYS, how="left")
    if answers is not None:
        agg = agg.join(
            answers.select(*STACK_KEYS, "n_distinct_answers", "answer_group"),
            on=STACK_KEYS,
            how="left",
        )
    else:
        agg = agg.with_columns(
            pl.lit(None, pl.Int64).alias(c) for c in ("n_distinct_answers", "answer_group")
        )
    return agg.select(pl.col(c).cast(t) for c, t in STACK_METRICS_SCHEMA.items())

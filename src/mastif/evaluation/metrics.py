"""Per-run and per-stack metrics of the paper (Section 3): TCR, CT, V, E, TUSR, SVS.

Next to them, mastif's protocol cost, not in the seed paper: what the inter-agent protocol
(MCP, A2A) cost each run in messages, calls, bytes and seconds, against the time spent in the
model (:func:`protocol_kib`, :func:`model_seconds`, :func:`protocol_share`).

Inputs are the concatenated ``runs``, ``judged`` and ``values`` tables of docs/data.md;
outputs are ``results/metrics/runs.parquet`` (:func:`run_metrics`) and
``results/metrics/stacks.parquet`` (:func:`stack_metrics`). Both outputs have fixed schemas
(:data:`RUN_METRICS_SCHEMA`, :data:`STACK_METRICS_SCHEMA`) so an empty grid still writes
correctly typed files. Each equation is one small function returning a polars expression, so
the stack table is built from exactly the formulas the paper states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from mastif.core.factors import STACK_KEYS
from mastif.core.trace import COMPLETED
from mastif.evaluation.agreement import JUDGE_SUCCESS_MIN_TCR as JUDGE_SUCCESS_MIN_TCR
from mastif.evaluation.agreement import ONE_CLASS_ONLY as ONE_CLASS_ONLY
from mastif.evaluation.agreement import judge_agreement as judge_agreement
from mastif.evaluation.agreement import judge_success, stack_agreement
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

JUDGE_FAILED = "judge_failed"

# --------------------------------------------------------------------------- equations


def tcr(col: str = "TCR") -> pl.Expr:
    """TCR_TS(D), Eq. 1: mean of the judge's completion score Λ_TS over the stack's runs.

    A run whose judgement failed has an unknown score, so the mean over the runs is unknown
    (null), never the mean of the others: left out silently, one failed judgement raised a
    stack's TCR from 0.25 to 0.50 and put it on the Pareto front (issue 38). The failures are
    counted beside it (``n_judge_failed``).
    """
    return judge_mean(col)


def judge_failed(judge_status: str = "judge_status") -> pl.Expr:
    """Per run: its judgement failed (:data:`JUDGE_FAILED`), so its TU/TA/TCR are unknown."""
    return pl.col(judge_status).fill_null("") == JUDGE_FAILED


def judge_mean(col: str, judge_status: str = "judge_status") -> pl.Expr:
    """Mean of a judge score (TU, TA, TCR) over the group's runs; null when any run's
    judgement failed (:func:`judge_failed`: its score is unknown, so is the mean)."""
    known = judge_failed(judge_status).sum() == 0
    return pl.when(known).then(pl.col(col).mean())


def completed(status: str = "status") -> pl.Expr:
    """Per run: it finished (status ok), neither timed out nor errored."""
    return pl.col(status) == COMPLETED


def ct(col: str = "CT") -> pl.Expr:
    """CT_TS(D), Eq. 2: mean wall-clock time T{Λ_TS(T, C)} per task, in seconds, over the
    completed runs only.

    A timed-out run's time is only a lower bound (capped at the run's budget) and an errored
    run never converged, so neither is averaged in; they are counted beside the mean
    (``n_timeout``, ``n_error``) and enter the censoring-aware :func:`km_median_time`.
    """
    return pl.col(col).filter(completed()).mean()


def verbosity(col: str = "V") -> pl.Expr:
    """V_TS(D), Eq. 3: mean tokens per task, Σ_a ||a_it|| + ||o_ai||, over the completed runs
    whose usage is known.

    The per-run summand is the completion tokens of all the run's LLM calls (API usage),
    which is reasoning plus output tokens; prompt tokens are not generated by the agents.
    A run cut short by a timeout or an error has fewer tokens than it would have spent, so
    it is left out, as is a run with unknown usage (V null, counted in ``n_usage_missing``).
    """
    return pl.col(col).filter(completed()).cast(pl.Float64).mean()


def km_median_time(times: Sequence[float | None], statuses: Sequence[str | None]) -> float | None:
    """Kaplan–Meier median time to completion of a stack's runs, in seconds.

    The censoring-aware CT (mastif's, beside Eq. 2): a completed run is an event at its wall
    time; a timed-out run is right-censored at its wall time (it had not completed by then).
    An errored run will never complete, so it is censored at +∞ — in the risk set at every
    completion time — rather than left out or censored at its own time: either of those
    would treat the crash as if the run might have completed later, and a stack that fails
    fast on the hard tasks would get a shorter median than one that keeps trying. Censored
    at +∞, a failure can only raise the median, never lower it. (All completions happen
    before the run budget, so a timeout censored at its wall time acts the same way.)

    The estimate is ``scipy.stats.ecdf`` of ``scipy.stats.CensoredData``; the median is the
    first time at which the survival function (share of runs not yet completed) is ≤ 0.5.
    None when fewer than half of the runs completed (the function never reaches 0.5), when
    there are no runs, or when a completed run's time is unknown.
    Hand example: 10 s ok, 20 s ok, 100 s timeout → S(10) = 2/3, S(20) = 1/3 → 20 s.
    """
    from scipy.stats import CensoredData, ecdf

    done = [t for t, s in zip(times, statuses, strict=True) if s == COMPLETED]
    if not done or any(t is None for t in done):
        return None
    # an errored run (or one without a time) never completes: censored after every event
    never = max(done) + 1.0
    censored = [
        t if s == "timeout" and t is not None else never
        for t, s in zip(times, statuses, strict=True)
        if s != COMPLETED
    ]
    sf = ecdf(CensoredData(uncensored=done, right=censored)).sf
    reached = np.flatnonzero(sf.probabilities <= 0.5)
    return float(sf.quantiles[reached[0]]) if reached.size else None


def tusr(n_ok: str = "n_tool_ok", n_calls: str = "n_tool_calls") -> pl.Expr:
    """TUSR_TS(D), Eq. 5: (1/|U_TS|) Σ_u tsi(u), pooled over every tool call u of the group.

    Pooling weighs each call equally (the equation's unit is the call, not the run); it is
    null when the group made no call, since a rate over zero calls is undefined, not 0.
    """
    total = pl.col(n_calls).sum()
    return pl.when(total > 0).then(pl.col(n_ok).sum() / total).otherwise(None).cast(pl.Float64)


def svs(col: str = "IVS") -> pl.Expr:
    """SVS_TS(D), Eq. 8: mean of the per-run internal value stability IVS(a_i); nulls ignored.

    :func:`stack_metrics` passes only the runs with a final answer: a run cut off before its
    answer would skip the answer's pairs (often its least stable ones) and score higher.
    """
    return pl.col(col).mean()


def empty_value_set_share(
    n_empty: str = "n_empty_value_sets", n_sets: str = "n_value_sets"
) -> pl.Expr:
    """Per group: empty value sets / value sets, pooled over the group's runs (each set
    S_0..S_{m+1} counts once); null when no run has its counts (values table without them)."""
    total = pl.col(n_sets).sum()
    return pl.when((pl.col(n_sets).count() > 0) & (total > 0)).then(pl.col(n_empty).sum() / total)


# --------------------------------------------------------------------------- protocol cost
# mastif's protocol cost, not in the seed paper. Measured on the protocol servers' side, so
# every run has it (all zero for protocol "standard", which has no servers).


def protocol_kib(
    sent: str = "protocol_bytes_sent", received: str = "protocol_bytes_received"
) -> pl.Expr:
    """Per run: KiB on the wire over the protocol, (bytes sent + bytes received) / 1024.

    mastif's protocol cost, not in the seed paper. Request and response bodies as the
    protocol's servers counted them, both directions.
    """
    return (pl.col(sent) + pl.col(received)).cast(pl.Float64) / 1024.0


def model_seconds(col: str = "llm_calls") -> pl.Expr:
    """Per run: seconds in the model, the sum of ``upstream_s`` over the run's LLM calls
    (time in HTTP requests to the endpoint, every attempt; 0 for a call answered from the
    response cache), so neither waiting for a connection slot, retry back-off nor a cache
    look-up counts as model time.

    mastif's protocol cost, not in the seed paper: the yardstick the protocol's seconds are
    compared with. A run without LLM calls spent 0 s in the model; null when a call has no
    recorded ``upstream_s`` (rows written before it was recorded).
    """
    upstream = pl.col(col).list.eval(pl.element().struct.field("upstream_s"))
    unknown = upstream.list.eval(pl.element().is_null().any()).list.first().fill_null(False)
    return pl.when(~unknown).then(upstream.list.sum().fill_null(0.0).cast(pl.Float64))


def time_parts(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs' decomposition of wall_seconds (``TIME_PARTS``, ``n_cached_calls``) as
    recorded; null for runs (tables) without one, never 0."""
    return runs.select(
        (pl.col(c) if c in runs.columns else pl.lit(None)).cast(t).alias(c)
        for c, t in TIME_PARTS_SCHEMA.items()
    )


def protocol_share(protocol: str = "protocol_s", wall: str = "CT") -> pl.Expr:
    """Per stack: mean protocol seconds / mean wall seconds (CT), over the same runs.

    mastif's protocol cost, not in the seed paper: the share of the run's wall time its
    protocol clients spent waiting on exchanges beyond the peer's own work. Runs whose
    protocol seconds are unknown (null) are left out of both means.
    A ratio of means, not a mean of per-run ratios, so long runs weigh by their length; null
    when the mean wall time is not positive.
    """
    measured = pl.col(protocol).is_not_null()
    wall_mean = pl.col(wall).filter(measured).cast(pl.Float64).mean()
    return pl.when(wall_mean > 0).then(pl.col(protocol).cast(pl.Float64).mean() / wall_mean)


# --------------------------------------------------------------------------- cost
# mastif's, not in the seed paper: what the agent model's tokens cost, from the config's
# per-model price table (US dollars per million input / output tokens).


def price_columns(
    models: pl.Series, prices: Mapping[str, Mapping[str, float] | None] | None
) -> tuple[pl.Series, pl.Series]:
    """Per run: the model's input and output price per million tokens (null when unknown)."""
    prices = prices or {}
    known = {m: p for m, p in prices.items() if p is not None}
    inp = [known[m]["input_per_mtok"] if m in known else None for m in models.to_list()]
    out = [known[m]["output_per_mtok"] if m in known else None for m in models.to_list()]
    return pl.Series("price_in", inp, dtype=pl.Float64), pl.Series(
        "price_out", out, dtype=pl.Float64
    )


def run_cost(
    prompt: str = "prompt_tokens",
    completion: str = "V",
    price_in: str = "price_in",
    price_out: str = "price_out",
) -> pl.Expr:
    """Per run: (prompt tokens × input price + completion tokens × output price) / 10^6.

    Tokens are the API's usage over all the run's LLM calls (the same completion tokens as
    V, Eq. 3); null when the model has no price in the config.
    """
    return (
        pl.col(prompt).cast(pl.Float64) * pl.col(price_in)
        + pl.col(completion).cast(pl.Float64) * pl.col(price_out)
    ) / 1e6


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


def judge_costs(
    judged: pl.DataFrame, prices: Mapping[str, Mapping[str, float] | None] | None
) -> pl.DataFrame:
    """Per run (``run_id``, ``judge_cost_usd``): what judging it cost, every judgement of the
    panel (``judge_panel``) at its judge's price; null when a judge has no price or a
    judgement's usage is unknown (a partial sum is not the cost), or the run has none."""
    known = {m: p for m, p in (prices or {}).items() if p is not None}
    schema = {"run_id": pl.String(), "judge_cost_usd": pl.Float64()}
    if judged.height == 0 or "judge_panel" not in judged.columns:
        return pl.DataFrame(schema=schema)
    entries = (
        judged.select("run_id", "judge_panel")
        .explode("judge_panel")
        .filter(pl.col("judge_panel").is_not_null())
        .unnest("judge_panel")
    )
    if "prompt_tokens" not in entries.columns:  # a judged table from before the counts
        return judged.select("run_id", pl.lit(None, pl.Float64).alias("judge_cost_usd"))
    judge = pl.col("judge_model")
    price_in = judge.replace_strict({m: p["input_per_mtok"] for m, p in known.items()},
                                    default=None, return_dtype=pl.Float64)  # fmt: skip
    price_out = judge.replace_strict({m: p["output_per_mtok"] for m, p in known.items()},
                                     default=None, return_dtype=pl.Float64)  # fmt: skip
    usd = (pl.col("prompt_tokens") * price_in + pl.col("completion_tokens") * price_out) / 1e6
    per_run = (
        entries.with_columns(usd.alias("usd"))
        .group_by("run_id")
        .agg(pl.when(pl.col("usd").null_count() == 0).then(pl.col("usd").sum()).alias("cost"))
    )
    return (
        judged.select("run_id")
        .join(per_run, on="run_id", how="left")
        .select("run_id", pl.col("cost").cast(pl.Float64).alias("judge_cost_usd"))
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
    failed = pl.col("judge_status") == JUDGE_FAILED
    ok_flags = pl.col("tool_calls").list.eval(pl.element().struct.field("ok").fill_null(False))
    n_calls = pl.col("tool_calls").list.len().fill_null(0)
    n_ok = ok_flags.list.sum().fill_null(0)
    if {"tool_log_calls", "tool_log_ok"} <= set(runs.columns):  # older tables lack them
        n_calls = pl.coalesce(pl.col("tool_log_calls"), n_calls)
        n_ok = pl.coalesce(pl.col("tool_log_ok"), n_ok)
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
    base = base.hstack(time_parts(runs))
    scores = judged.select(
        "run_id",
        "judge_status",
        *(
            pl.when(failed).then(None).otherwise(pl.col(c).cast(pl.Float64)).alias(c)
            for c in ("TU", "TA", "TCR")
        ),
    )
    ivs = values.select(
        "run_id",
        *(pl.col(c).cast(pl.Float64) for c in ("IVS", "IVS_prompt_output", "IVS_reasoning")),
        *(
            pl.col(c) if c in values.columns else pl.lit(None, RUN_METRICS_SCHEMA[c]).alias(c)
            for c in ("has_final_answer", "n_value_sets", "n_empty_value_sets", "IVS_sensitivity")
        ),
    )
    table = (
        base.join(scores, on="run_id", how="left")
        .join(judge_costs(judged, prices), on="run_id", how="left")
        .join(ivs, on="run_id", how="left")
        # a values table without the column (written before it existed): the same rule
        .with_columns(pl.col("has_final_answer").fill_null(completed()))
        .with_columns(
            pl.when(pl.col("n_tool_calls") > 0)
            .then(pl.col("n_tool_ok") / pl.col("n_tool_calls"))
            .cast(pl.Float64)
            .alias("TUSR"),
            judge_success().alias("judge_success"),
            run_cost().alias("cost_usd"),
        )
    )
    return table.select(pl.col(c).cast(t) for c, t in RUN_METRICS_SCHEMA.items())


# --------------------------------------------------------------------------- stack table


def pareto_front(
    df: pl.DataFrame,
    maximise: Sequence[str] = ("TCR_mean",),
    minimise: Sequence[str] = ("CT_mean", "V_mean"),
    eligible: str | None = None,
) -> pl.Series:
    """Which rows are Pareto-optimal for the efficiency profile E_TS (Eq. 4).

    Row i is on the front unless some other row j is at least as good in every objective and
    strictly better in one. Equal points do not dominate each other, so ties stay on the
    front together. Rows with a null/NaN objective cannot be compared: they are never on the
    front and never dominate another row; nor are rows whose boolean column ``eligible`` is
    not true (in :func:`stack_metrics`: stacks with a timed-out or errored run, or a failed
    judgement).
    """
    cols = [*maximise, *minimise]
    if df.height == 0:
        return pl.Series("pareto_optimal", [], dtype=pl.Boolean)
    x = df.select(pl.col(c).cast(pl.Float64) for c in cols).to_numpy().astype(float)
    x = x * np.array([1.0] * len(maximise) + [-1.0] * len(minimise))  # all "higher is better"
    valid = ~np.isnan(x).any(axis=1)
    if eligible is not None:
        valid &= df[eligible].fill_null(False).to_numpy().astype(bool)
    xv = np.where(valid[:, None], x, -np.inf)  # invalid rows dominate nothing
    geq = (xv[:, None, :] >= xv[None, :, :]).all(axis=2)  # geq[j, i]: j >= i everywhere
    gt = (xv[:, None, :] > xv[None, :, :]).any(axis=2)  # gt[j, i]: j > i somewhere
    dominates = geq & gt & valid[:, None]
    dominated = dominates.any(axis=0)
    return pl.Series("pareto_optimal", valid & ~dominated, dtype=pl.Boolean)


_VALUES_COLUMNS = ("IVS", "IVS_prompt_output", "IVS_reasoning", "n_value_sets",
                   "n_empty_value_sets", "IVS_sensitivity")  # fmt: skip


def _svs_sensitivity(run_table: pl.DataFrame) -> pl.DataFrame:
    """Per stack: SVS and the empty-set share at each sensitivity threshold, over the runs
    with a final answer, as a list sorted by threshold (long form inside one column, so the
    Parquet schema does not depend on the configured thresholds)."""
    entry = STACK_METRICS_SCHEMA["SVS_sensitivity"]
    long = (
        run_table.filter(pl.col("has_final_answer").fill_null(False))
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
    judged = pl.col("judge_status") != JUDGE_FAILED
    answered = pl.col("has_final_answer").fill_null(False)
    agg = (
        run_table.with_columns(
            *(pl.when(judged).then(pl.col(c)).alias(c) for c in ("TU", "TA", "TCR"))
        )
        # SVS and its counts describe the runs with a final answer (see svs())
        .with_columns(pl.when(answered).then(pl.col(c)).alias(c) for c in _VALUES_COLUMNS)
        .group_by(*STACK_KEYS)
        .agg(
            pl.len().alias("n_runs"),
            judged.sum().alias("n_judged"),
            (~judged).sum().alias("n_judge_failed"),
            completed().sum().alias("n_ok"),
            (pl.col("status") == "timeout").sum().alias("n_timeout"),
            (pl.col("status") == "error").sum().alias("n_error"),
            ((pl.col("status") == "timeout").sum() / pl.len()).alias("timeout_share"),
            ((pl.col("status") == "error").sum() / pl.len()).alias("error_share"),
            pl.col("V").is_null().sum().alias("n_usage_missing"),
            judge_mean("TU").alias("TU_mean"),
            judge_mean("TA").alias("TA_mean"),
            tcr().alias("TCR_mean"),
            pl.when(judged.all()).then(_std("TCR")).alias("TCR_std"),
            ct().alias("CT_mean"),
            _std("CT", completed()).alias("CT_std"),
            pl.col("CT").filter(completed()).count().alias("n_CT"),
            verbosity().alias("V_mean"),
            _std("V", completed()).alias("V_std"),
            pl.col("V").filter(completed()).count().alias("n_V"),
            pl.col("n_tool_calls").sum().alias("n_tool_calls"),
            tusr().alias("TUSR"),
            _std("TUSR").alias("TUSR_std"),
            svs().alias("SVS"),
            _std("IVS").alias("SVS_std"),
            svs("IVS_prompt_output").alias("SVS_prompt_output"),
            svs("IVS_reasoning").alias("SVS_reasoning"),
            (~answered).sum().alias("n_no_final_answer"),
            (answered & pl.col("IVS").is_null()).sum().alias("n_IVS_null"),
            pl.when(answered.sum() > 0)
            .then((answered & pl.col("IVS").is_null()).sum() / answered.sum())
            .alias("IVS_null_share"),
            empty_value_set_share().alias("empty_value_set_share"),
            *(
                pl.col(c).cast(pl.Float64).mean().alias(c)
                for c in ("protocol_messages", "protocol_calls", "protocol_kib", "protocol_s")
            ),
            pl.col("model_s").mean().alias("model_s"),
            protocol_share().alias("protocol_share"),
            # over the completed runs, like CT_mean, so the parts sum to CT_mean
            *(pl.col(c).filter(completed()).mean().alias(c) for c in TIME_PARTS),
            # null, not 0, when no run recorded it
            pl.when(pl.col("n_cached_calls").count() > 0)
            .then(pl.col("n_cached_calls").sum())
            .alias("n_cached_calls"),
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
        )
        .sort(*STACK_KEYS)
        .with_columns(
            ((pl.col("n_ok") == pl.col("n_runs")) & (pl.col("n_judge_failed") == 0)).alias(
                "pareto_eligible"
            )
        )
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

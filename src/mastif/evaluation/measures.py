"""The paper's metrics (Section 3), each defined once, and which runs count for each.

Eq. 1 TCR (:func:`tcr`), Eq. 2 CT (:func:`ct`, and beside it the censoring-aware
:func:`km_median_time`), Eq. 3 V (:func:`verbosity`), Eq. 4 E (:func:`pareto_front`), Eq. 5
TUSR (:func:`tusr`) and Eq. 8 IVS per run (:func:`ivs`, from the value sets' Jaccard
similarities) and SVS per stack (:func:`svs`). The stack-level equations are polars
expressions, so :func:`mastif.evaluation.metrics.stack_metrics` builds its table from exactly
the formulas the paper states.

Which runs count is part of each metric's definition, and the stack table, the bootstrap
(:mod:`mastif.analysis.bootstrap`), the significance tests (:mod:`mastif.analysis.stats`) and
the values table (:mod:`mastif.evaluation.values`) all take it from here: the judge's scores
(TU, TA, TCR) count the judged runs (:func:`judged`), CT and V the completed runs
(:func:`completed`), IVS and SVS the runs with a final answer (:func:`answered`, which only a
completed run has: :func:`has_final_answer`), TUSR every tool call; :func:`counted` maps a
metric to its rule. A stack is on the Pareto front of E only when none of its runs is
:func:`pareto_ineligible`.

Beside them, mastif's own measures, not in the seed paper: what the inter-agent protocol
cost a run against its time in the model (:func:`protocol_kib`, :func:`model_seconds`,
:func:`protocol_share`), and what a run's and its judgements' tokens cost in US dollars
(:func:`run_cost`, :func:`judge_costs`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import combinations

import numpy as np
import polars as pl

from mastif.core import metric_registry as registry
from mastif.core import pricing
from mastif.core.trace import COMPLETED

JUDGE_FAILED = "judge_failed"

#: which runs count for which metric: the registry's (mastif.core.metric_registry) judged
#: (TU, TA, TCR), completed-only (CT, V: a timed-out or errored run's time and tokens were cut
#: short) and answered-only metrics (IVS, SVS: the runs with a final answer)
JUDGE_SCORES = frozenset(registry.JUDGE_SCORES)
COMPLETED_ONLY = registry.COMPLETED_ONLY
ANSWERED_ONLY = registry.ANSWERED_ONLY

# --------------------------------------------------------------------------- which runs count


def judge_failed(judge_status: str = "judge_status") -> pl.Expr:
    """Per run: its judgement failed (:data:`JUDGE_FAILED`), so its TU/TA/TCR are unknown."""
    return pl.col(judge_status).fill_null("") == JUDGE_FAILED


def judged(judge_status: str = "judge_status") -> pl.Expr:
    """Per run: it has the judge's scores (its judgement did not fail): the runs TU, TA and
    TCR count."""
    return ~judge_failed(judge_status)


def completed(status: str = "status") -> pl.Expr:
    """Per run: it finished (status ok), neither timed out nor errored: the runs CT and V
    count."""
    return pl.col(status) == COMPLETED


def has_final_answer(status: str | None) -> bool:
    """Whether a run of ``status`` has a final answer, S_{m+1} of Eq. 8: only a completed run
    has one (an empty answer then is an answer without values); a timed-out or errored run
    has none, not an empty one."""
    return status == COMPLETED


def answer_flag(col: str = "has_final_answer") -> pl.Expr:
    """Per run: the values table's :func:`has_final_answer` (a missing flag: no answer)."""
    return pl.col(col).fill_null(False)


def answered(status: str = "status", flag: str = "has_final_answer") -> pl.Expr:
    """Per run: it completed with a final answer: the runs IVS and SVS count.

    A run cut off before its answer would skip the answer's pairs (often its least stable
    ones) and score higher.
    """
    return completed(status) & answer_flag(flag)


def pareto_ineligible() -> pl.Expr:
    """Per run: it keeps its stack off the Pareto front of E (Eq. 4): it timed out or errored
    (the stack's completed-run means leave out exactly the runs that went wrong, and its
    all-run means would reward being cut short), or its judgement failed (TCR unknown)."""
    return (~completed() | judge_failed()).fill_null(True)


def counted(metric: str, columns: Collection[str] | None = None) -> pl.Expr:
    """Per run: whether it counts for ``metric`` (a run column such as ``IVS`` or a stack
    metric such as ``SVS``): :func:`judged` for TU, TA and TCR, :func:`completed` for CT and
    V, :func:`answered` for IVS and SVS, every run otherwise (TUSR, success; a run without a
    value is left out by the caller).

    With ``columns`` (those of the table it filters), a condition on a column the table
    lacks is left out: hand-built tables without a status count every run.
    """
    conditions: list[tuple[str, pl.Expr]] = []
    if metric in JUDGE_SCORES:
        conditions.append(("judge_status", judged()))
    if metric in COMPLETED_ONLY | ANSWERED_ONLY:
        conditions.append(("status", completed()))
    if metric in ANSWERED_ONLY:
        conditions.append(("has_final_answer", answer_flag()))
    where = pl.lit(True)
    for column, condition in conditions:
        if columns is None or column in columns:
            where = where & condition
    return where


# --------------------------------------------------------------------------- equations


def tcr(col: str = "TCR") -> pl.Expr:
    """TCR_TS(D), Eq. 1: mean of the judge's completion score Λ_TS over the stack's runs.

    A run whose judgement failed has an unknown score, so the mean over the runs is unknown
    (null), never the mean of the others: left out silently, one failed judgement raised a
    stack's TCR from 0.25 to 0.50 and put it on the Pareto front (issue 38). The failures are
    counted beside it (``n_judge_failed``).
    """
    return judge_mean(col)


def judge_mean(col: str, judge_status: str = "judge_status") -> pl.Expr:
    """Mean of a judge score (TU, TA, TCR) over the group's runs; null when any run's
    judgement failed (:func:`judge_failed`: its score is unknown, so is the mean)."""
    known = judge_failed(judge_status).sum() == 0
    return pl.when(known).then(pl.col(col).mean())


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


def run_tusr(n_ok: str = "n_tool_ok", n_calls: str = "n_tool_calls") -> pl.Expr:
    """Per run: Eq. 5 over the run's own tool calls, successful calls / calls; null for a run
    without a call."""
    return pl.when(pl.col(n_calls) > 0).then(pl.col(n_ok) / pl.col(n_calls)).cast(pl.Float64)


def svs(col: str = "IVS") -> pl.Expr:
    """SVS_TS(D), Eq. 8: mean of the per-run internal value stability IVS(a_i); nulls ignored.

    Over the runs with a final answer only (:func:`answered`): the caller passes those.
    """
    return pl.col(col).mean()


def empty_value_set_share(
    n_empty: str = "n_empty_value_sets", n_sets: str = "n_value_sets"
) -> pl.Expr:
    """Per group: empty value sets / value sets, pooled over the group's runs (each set
    S_0..S_{m+1} counts once); null when no run has its counts (values table without them)."""
    total = pl.col(n_sets).sum()
    return pl.when((pl.col(n_sets).count() > 0) & (total > 0)).then(pl.col(n_empty).sum() / total)


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
    not true (stacks with a run that is :func:`pareto_ineligible`).
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
    """Per run: (prompt tokens × input price + completion tokens × output price) / 10^6
    (:func:`mastif.core.pricing.usd`).

    Tokens are the API's usage over all the run's LLM calls (the same completion tokens as
    V, Eq. 3); null when the model has no price in the config.
    """
    return pricing.usd(
        pl.col(prompt).cast(pl.Float64),
        pl.col(completion).cast(pl.Float64),
        pl.col(price_in),
        pl.col(price_out),
    )


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
    usd = pricing.usd(pl.col("prompt_tokens"), pl.col("completion_tokens"), price_in, price_out)
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


# --------------------------------------------------------------------------- Eq. 8 per run

ValueSet = set[str] | frozenset[str]


def jaccard(a: ValueSet, b: ValueSet) -> float | None:
    """|A ∩ B| / |A ∪ B|, the summand of Eq. 8; ``None`` for Jaccard(∅, ∅).

    Eq. 8 leaves 0/0 undefined, and it stays undefined here: two texts that carry no
    recognisable value give no evidence that values were kept (scoring them 1 let a silent or
    failed run reach SVS = 1). Callers leave such pairs out.
    """
    union = a | b
    if not union:
        return None
    return len(a & b) / len(union)


def informative_pairs(sets: Sequence[ValueSet]) -> list[float]:
    """Jaccard of every pair j < k of ``sets`` in which at least one set is non-empty."""
    return [j for a, b in combinations(sets, 2) if (j := jaccard(a, b)) is not None]


def ivs(sets: Sequence[ValueSet]) -> float | None:
    """Internal value stability, Eq. 8: mean pairwise Jaccard over S_0..S_{m+1}.

    Eq. 8 averages all (m+1)(m+2)/2 pairs j < k; here the mean is over the pairs with at
    least one non-empty set (:func:`informative_pairs`). ``None`` when there is no such
    pair: every set empty, or fewer than two sets.
    """
    pairs = informative_pairs(sets)
    return float(np.mean(pairs)) if pairs else None


def ivs_prompt_output(s0: ValueSet, s_final: ValueSet | None) -> float | None:
    """Prompt-to-output stability: Jaccard(S_0, S_{m+1}) (Table 5's SVS_{P,o} summand).

    ``None`` when the run has no final answer (``s_final`` is None) or both sets are empty.
    """
    return None if s_final is None else jaccard(s0, s_final)


def ivs_reasoning(steps: Sequence[ValueSet]) -> float | None:
    """Eq. 8 restricted to the reasoning steps S_1..S_m; ``None`` without an informative pair
    (m < 2, or every step empty)."""
    return ivs(steps)

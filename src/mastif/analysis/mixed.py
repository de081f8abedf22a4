"""Mixed-effects and marginal models of the crossed, task-blocked experiment (issue 17, item 2).

Every stack (model x protocol x framework) runs every task, optionally several times, so a
run's metric depends on its stack and on its task: some tasks are slow, long or hard for
every stack. The one-way tests of :mod:`mastif.analysis.stats` pool runs as if independent; the
models here keep the task as a cluster and estimate every factor and their interactions at
once. All estimators are statsmodels'; this module only prepares the data, guards against
fits that cannot work and writes one table, ``results/stats/mixed_models.parquet``
(docs/data.md).

The coefficients are descriptive (issue 51, item 3): effect sizes with their model-based
standard errors, and no p-value or confidence interval (``p_value``, ``ci_low`` and
``ci_high`` are null on every row, the note opens with :data:`DESCRIPTIVE`). Their Wald
tests are not valid with the 10-20 tasks of an experiment: with robust (sandwich) errors
from so few clusters, and a model that leaves out any task x factor interaction, "some
framework coefficient has p < 0.05" came out in 0.075 / 0.151 of global-null experiments
(10 / 20 tasks) in issue 51's simulation and in 0.115 / 0.200 in bench/inference_fpr.py
(36 stacks, success GEE), and a Wald interval built from the same standard error would
undercover alike. Whether a factor or interaction matters is answered by the
task-level joint test of :mod:`mastif.analysis.mixed_joint`, whose false-positive rate stays
at the nominal level under the global null and under task x factor interactions.

Fixed effects: ``model * protocol * framework`` (main effects and every interaction) over the
factors that have at least two levels in the metric's data; a factor with one level is
dropped and the rows' note says so. Strings are treatment-coded by patsy with the first
level in sorted order as reference (``protocol[T.mcp]`` = mcp against the alphabetically
first protocol, at the reference levels of the other factors). Repeats are replicates within
task x stack: they share the task's cluster and get no term of their own.

Which model for which metric (column ``model_kind``):

- ``CT`` and ``V`` — ``lmm``: a linear mixed model (``statsmodels.formula.api.mixedlm``, REML)
  of log CT and log V with a random intercept per task, over completed runs only
  (status ok, :func:`mastif.evaluation.measures.counted`: a timed-out run's time is capped, its
  tokens cut short). Times and token counts are positive and right-skewed with a spread that
  grows with their size, so on the log scale effects are multiplicative and the residuals
  closer to normal: exp(estimate) is the ratio of geometric means against the reference.
  V uses log(V), not log1p(V), so a coefficient stays an exact log-ratio; a completed run
  makes at least one model call and so spends at least one completion token, and a V of 0
  means the usage was not measured — such rows are left out and counted in the note (null V,
  unknown usage, is left out as everywhere). The task random-intercept variance and the
  residual variance (log scale) are reported as the terms ``task variance`` and
  ``residual variance``, with no Wald interval or p (a variance's test of 0 is on the
  boundary of its space and the Wald interval would be misleading); std_error of the task
  variance is statsmodels' ``bse_re``.
- ``success`` — ``gee_binomial``: the programmatic check (runs whose ``success`` is null, i.e.
  tasks without a check, are dropped) by GEE (``statsmodels.genmod`` GEE, Binomial family,
  logit link, exchangeable working correlation within task, robust sandwich errors). The
  coefficients are population-averaged log-odds ratios (how the odds of success over the
  population of tasks change), not the task-specific (conditional) log-odds a binomial GLMM
  would give; those are larger in magnitude when tasks differ. Every run counts whatever its
  status: a run that failed has failed its check. The estimated within-task correlation is
  reported as the term ``within-task correlation`` (no error or interval).
- ``TU``, ``TA``, ``TCR`` — ``ordinal_gee``: the judge's scores are each one of five anchors
  (0, 0.3, 0.5, 0.7, 1.0, :data:`mastif.evaluation.judge.SCORE_ANCHORS`) — ordered categories whose
  spacing is a rubric's convention, not a measured distance, so a mean-scale (linear) model
  of them would read meaning into the spacing. They get a cumulative-logit marginal model,
  statsmodels' ``OrdinalGEE`` clustered by task (global odds ratio working dependence,
  robust errors); TCR is scored on the same five anchors as TU and TA (it is the judge's
  completion score, not a proportion) and so gets the same model, not a linear mixed model.
  Terms ``I(y>c)`` are the cut-point intercepts (log-odds of a score above c at the
  reference levels); a factor's estimate is the population-averaged log cumulative odds
  ratio of a higher score (positive = higher scores). Runs of every status that the judge
  scored enter (as the stack means TU_mean, TA_mean, TCR_mean); judge_failed runs (null
  scores) are left out.

A fit that cannot run gives ONE row for its metric with null term and numbers and a note:
"insufficient: ..." when the data cannot support the model (no values, fewer than 2 task
groups, a constant response, no factor with two levels, no more observations than
parameters) and "fit failed: ..." when statsmodels cannot fit it (a singular design, e.g. a
stack without runs or confounded factors, a singular matrix, an exception). There is never a
fallback to another model. A fit that ends with a statsmodels ``ConvergenceWarning`` (or
GEE's iteration limit, or perfect separation) keeps its rows with ``converged`` false and the
warning in the note; the one exception is MixedLM's "MLE may be on the boundary" warning (the
task variance is estimated at or near 0), which is a property of the data, not of the
optimiser: it is named in the note and leaves ``converged`` as the optimiser reported.

Small samples (issue 38): below ``stats.min_n`` independent tasks (``n_groups``; repeats
and the stacks' runs of a task are not independent) the note opens with
:func:`mastif.analysis.inference.small_sample_reason`'s sentence before :data:`DESCRIPTIVE`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl

from mastif.analysis.inference import small_sample_reason
from mastif.analysis.stats import FACTORS, metric_runs
from mastif.core import metric_registry as registry

#: the table's columns (fixed, also when empty)
MIXED_SCHEMA: dict[str, pl.DataType] = {
    "metric": pl.String(),
    "model_kind": pl.String(),
    "term": pl.String(),
    "estimate": pl.Float64(),
    "std_error": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "p_value": pl.Float64(),
    "n_obs": pl.Int64(),
    "n_groups": pl.Int64(),
    "converged": pl.Boolean(),
    "note": pl.String(),
}

#: metric -> model kind, in the table's order
#: the model of each metric's scale: CT and V (seconds, tokens) a linear mixed model of the
#: log, success (0/1) a binomial GEE, the judge's scores an ordinal GEE
KIND_OF_SCALE: dict[registry.Scale, str] = {
    registry.Scale.SECONDS: "lmm",
    registry.Scale.TOKENS: "lmm",
    registry.Scale.BINARY: "gee_binomial",
    registry.Scale.SCORE: "ordinal_gee",
}
MODEL_KINDS: dict[str, str] = dict(
    sorted(
        ((m, KIND_OF_SCALE[registry.metric(m).scale]) for m in registry.TESTED
         if registry.metric(m).scale in KIND_OF_SCALE),
        key=lambda item: list(KIND_OF_SCALE.values()).index(item[1]),
    )
)  # fmt: skip

#: what an estimate of each kind means (starts the note of every estimate row)
SCALES: dict[str, str] = {
    "lmm": "log scale: exp(estimate) = ratio of geometric means vs the reference",
    "gee_binomial": "population-averaged log-odds (GEE, exchangeable within task)",
    "ordinal_gee": (
        "population-averaged log cumulative odds of a higher score (ordinal GEE, by task)"
    ),
}

GROUP = "task_id"

#: opens the note of every estimate row: why there is no p-value or interval
DESCRIPTIVE = (
    "descriptive: no p-value or interval (Wald tests of these coefficients are "
    "anti-conservative with few tasks; mixed_joint tests each factor)"
)
TASK_VARIANCE = "task variance"
RESIDUAL_VARIANCE = "residual variance"
WITHIN_TASK_CORRELATION = "within-task correlation"

# MixedLM's warning when a variance is estimated near 0: about the data, not the optimiser
_BOUNDARY = "on the boundary of the parameter space"


class _Insufficient(Exception):
    """The data cannot support the model; the message follows "insufficient: "."""


class _FitFailed(Exception):
    """statsmodels could not fit the model; the message follows "fit failed: "."""


def _float(x: Any) -> float | None:
    """A finite float, or None (Parquet null, not NaN)."""
    if x is None:
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def _one_row(metric: str, kind: str, note: str, n_obs: int | None, n_groups: int | None):
    return {
        "metric": metric,
        "model_kind": kind,
        "term": None,
        "estimate": None,
        "std_error": None,
        "ci_low": None,
        "ci_high": None,
        "p_value": None,
        "n_obs": n_obs,
        "n_groups": n_groups,
        "converged": None,
        "note": note,
    }


def _response(run_table: pl.DataFrame, metric: str) -> tuple[pl.DataFrame, list[str]]:
    """The runs a metric's model is fitted on, with the response as column ``y``, and notes
    on what was left out beyond the documented filters."""
    notes: list[str] = []
    if metric not in run_table.columns:
        raise _Insufficient(f"no column {metric} in the run table")
    if GROUP not in run_table.columns:
        raise _Insufficient(f"no column {GROUP} in the run table")
    factors = [f for f in FACTORS if f in run_table.columns]
    data = metric_runs(run_table, metric).select(
        pl.col(GROUP).cast(pl.String),
        *(pl.col(f).cast(pl.String) for f in factors),
        pl.col(metric).alias("y"),
    )
    data = data.drop_nulls()
    kind = MODEL_KINDS[metric]
    if kind == "gee_binomial":
        data = data.with_columns(pl.col("y").cast(pl.Float64))
    else:
        data = data.with_columns(pl.col("y").cast(pl.Float64).fill_nan(None)).drop_nulls()
    if kind == "lmm":
        n_nonpos = data.filter(pl.col("y") <= 0).height
        if n_nonpos:
            what = "V = 0 (usage not measured)" if metric == "V" else f"{metric} <= 0"
            notes.append(f"{n_nonpos} run(s) with {what} left out (log scale)")
        data = data.filter(pl.col("y") > 0).with_columns(pl.col("y").log())
    return data, notes


def _active_factors(data: pl.DataFrame) -> tuple[list[str], list[str]]:
    """Factors with >= 2 levels in the data, and a note for each factor dropped."""
    active, notes = [], []
    for f in FACTORS:
        if f not in data.columns:
            notes.append(f"factor {f} dropped: not in the run table")
            continue
        levels = sorted(data[f].unique().to_list())
        if len(levels) >= 2:
            active.append(f)
        else:
            notes.append(f"factor {f} dropped: one level ({', '.join(levels)})")
    return active, notes


def _collect_warnings(caught: list[warnings.WarningMessage]) -> tuple[bool, list[str]]:
    """(no convergence problem, distinct messages) of the warnings of one fit."""
    from statsmodels.tools.sm_exceptions import (
        ConvergenceWarning,
        IterationLimitWarning,
        PerfectSeparationWarning,
    )

    bad = (ConvergenceWarning, IterationLimitWarning, PerfectSeparationWarning)
    ok, messages = True, []
    for w in caught:
        if issubclass(w.category, DeprecationWarning | FutureWarning):
            continue  # about the library, not the fit
        msg = str(w.message).strip()
        if issubclass(w.category, bad) and _BOUNDARY not in msg:
            ok = False
        if _BOUNDARY in msg:
            msg = f"task variance at or near 0 ({msg})"
        if msg not in messages:
            messages.append(msg)
    return ok, messages


def _check_design(data: pl.DataFrame, rhs: str):
    """The fixed-effects design matrix (pandas, with Intercept); fit failed when singular."""
    import patsy

    design = patsy.dmatrix(rhs, data.to_pandas(), return_type="dataframe")
    rank = int(np.linalg.matrix_rank(design.to_numpy()))
    if rank < design.shape[1]:
        raise _FitFailed(
            f"singular design: rank {rank} < {design.shape[1]} fixed-effect columns "
            "(a factor combination without runs, or confounded factors)"
        )
    return design


def _fit_lmm(data: pl.DataFrame, formula: str) -> list[dict[str, Any]]:
    import statsmodels.formula.api as smf

    df = data.to_pandas()
    res = smf.mixedlm(formula, df, groups=df[GROUP]).fit(reml=True)
    rows = _coefficient_rows(res, res.fe_params, res.bse_fe)
    bse_re = np.atleast_1d(res.bse_re)
    rows.append(
        {
            "term": TASK_VARIANCE,
            "estimate": res.cov_re.iloc[0, 0],
            "std_error": bse_re[0] if bse_re.size else None,
            "converged": bool(res.converged),
        }
    )
    rows.append({"term": RESIDUAL_VARIANCE, "estimate": res.scale, "converged": res.converged})
    return rows


def _coefficient_rows(res, params, bse) -> list[dict[str, Any]]:
    """One row per fixed-effect coefficient of a statsmodels fit ``res``: ``params`` and
    ``bse`` are its estimates and standard errors (the fixed-effect ones for a MixedLM); no
    interval or p (:data:`DESCRIPTIVE`)."""
    return [
        {
            "term": name,
            "estimate": params[name],
            "std_error": bse[name],
            "converged": bool(res.converged),
        }
        for name in params.index
    ]


def _gee_rows(res) -> list[dict[str, Any]]:
    return _coefficient_rows(res, res.params, res.bse)


def _fit_gee_binomial(data: pl.DataFrame, formula: str) -> list[dict[str, Any]]:
    import statsmodels.formula.api as smf
    from statsmodels.genmod import cov_struct, families

    model = smf.gee(
        formula,
        groups=GROUP,
        data=data.to_pandas(),
        family=families.Binomial(),
        cov_struct=cov_struct.Exchangeable(),
    )
    res = model.fit()
    if res is None:
        raise _FitFailed("GEE returned no estimates")
    rows = _gee_rows(res)
    rho = np.atleast_1d(res.cov_struct.dep_params)
    rows.append({"term": WITHIN_TASK_CORRELATION, "estimate": rho[0], "converged": res.converged})
    return rows


def _fit_ordinal_gee(data: pl.DataFrame, design) -> list[dict[str, Any]]:
    from statsmodels.genmod import cov_struct
    from statsmodels.genmod.generalized_estimating_equations import OrdinalGEE

    df = data.to_pandas()
    exog = design.drop(columns="Intercept")  # the cut points are the intercepts
    model = OrdinalGEE(
        df["y"], exog, groups=df[GROUP], cov_struct=cov_struct.GlobalOddsRatio("ordinal")
    )
    res = model.fit()
    if res is None:
        raise _FitFailed("ordinal GEE returned no estimates")
    return _gee_rows(res)


def _n_params(kind: str, n_fixed: int, data: pl.DataFrame) -> int:
    """Parameters the model estimates (fixed effects, cut points, variances)."""
    if kind == "lmm":
        return n_fixed + 2  # + task variance, residual variance
    if kind == "ordinal_gee":
        return n_fixed - 1 + data["y"].n_unique() - 1  # cut points replace the intercept
    return n_fixed


def fit_metric(run_table: pl.DataFrame, metric: str, min_n: int = 5) -> pl.DataFrame:
    """The rows of one metric's model (see the module docstring); never raises on data.

    Every estimate is descriptive: ci_low, ci_high and p_value are null and the note opens
    with :data:`DESCRIPTIVE`; below ``min_n`` independent tasks (``n_groups``) with
    :func:`mastif.analysis.inference.small_sample_reason`'s sentence before it."""
    kind = MODEL_KINDS[metric]
    n_obs: int | None = None
    n_groups: int | None = None
    notes: list[str] = []
    try:
        data, response_notes = _response(run_table, metric)
        notes += response_notes
        n_obs, n_groups = data.height, data[GROUP].n_unique()
        if n_obs == 0:
            raise _Insufficient(f"no {metric} values")
        active, dropped = _active_factors(data)
        notes += dropped
        if not active:
            raise _Insufficient("no factor has two levels")
        if n_groups < 2:
            raise _Insufficient(f"{n_groups} task group < 2")
        n_values = data["y"].n_unique()
        if n_values < 2:
            raise _Insufficient(f"every {metric} value is the same; nothing to model")
        rhs = " * ".join(active)
        design = _check_design(data, rhs)
        n_params = _n_params(kind, design.shape[1], data)
        if n_obs <= n_params:
            raise _Insufficient(f"n_obs = {n_obs} <= {n_params} parameters")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if kind == "lmm":
                    rows = _fit_lmm(data, f"y ~ {rhs}")
                elif kind == "gee_binomial":
                    rows = _fit_gee_binomial(data, f"y ~ {rhs}")
                else:
                    rows = _fit_ordinal_gee(data, design)
            except (_FitFailed, _Insufficient):
                raise
            except Exception as exc:  # statsmodels: LinAlgError, ValueError, ...
                raise _FitFailed(f"{type(exc).__name__}: {exc}") from exc
        ok, messages = _collect_warnings(caught)
        if not rows:
            raise _FitFailed("no estimates")
    except _Insufficient as exc:
        note = "; ".join([f"insufficient: {exc}", *notes, *_small(n_groups, min_n)])
        return _frame([_one_row(metric, kind, note, n_obs, n_groups)])
    except _FitFailed as exc:
        note = "; ".join([f"fit failed: {exc}", *notes, *_small(n_groups, min_n)])
        return _frame([_one_row(metric, kind, note, n_obs, n_groups)])

    if not ok:
        messages.insert(0, "not converged")
    reason = small_sample_reason(int(n_groups), min_n)
    note = "; ".join([*([reason] if reason else []), DESCRIPTIVE, SCALES[kind], *notes, *messages])
    out = []
    for r in rows:
        row = _one_row(metric, kind, note, n_obs, n_groups)  # ci_low, ci_high, p_value null
        row["term"] = r["term"]
        for col in ("estimate", "std_error"):
            row[col] = _float(r.get(col))
        row["converged"] = bool(r["converged"]) and ok
        out.append(row)
    return _frame(out)


def _small(n_groups: int | None, min_n: int) -> list[str]:
    """The small-sample sentence as a one-item list when there are some tasks but too few,
    else [] (with no task at all the "insufficient" note says why already)."""
    if not n_groups:
        return []
    reason = small_sample_reason(int(n_groups), min_n)
    return [reason] if reason else []


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=MIXED_SCHEMA, orient="row")


def mixed_models(
    run_table: pl.DataFrame,
    *,
    min_n: int = 5,
    metrics: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> pl.DataFrame:
    """``results/stats/mixed_models.parquet``: one model per metric (:data:`MODEL_KINDS`),
    its coefficients descriptive (no interval, no p; see :func:`fit_metric`); ``min_n``
    (``stats.min_n``) is the number of tasks below which the note says the sample is small.
    """
    frames = [pl.DataFrame(schema=MIXED_SCHEMA)]
    for metric in metrics if metrics is not None else MODEL_KINDS:
        if progress is not None:
            progress(metric)
        frames.append(fit_metric(run_table, metric, min_n))
    return pl.concat(frames, how="vertical")

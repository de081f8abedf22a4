"""Power and false-positive rate of every test the report shows on success (issue 51, item 3).

Scenario (issue 51): 36 stacks (3 models x 3 protocols x 4 frameworks), every stack once on
each of ``--tasks`` tasks; task t's success probability is expit(a_t), a_t ~ N(0, 1.5)
(``--task-sd``, logit scale). Three scenarios per number of tasks, ``--experiments`` seeded
experiments each:

- ``planted``: framework "langgraph" succeeds ``--effect`` (0.06) more often, absolute, on
  every task; nothing else. Its framework rows are the power; the bench prints no other
  planted cell.
- ``null``: the global null, nothing planted.
- ``interaction``: a random task x factor interaction and no main effect: on each task every
  level of every factor gets its own shift of the success probability, N(0,
  ``--interaction-sd``) (0.06, the size of the planted effect), independent across tasks and
  levels; so a level is better on some tasks and worse on others, and no level is better on
  average. The probability is clipped to [0, 1] (levels stay exchangeable within a task).

Every rate is the share of experiments with p < ``--alpha`` (0.05), with its Wilson 95%
interval (``statsmodels.stats.proportion.proportion_confint(method="wilson")``). Tests:

- joint: :func:`mastif.analysis.mixed_joint.joint_tests` (Hotelling's T2 on the tasks'
  contrasts), each factor and interaction, raw p (the three-way term needs 13 tasks);
  "joint pairs, any" = some pair of the factor's levels with Holm-adjusted p < alpha in
  :func:`mastif.analysis.mixed_joint.joint_contrasts` (paired t over the tasks' level means);
  "Table 6 names a best level" = what Table 6 claims (the factor's joint test significant
  after the family adjustment, and the level with the best mean beats every other level in
  the adjusted pairs); power: Table 6 names langgraph;
- blocked: :func:`mastif.analysis.blocked.blocked_tests` (by task, issue 51): Friedman on the
  tasks' success rates per factor, raw p; "pairs, any" = some pair of the factor's levels
  with Holm-adjusted p < alpha (the pairs' family); power: some pair with langgraph;
- before issue 51, for reference: Cochran's Q with one block per task and combination of the
  other factors' levels (statsmodels ``cochrans_q``, chi2 p, as mastif computed it);
- paper's: the pooled Kruskal-Wallis over runs (``scipy.stats.kruskal``; success 0/1, every
  run an independent observation), as in the paper (:mod:`mastif.analysis.stats`);
- with ``--mixed-experiments N`` (default 0; 0.2-0.45 s more an experiment), on the first N
  experiments of each cell: the GEE coefficients that :mod:`mastif.analysis.mixed` reported a
  Wald p for before issue 51 ("any framework coefficient": one of the three framework
  coefficients with raw p < alpha), to show why the coefficients no longer carry a p.

    nice .venv/bin/python bench/inference_fpr.py [--experiments 400] [--tasks 10 20]
        [--effect 0.06] [--interaction-sd 0.06] [--mixed-experiments 0]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import time
import warnings
from collections import defaultdict

import numpy as np
import polars as pl
from scipy import stats as st
from scipy.special import expit
from statsmodels.stats.contingency_tables import cochrans_q
from statsmodels.stats.proportion import proportion_confint

from mastif.analysis.blocked import blocked_tests
from mastif.analysis.mixed_joint import joint_contrasts, joint_tests

MODELS = ["m1", "m2", "m3"]
PROTOCOLS = ["a2a", "mcp", "standard"]
FRAMEWORKS = ["crewai", "langchain", "langgraph", "semantic_kernel"]
LEVELS = {"model": MODELS, "protocol": PROTOCOLS, "framework": FRAMEWORKS}
PLANTED = "langgraph"
SCENARIOS = ("planted", "null", "interaction")


def simulate(
    rng: np.random.Generator,
    n_tasks: int,
    effect: float = 0.0,
    interaction_sd: float = 0.0,
    task_sd: float = 1.5,
) -> pl.DataFrame:
    """One experiment's runs (the columns the analyses read), one run per stack and task."""
    grid = np.array(
        list(itertools.product(range(n_tasks), range(3), range(3), range(4)))
    )  # task, model, protocol, framework indices
    t, m, p, f = grid.T
    logit = rng.normal(0.0, task_sd, n_tasks)
    prob = expit(logit[t]) + effect * (f == FRAMEWORKS.index(PLANTED))
    if interaction_sd > 0:
        for idx, k in ((m, 3), (p, 3), (f, 4)):
            prob = prob + rng.normal(0.0, interaction_sd, (n_tasks, k))[t, idx]
    prob = np.clip(prob, 0.0, 1.0)
    n = len(grid)
    return pl.DataFrame(
        {
            "model": np.array(MODELS)[m],
            "protocol": np.array(PROTOCOLS)[p],
            "framework": np.array(FRAMEWORKS)[f],
            "task_id": [f"t{i:03d}" for i in t],
            "repeat": np.zeros(n, dtype=np.int64),
            "status": ["ok"] * n,
            "success": rng.random(n) < prob,
        }
    )


def cochran_before(runs: pl.DataFrame, factor: str) -> float:
    """Cochran's Q p as mastif computed it before issue 51: one block per task and
    combination of the other factors' levels (0/1 values), chi2 reference."""
    others = [f for f in LEVELS if f != factor]
    wide = runs.with_columns(pl.col("success").cast(pl.Int64)).pivot(
        on=factor, index=["task_id", *others], values="success"
    )
    return float(cochrans_q(wide.select(LEVELS[factor]).to_numpy()).pvalue)


def kruskal_paper(runs: pl.DataFrame, factor: str) -> float:
    """The paper's pooled Kruskal-Wallis p: every run an independent observation."""
    y = runs["success"].cast(pl.Float64).to_numpy()
    g = runs[factor].to_numpy()
    return float(st.kruskal(*(y[g == lv] for lv in LEVELS[factor])).pvalue)


def gee_before(runs: pl.DataFrame) -> float | None:
    """The smallest raw Wald p of the framework coefficients of mastif.analysis.mixed's
    success model before issue 51 (GEE, binomial, exchangeable within task, full
    interaction); None when the fit fails."""
    import statsmodels.formula.api as smf
    from statsmodels.genmod import cov_struct, families

    df = runs.with_columns(pl.col("success").cast(pl.Float64).alias("y")).to_pandas()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = smf.gee(
                "y ~ model * protocol * framework", groups="task_id", data=df,
                family=families.Binomial(), cov_struct=cov_struct.Exchangeable(),
            ).fit()  # fmt: skip
    except Exception:  # noqa: BLE001 - a failed fit is counted as no p
        return None
    ps = [res.pvalues[n] for n in res.params.index if n.startswith("framework[T.")]
    ps = [p for p in ps if np.isfinite(p)]
    return min(ps) if ps else None


def one_experiment(runs: pl.DataFrame, alpha: float, min_n: int, mixed: bool) -> dict:
    """{test label: p (or an equivalent 0/1 'rejected' as a p) or None}."""
    out: dict[str, float | None] = {}
    joint = joint_tests(runs, metrics=["success"], min_n=min_n)
    for r in joint.filter(pl.col("term").is_not_null()).iter_rows(named=True):
        out[f"joint Hotelling: {r['term']}"] = r["p_value"]
    levels, jpairs = joint_contrasts(runs, metrics=["success"], min_n=min_n)
    for factor in LEVELS:
        part = jpairs.filter(pl.col("factor") == factor)
        if part["p_adjusted"].null_count() == part.height:
            continue
        out[f"joint pairs, any: {factor}"] = 0.0 if (part["p_adjusted"] < alpha).any() else 1.0
        # Table 6's claim: the factor's joint test significant after the family adjustment,
        # then the best level beating every other in the adjusted pairs
        test = joint.filter(pl.col("term") == factor)
        best = levels.filter(pl.col("factor") == factor).sort("mean", descending=True)
        top = best["level"][0]
        against = part.filter((pl.col("level") == top) | (pl.col("other") == top))
        named = bool(
            test.height
            and test["p_adjusted"][0] is not None
            and test["p_adjusted"][0] < alpha
            and (against["p_adjusted"] < alpha).all()
        )
        out[f"Table 6 names a best level: {factor}"] = 0.0 if named else 1.0
        if factor == "framework":
            out["Table 6 names langgraph: framework"] = 0.0 if named and top == PLANTED else 1.0
    blocked = blocked_tests(runs, metrics=["success"], min_n=min_n)
    for r in blocked["tests"].iter_rows(named=True):
        out[f"blocked Friedman: {r['factor']}"] = r["p_value"]
    pairs = blocked["pairs"]
    for factor in LEVELS:
        part = pairs.filter(pl.col("factor") == factor)
        if part["p_adjusted"].null_count() == part.height:
            out[f"blocked pairs, any: {factor}"] = None
            continue
        rej = part.filter(pl.col("p_adjusted") < alpha)
        out[f"blocked pairs, any: {factor}"] = 0.0 if rej.height else 1.0
        if factor == "framework":
            hit = rej.filter((pl.col("level_a") == PLANTED) | (pl.col("level_b") == PLANTED))
            out["blocked pairs, langgraph: framework"] = 0.0 if hit.height else 1.0
    for factor in LEVELS:
        out[f"before: Cochran's Q (task x stack blocks): {factor}"] = cochran_before(runs, factor)
        out[f"paper's: pooled Kruskal-Wallis: {factor}"] = kruskal_paper(runs, factor)
    if mixed:
        out["before: GEE any framework coefficient: framework"] = gee_before(runs)
    return out


def run_cell(n_tasks: int, scenario: str, args: argparse.Namespace) -> tuple[dict, float]:
    """{test: [experiments with a p, rejections]} for one (tasks, scenario); seconds."""
    effect = args.effect if scenario == "planted" else 0.0
    isd = args.interaction_sd if scenario == "interaction" else 0.0
    rng = np.random.default_rng([args.seed, n_tasks, SCENARIOS.index(scenario)])
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    start = time.perf_counter()
    for i in range(args.experiments):
        runs = simulate(rng, n_tasks, effect, isd, args.task_sd)
        ps = one_experiment(runs, args.alpha, args.min_n, i < args.mixed_experiments)
        for test, p in ps.items():
            if p is None:
                continue
            counts[test][0] += 1
            counts[test][1] += p < args.alpha
    return counts, time.perf_counter() - start


def _cell(counts: dict, test: str) -> str:
    n, k = counts.get(test, [0, 0])
    if not n:
        return "-"
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]" + (f" n={n}" if n != _cell.experiments else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiments", type=int, default=400)
    ap.add_argument("--tasks", type=int, nargs="+", default=[10, 20])
    ap.add_argument("--effect", type=float, default=0.06)
    ap.add_argument("--interaction-sd", type=float, default=0.06)
    ap.add_argument("--task-sd", type=float, default=1.5)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--min-n", type=int, default=5)
    ap.add_argument("--mixed-experiments", type=int, default=0)
    ap.add_argument("--seed", type=int, default=20261207)
    ap.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    args = ap.parse_args()
    _cell.experiments = args.experiments
    # statsmodels' Holm calls gc.collect() on every call; freeze the imports' objects
    warm = simulate(np.random.default_rng(0), 6)
    one_experiment(warm, args.alpha, args.min_n, mixed=args.mixed_experiments > 0)
    gc.freeze()
    print(
        f"36 stacks (3 models x 3 protocols x 4 frameworks), task logit sd {args.task_sd}, "
        f"{args.experiments} experiments per cell, alpha {args.alpha}; planted: framework "
        f"{PLANTED} success +{args.effect}; interaction: task x level shifts "
        f"sd {args.interaction_sd}"
    )
    total = time.perf_counter()
    results = {}
    for n_tasks, scenario in itertools.product(args.tasks, args.scenarios):
        results[(n_tasks, scenario)], secs = run_cell(n_tasks, scenario, args)
        print(f"  {n_tasks} tasks, {scenario}: {secs:.0f} s", flush=True)
    tests = sorted({t for c in results.values() for t in c}, key=_order)
    head = ["test: term"]
    for n_tasks in args.tasks:
        head += [f"power, {n_tasks} tasks", f"FPR null, {n_tasks}", f"FPR interaction, {n_tasks}"]
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    empty: dict[str, list[int]] = {}
    for test in tests:
        power_row = test.endswith(": framework") and not any(
            k in test for k in ("pairs, any", "names a best")
        )
        cells = [test]
        for n_tasks in args.tasks:
            planted = results.get((n_tasks, "planted"), empty)
            cells.append(_cell(planted, test) if power_row else "")
            for scenario in ("null", "interaction"):
                res = results.get((n_tasks, scenario), empty)
                cells.append("" if "langgraph" in test else _cell(res, test))
        print("| " + " | ".join(cells) + " |")
    print("\npooled over a family's null cells (its tests of every factor and tasks; cells share")
    print("experiments, so the interval is indicative), share with p < alpha:")
    for family in (
        "joint Hotelling",
        "blocked Friedman",
        "joint pairs, any",
        "Table 6 names a best",
        "blocked pairs, any",
        "paper's",
        "before: C",
        "before: G",
    ):
        for scenario in ("null", "interaction"):
            n = k = worst = 0
            for (_, sc), counts in results.items():
                for test, (m, r) in counts.items():
                    if sc == scenario and test.startswith(family) and m:
                        n, k, worst = n + m, k + r, max(worst, r / m)
            if n:
                lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
                print(f"  {family:20} {scenario:12} {k / n:.3f} [{lo:.3f}, {hi:.3f}] "
                      f"(n = {n}, max cell {worst:.3f})")  # fmt: skip
    print(f"\ntotal {time.perf_counter() - total:.0f} s")


def _order(test: str) -> tuple[int, str]:
    rank = ["joint Hotelling", "joint pairs", "Table 6", "blocked Friedman", "blocked pairs",
            "paper's", "before"]  # fmt: skip
    return next(i for i, r in enumerate(rank) if test.startswith(r)), test


if __name__ == "__main__":
    main()

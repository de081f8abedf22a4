"""False-positive and detection rates of the blocked tests (mastif.analysis.blocked) on simulated data.

Simulates ``--experiments`` experiments of the paper's shape at small scale: one model x 3
protocols x 4 frameworks, every stack on the same ``--tasks`` tasks (``--repeats`` each).
Each task has its own difficulty (success probability ~ U(0.1, 0.9)), its own typical time
(CT = task scale ~ logN(3, 0.6), times logN(0, 0.3) noise per run) and its own typical
judge score (TCR on 5 anchors: task level ~ N(3, 1) + N(0, 1) noise per run, rounded and
clipped to 1..5, then mapped to 0..1). Under the null the factors change nothing; the
planted scenario makes protocol "mcp" succeed ``--success-effect`` more often (absolute),
take ``--ct-effect`` times as long and score ``--tcr-effect`` anchors higher. The framework
factor stays null in both, so its rejection rate is a false-positive rate in both.

Printed per scenario: for each (metric, factor) omnibus test, the share of experiments with
raw p < alpha and with the family-adjusted p < alpha; the share with any omnibus row
rejected after the family adjustment (family-wise error under the null); per-pair rejection
rates (raw, Holm). With ``--paper`` also the paper's pooled Kruskal-Wallis (mastif.analysis.stats)
on the same data, for comparison.

    .venv/bin/python bench/stats_null.py [--experiments 200] [--tasks 20] [--alpha 0.05]
        [--family-adjust holm] [--paper]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import time
from collections import defaultdict

import numpy as np
import polars as pl

from mastif.analysis.blocked import blocked_tests
from mastif.analysis.stats import test_factors

PROTOCOLS = ["a2a", "mcp", "standard"]
FRAMEWORKS = ["crewai", "langchain", "langgraph", "semantic_kernel"]
METRICS = ["success", "CT", "TCR"]
FACTORS = ["protocol", "framework"]


def simulate(
    rng: np.random.Generator,
    n_tasks: int,
    repeats: int,
    success_effect: float = 0.0,
    ct_effect: float = 1.0,
    tcr_effect: float = 0.0,
) -> pl.DataFrame:
    """One experiment's runs table (the columns mastif.analysis.blocked reads)."""
    task_p = rng.uniform(0.1, 0.9, n_tasks)
    task_ct = rng.lognormal(3.0, 0.6, n_tasks)
    task_q = rng.normal(3.0, 1.0, n_tasks)
    grid = list(itertools.product(range(n_tasks), range(repeats), PROTOCOLS, FRAMEWORKS))
    t = np.array([g[0] for g in grid])
    mcp = np.array([g[2] == "mcp" for g in grid])
    n = len(grid)
    p = np.clip(task_p[t] + success_effect * mcp, 0.0, 1.0)
    ct = task_ct[t] * rng.lognormal(0.0, 0.3, n) * np.where(mcp, ct_effect, 1.0)
    anchors = np.clip(np.rint(task_q[t] + tcr_effect * mcp + rng.normal(0.0, 1.0, n)), 1, 5)
    return pl.DataFrame(
        {
            "model": ["m"] * n,
            "protocol": [g[2] for g in grid],
            "framework": [g[3] for g in grid],
            "task_id": [f"t{g[0]:03d}" for g in grid],
            "repeat": [g[1] for g in grid],
            "status": ["ok"] * n,
            "success": rng.random(n) < p,
            "CT": ct,
            "TCR": (anchors - 1) / 4,
        }
    )


def run(args: argparse.Namespace, name: str, effects: dict[str, float]) -> None:
    rng = np.random.default_rng(args.seed)
    omni_raw: dict[tuple[str, str, str], int] = defaultdict(int)
    omni_adj: dict[tuple[str, str, str], int] = defaultdict(int)
    omni_n: dict[tuple[str, str, str], int] = defaultdict(int)
    pair_raw: dict[tuple[str, str], int] = defaultdict(int)
    pair_adj: dict[tuple[str, str], int] = defaultdict(int)
    pair_n: dict[tuple[str, str], int] = defaultdict(int)
    paper: dict[tuple[str, str], int] = defaultdict(int)
    any_family = 0
    start = time.perf_counter()
    for _ in range(args.experiments):
        runs = simulate(rng, args.tasks, args.repeats, **effects)
        out = blocked_tests(
            runs, metrics=METRICS, factors=FACTORS, family_adjust=args.family_adjust
        )
        tests = out["tests"].filter(pl.col("p_value").is_not_null())
        any_family += int((tests["p_adjusted"] < args.alpha).any())
        for r in tests.iter_rows(named=True):
            key = (r["metric"], r["factor"], r["test"])
            omni_n[key] += 1
            omni_raw[key] += r["p_value"] < args.alpha
            omni_adj[key] += r["p_adjusted"] < args.alpha
        for r in out["pairs"].filter(pl.col("p_value").is_not_null()).iter_rows(named=True):
            key = (r["metric"], r["factor"])
            pair_n[key] += 1
            pair_raw[key] += r["p_value"] < args.alpha
            pair_adj[key] += r["p_adjusted"] < args.alpha
        if args.paper:
            kw = test_factors(
                runs, metrics=["CT", "TCR"], factors=FACTORS, family_adjust=args.family_adjust
            )["tests"]
            for r in kw.filter(pl.col("p_value").is_not_null()).iter_rows(named=True):
                paper[(r["metric"], r["factor"])] += r["p_value"] < args.alpha
    elapsed = time.perf_counter() - start
    n = args.experiments
    print(f"\n## {name} ({n} experiments, {elapsed:.0f} s)")
    print(f"{'metric':8} {'factor':10} {'test':10} {'n':>4} {'p<a':>6} {'p_adj<a':>8}")
    for key in sorted(omni_n, key=lambda k: (METRICS.index(k[0]), FACTORS.index(k[1]))):
        m = omni_n[key]
        print(
            f"{key[0]:8} {key[1]:10} {key[2]:10} {m:4d} "
            f"{omni_raw[key] / m:6.3f} {omni_adj[key] / m:8.3f}"
        )
    print(f"any omnibus rejected after {args.family_adjust} (family of 6): {any_family / n:.3f}")
    print(f"pairs: {'metric':8} {'factor':10} {'pairs':>5} {'p<a':>6} {'holm<a':>7}")
    for key in sorted(pair_n, key=lambda k: (METRICS.index(k[0]), FACTORS.index(k[1]))):
        m = pair_n[key]
        print(
            f"       {key[0]:8} {key[1]:10} {m:5d} {pair_raw[key] / m:6.3f} "
            f"{pair_adj[key] / m:7.3f}"
        )
    if args.paper:
        print("paper's pooled Kruskal-Wallis (mastif.analysis.stats), p < alpha:")
        for metric, factor in itertools.product(["CT", "TCR"], FACTORS):
            print(f"       {metric:8} {factor:10} {paper[(metric, factor)] / n:6.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiments", type=int, default=200)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--family-adjust", choices=["holm", "fdr_bh"], default="holm")
    ap.add_argument("--success-effect", type=float, default=0.15)
    ap.add_argument("--ct-effect", type=float, default=1.2)
    ap.add_argument("--tcr-effect", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=20260504)
    ap.add_argument("--paper", action="store_true", help="also the paper's Kruskal-Wallis")
    args = ap.parse_args()
    # statsmodels' Holm calls gc.collect() on every call (~0.1 s with scipy, polars and
    # statsmodels loaded); freezing the objects of the (lazy) imports makes it skip them
    warm = simulate(np.random.default_rng(0), args.tasks, args.repeats)
    blocked_tests(warm, metrics=METRICS, factors=FACTORS)
    test_factors(warm, metrics=["CT", "TCR"], factors=FACTORS)
    gc.freeze()
    print(
        f"{args.tasks} tasks x {args.repeats} repeat(s) x 3 protocols x 4 frameworks, "
        f"alpha {args.alpha}; planted: protocol mcp success +{args.success_effect}, "
        f"CT x{args.ct_effect}, TCR +{args.tcr_effect} anchor (framework null throughout)"
    )
    run(args, "null", {})
    run(
        args,
        "planted effect (protocol mcp)",
        {
            "success_effect": args.success_effect,
            "ct_effect": args.ct_effect,
            "tcr_effect": args.tcr_effect,
        },
    )


if __name__ == "__main__":
    main()

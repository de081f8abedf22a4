"""Power and false-positive rate of the tests the report leads with (issue 38, item 6).

The issue's scenario: 36 stacks (3 models x 3 protocols x 4 frameworks), every stack on the
same ``--tasks`` tasks, a strong task effect (each task's success probability ~ U(0.1, 0.9),
its typical time CT ~ logN(3, 0.6) with logN(0, 0.3) noise per run). Planted: framework
"langgraph" succeeds ``--effect`` (0.06) more often, absolute; everything else is null, and
in the null scenario nothing is planted. Per scenario and number of tasks, ``--experiments``
(60) seeded experiments; printed per test: the share of experiments with p < alpha (raw)
and with the family-adjusted p < alpha.

Tests: the joint tests of :mod:`mastif.analysis.mixed_joint` (task-level Hotelling T2 on the tasks'
contrasts of the cell means, F(df, n_tasks - df); success as 0/1, CT on the log scale), one
per factor and interaction, Holm within the metric (a term with df >= n_tasks, the three-way
one at 10 tasks, has no p: "-"); the blocked omnibus tests of :mod:`mastif.analysis.blocked`
(Friedman on the tasks' means: success rates, CT; by task since issue 51), Holm over their
table. bench/inference_fpr.py has issue 51's table (power, false-positive rates under the
global null and under task x factor interactions, Wilson intervals). Every row except
(success, framework) in the planted scenario is a true null: its rejection rate is a
false-positive rate (it should stay <= 0.07 at alpha 0.05; with 60 experiments its
Monte-Carlo SE at 0.05 is 0.028, so rerun a row in doubt with --experiments 200).

Before the Hotelling tests (GEE Wald with the bias-reduced sandwich for success, LR of the
ML-fitted LMM for CT), the same 60 null experiments gave: success framework 0.15 (10 tasks),
model:framework 0.38 (10) / 0.12 (20), model:protocol:framework 0.50 (10) / 0.43 (20); CT
three-way LR 0.15 (10).

    .venv/bin/python bench/joint_power.py [--experiments 60] [--tasks 10 20] [--effect 0.06]
        [--families joint blocked]
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
from mastif.analysis.mixed_joint import joint_tests

MODELS = ["m1", "m2", "m3"]
PROTOCOLS = ["a2a", "mcp", "standard"]
FRAMEWORKS = ["crewai", "langchain", "langgraph", "semantic_kernel"]
METRICS = ["success", "CT"]
POWER = ("success", "framework")  # (metric, term) of the planted effect


def simulate(rng: np.random.Generator, n_tasks: int, effect: float = 0.0) -> pl.DataFrame:
    """One experiment's runs (the columns mastif.analysis.blocked and mastif.analysis.mixed read)."""
    task_p = rng.uniform(0.1, 0.9, n_tasks)
    task_ct = rng.lognormal(3.0, 0.6, n_tasks)
    grid = list(itertools.product(range(n_tasks), MODELS, PROTOCOLS, FRAMEWORKS))
    t = np.array([g[0] for g in grid])
    planted = np.array([g[3] == "langgraph" for g in grid])
    n = len(grid)
    p = np.clip(task_p[t] + effect * planted, 0.0, 1.0)
    return pl.DataFrame(
        {
            "model": [g[1] for g in grid],
            "protocol": [g[2] for g in grid],
            "framework": [g[3] for g in grid],
            "task_id": [f"t{g[0]:03d}" for g in grid],
            "repeat": [0] * n,
            "status": ["ok"] * n,
            "success": rng.random(n) < p,
            "CT": task_ct[t] * rng.lognormal(0.0, 0.3, n),
        }
    )


def run(n_tasks: int, effect: float, args: argparse.Namespace) -> tuple[dict, float]:
    """{(family, metric, term, test): [n, raw, adjusted]} over the experiments; seconds."""
    rng = np.random.default_rng([args.seed, n_tasks, int(effect > 0)])
    counts: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    start = time.perf_counter()
    for _ in range(args.experiments):
        runs = simulate(rng, n_tasks, effect)
        rows = []
        if "joint" in args.families:
            joint = joint_tests(runs, metrics=METRICS, min_n=args.min_n)
            rows += [("joint", r["metric"], r["term"], r["test"], r)
                     for r in joint.iter_rows(named=True)]  # fmt: skip
        if "blocked" in args.families:
            blocked = blocked_tests(runs, metrics=METRICS, min_n=args.min_n, seed=args.seed)
            rows += [("blocked", r["metric"], r["factor"], r["test"], r)
                     for r in blocked["tests"].iter_rows(named=True)]  # fmt: skip
        for family, metric, term, test, r in rows:
            c = counts[(family, metric, term, test)]
            if r["p_value"] is None:
                continue
            c[0] += 1
            c[1] += r["p_value"] < args.alpha
            c[2] += r["p_adjusted"] < args.alpha
    return counts, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiments", type=int, default=60)
    ap.add_argument("--tasks", type=int, nargs="+", default=[10, 20])
    ap.add_argument("--effect", type=float, default=0.06)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--min-n", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20260504)
    ap.add_argument("--families", nargs="+", choices=["joint", "blocked"],
                    default=["joint", "blocked"])  # fmt: skip
    args = ap.parse_args()
    # statsmodels' Holm calls gc.collect() on every call; freeze the imports' objects
    warm = simulate(np.random.default_rng(0), 6)
    joint_tests(warm, metrics=METRICS)
    blocked_tests(warm, metrics=METRICS)
    gc.freeze()
    print(
        f"36 stacks (3 models x 3 protocols x 4 frameworks), {args.experiments} experiments per "
        f"cell, alpha {args.alpha}; planted: framework langgraph success +{args.effect}"
    )
    total = time.perf_counter()
    results = {}
    for n_tasks, (name, effect) in itertools.product(
        args.tasks, [("null", 0.0), ("planted", args.effect)]
    ):
        results[(n_tasks, name)], secs = run(n_tasks, effect, args)
        print(f"  {n_tasks} tasks, {name}: {secs:.0f} s")
    keys = sorted({k for c in results.values() for k in c}, key=lambda k: (k[0] != "joint", k))
    head = "".join(f" {f'{t} {s}':>16}" for t, s in results)
    print(f"\nrejection rate, raw p / adjusted p < {args.alpha} (n = experiments with a p)")
    print(f"{'family':8} {'metric':8} {'term':28} {'test':10}{head}")
    for key in keys:
        cells = []
        for (_n_tasks, name), counts in results.items():
            n, raw, adj = counts.get(key, [0, 0, 0])
            power = name == "planted" and key[1:3] == POWER
            mark = "P" if power else " "
            cells.append(f" {raw / n:5.2f}/{adj / n:4.2f} {mark}{n:3d}" if n else f" {'-':>16}")
        print(f"{key[0]:8} {key[1]:8} {key[2]:28} {key[3]:10}{''.join(cells)}")
    print("P: power (the planted effect); every other cell is a false-positive rate")
    for family in args.families:
        null = [c for (_, name), counts in results.items() for k, c in counts.items()
                if k[0] == family and c[0] and not (name == "planted" and k[1:3] == POWER)]  # fmt: skip
        n, raw = sum(c[0] for c in null), sum(c[1] for c in null)
        if n:
            worst = max(c[1] / c[0] for c in null)
            over = sum(c[1] / c[0] > 0.07 for c in null)
            print(f"{family}: false-positive rate pooled over {len(null)} null cells "
                  f"{raw / n:.3f} (SE {(raw / n * (1 - raw / n) / n) ** 0.5:.3f}), "
                  f"max {worst:.3f}, {over} cell(s) > 0.07")  # fmt: skip
    print(f"total {time.perf_counter() - total:.0f} s")


if __name__ == "__main__":
    main()

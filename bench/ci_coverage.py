"""Coverage of mastif's task-bootstrap percentile interval, by number of tasks (issue 38).

mastif's per-stack intervals (:mod:`mastif.analysis.bootstrap`, ``results/stats/effects.parquet``) are
percentile intervals over task-cluster resamples: a resample draws ``n_tasks`` tasks with
replacement and a drawn task brings every stack's runs of it (all repeats). This bench
simulates experiments of that shape and counts how often the nominal ``--confidence``
interval of a stack's success rate and mean judge score contains the stack's true value:
its mean over the population of tasks the sample was drawn from.

Simulated experiment: ``--stacks`` stacks on the same ``n_tasks`` tasks, ``--repeats`` runs
each. A realistic task effect: task difficulty is a logit ~ N(0, ``--task-sd``) shared by
every stack (sd 1.5: tasks from near-certain to near-hopeless, as Mind2Web's), plus a stack
effect on the logit (0, +0.3, -0.3, +0.6, ...); a run succeeds with expit(task + stack). The
judge score (TCR) is the paper's 5 anchors: task level ~ N(3, 1) + stack shift (0, +0.2,
-0.2, ...) + N(0, 1) noise per run, rounded and clipped to 1..5, mapped to 0..1. The true
values are the population means, computed once by Monte Carlo over 2,000,000 tasks.

The interval is computed with mastif.analysis.bootstrap's own pieces (task_resamples,
resample_counts, quantile_bounds: the same resample index and percentile bounds as
bootstrap_effects), ``--resamples`` resamples per experiment.

Printed: per n_tasks, the coverage of each metric (pooled over stacks) with its Monte Carlo
standard error, the mean interval width, and at the end the criterion's answer: the
smallest n_tasks of the grid from which every larger n of the grid has coverage of every
metric at least nominal - ``--tolerance`` (default 0.03). That number is
mastif.analysis.inference.MIN_TASKS_FOR_CI.

    .venv/bin/python bench/ci_coverage.py [--experiments 1000] [--resamples 2000]
        [--tasks 2,3,5,8,10,15,20,30] [--repeats 1] [--seed 38]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import expit

from mastif.analysis.bootstrap import quantile_bounds, resample_counts, task_resamples

TASK_GRID = (2, 3, 5, 8, 10, 15, 20, 30)
METRICS = ("success", "TCR")


def stack_shifts(n_stacks: int, step: float) -> np.ndarray:
    """0, +step, -step, +2 step, -2 step, ...: stacks that differ, some better, some worse."""
    k = np.arange(n_stacks)
    return step * ((k + 1) // 2) * np.where(k % 2 == 1, 1.0, -1.0)


def tcr_of(level: np.ndarray) -> np.ndarray:
    """A judge's anchor (rounded, clipped to 1..5) mapped to 0..1, as TCR."""
    return (np.clip(np.rint(level), 1, 5) - 1) / 4


def true_values(
    n_stacks: int, task_sd: float, rng: np.random.Generator, draws: int = 2_000_000
) -> dict[str, np.ndarray]:
    """Per stack: the mean over the population of tasks (Monte Carlo, ``draws`` tasks)."""
    logit = rng.normal(0.0, task_sd, draws)
    level = rng.normal(3.0, 1.0, draws) + rng.normal(0.0, 1.0, draws)
    return {
        "success": np.array([expit(logit + s).mean() for s in stack_shifts(n_stacks, 0.3)]),
        "TCR": np.array([tcr_of(level + s).mean() for s in stack_shifts(n_stacks, 0.2)]),
    }


def experiment(
    rng: np.random.Generator, n_tasks: int, n_stacks: int, repeats: int, task_sd: float
) -> dict[str, np.ndarray]:
    """One experiment's per-(task, stack) sums of each metric over the repeats:
    (n_tasks, n_stacks) arrays; every run has a value, so the denominator is ``repeats``."""
    logit = rng.normal(0.0, task_sd, n_tasks)[:, None, None]
    level = rng.normal(3.0, 1.0, n_tasks)[:, None, None]
    shape = (n_tasks, n_stacks, repeats)
    success = rng.random(shape) < expit(logit + stack_shifts(n_stacks, 0.3)[None, :, None])
    tcr = tcr_of(level + stack_shifts(n_stacks, 0.2)[None, :, None] + rng.normal(0, 1, shape))
    return {"success": success.sum(2).astype(float), "TCR": tcr.sum(2)}


def intervals(
    num: np.ndarray, repeats: int, counts: np.ndarray, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per stack: the percentile interval of (C @ num) / (C @ den), as bootstrap_effects."""
    boot = (counts @ num) / (counts.sum(1, keepdims=True) * repeats)
    q_lo, q_hi = quantile_bounds(confidence)
    lo, hi = np.quantile(boot, [q_lo, q_hi], axis=0)
    return lo, hi


def coverage(
    n_tasks: int,
    experiments: int,
    resamples: int,
    confidence: float,
    n_stacks: int,
    repeats: int,
    task_sd: float,
    truth: dict[str, np.ndarray],
    seed: int,
) -> dict[str, tuple[float, float, float]]:
    """Per metric: (coverage, its Monte Carlo standard error, mean interval width), pooled
    over stacks and ``experiments`` experiments of ``n_tasks`` tasks."""
    rng = np.random.default_rng([seed, n_tasks])
    hits = {m: 0 for m in METRICS}
    width = {m: 0.0 for m in METRICS}
    for e in range(experiments):
        sums = experiment(rng, n_tasks, n_stacks, repeats, task_sd)
        counts = resample_counts(task_resamples(n_tasks, resamples, seed + e), n_tasks)
        for metric in METRICS:
            lo, hi = intervals(sums[metric], repeats, counts, confidence)
            hits[metric] += int(((lo <= truth[metric]) & (truth[metric] <= hi)).sum())
            width[metric] += float((hi - lo).sum())
    total = experiments * n_stacks
    out = {}
    for metric in METRICS:
        cov = hits[metric] / total
        # stacks of one experiment share its tasks: the SE over experiments is conservative
        se = float(np.sqrt(cov * (1 - cov) / experiments))
        out[metric] = (cov, se, width[metric] / total)
    return out


def min_tasks(
    results: dict[int, dict[str, tuple[float, float, float]]], confidence: float, tolerance: float
) -> int | None:
    """The smallest n of the grid from which every n of the grid (that one and all larger)
    has coverage of every metric >= confidence - tolerance; None when none has."""
    ok = {
        n: all(r[0] >= confidence - tolerance for r in res.values()) for n, res in results.items()
    }
    answer = None
    for n in sorted(results, reverse=True):
        if not ok[n]:
            break
        answer = n
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--tasks", default=",".join(map(str, TASK_GRID)))
    parser.add_argument("--stacks", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--task-sd", type=float, default=1.5)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=38)
    args = parser.parse_args()
    grid = [int(n) for n in args.tasks.split(",")]
    start = time.perf_counter()
    truth = true_values(args.stacks, args.task_sd, np.random.default_rng(args.seed))
    print(
        f"{args.experiments} experiments per n_tasks, {args.stacks} stacks, {args.repeats} "
        f"repeat(s), task logit sd {args.task_sd}, {args.resamples} resamples, nominal "
        f"{args.confidence:.0%}"
    )
    print("true values: " + "; ".join(f"{m} {np.round(v, 3).tolist()}" for m, v in truth.items()))
    print(f"{'n_tasks':>7}  " + "  ".join(f"{m + ' coverage (SE), width':>32}" for m in METRICS))
    results = {}
    for n in grid:
        results[n] = coverage(
            n,
            args.experiments,
            args.resamples,
            args.confidence,
            args.stacks,
            args.repeats,
            args.task_sd,
            truth,
            args.seed,
        )
        cells = [f"{c:>14.3f} ({se:.3f}), {w:.3f}" for c, se, w in results[n].values()]
        print(f"{n:>7}  " + "  ".join(f"{cell:>32}" for cell in cells), flush=True)
    answer = min_tasks(results, args.confidence, args.tolerance)
    print(
        f"criterion: coverage of every metric >= {args.confidence - args.tolerance:.2f} "
        f"(nominal - {args.tolerance:g}) at n and every larger n of the grid -> "
        f"minimum tasks for a CI: {answer if answer is not None else 'none in the grid'}"
    )
    print(f"runtime {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()

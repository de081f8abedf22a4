"""Power before paying: the smallest difference in success rate two stacks must have for a
sample of this size to detect it (issue 17, ``mastif power``).

The design is paired: both stacks run the same tasks, and the comparison of their binary
success is the exact McNemar test on paired tasks (one run each), which only
looks at the discordant tasks (one stack succeeds, the other fails). Power depends on the
number of tasks ``n``, the baseline success rate ``p`` of the weaker stack, the difference
``d`` and how strongly the two stacks' outcomes on a task go together (the phi correlation
``rho``: tasks easy for one stack tend to be easy for the other). It is estimated by
simulation: ``n_sim`` experiments per ``d`` draw every task's pair of outcomes from the
2 x 2 distribution with marginals ``p`` and ``p + d`` and correlation ``rho``, and count how
often the exact McNemar p-value is below ``alpha``. The smallest ``d`` on a 0.01 grid whose
power reaches ``power`` is the minimum detectable difference.

Repeats do not add blocks: K repeats of the same task are not K independent tasks, so
``n`` is the number of tasks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom


@dataclass(frozen=True)
class PowerResult:
    n_tasks: int
    baseline: float
    rho: float
    alpha: float
    power: float
    #: smallest difference in success rate reaching ``power`` (None: none up to 1 - baseline)
    min_detectable_difference: float | None
    #: the simulated power at that difference
    achieved_power: float | None
    n_sim: int


def _cells(p: float, q: float, rho: float) -> tuple[float, float, float, float] | None:
    """P(both), P(only A), P(only B), P(neither) for marginals ``p``, ``q`` and phi ``rho``;
    None when no 2 x 2 distribution has them."""
    p11 = p * q + rho * math.sqrt(p * (1 - p) * q * (1 - q))
    cells = (p11, p - p11, q - p11, 1 - p - q + p11)
    if any(c < -1e-12 for c in cells):
        return None
    return tuple(max(c, 0.0) for c in cells)  # type: ignore[return-value]


def mcnemar_exact_p(only_a: np.ndarray, only_b: np.ndarray) -> np.ndarray:
    """Two-sided exact McNemar p-values for arrays of discordant counts (statsmodels'
    ``mcnemar(exact=True)``: a binomial test of min(b, c) in b + c at 1/2); 1 with none."""
    n = only_a + only_b
    k = np.minimum(only_a, only_b)
    p = np.minimum(1.0, 2 * binom.cdf(k, n, 0.5))
    return np.where(n == 0, 1.0, p)


def simulated_power(
    n_tasks: int,
    baseline: float,
    difference: float,
    rho: float = 0.3,
    alpha: float = 0.05,
    n_sim: int = 4000,
    seed: int = 0,
) -> float | None:
    """Share of ``n_sim`` simulated paired experiments in which the exact McNemar test
    rejects at ``alpha``; None when the marginals and ``rho`` are impossible together."""
    cells = _cells(baseline, baseline + difference, rho)
    if cells is None:
        return None
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n_tasks, cells, size=n_sim)
    p = mcnemar_exact_p(counts[:, 1], counts[:, 2])
    return float(np.mean(p < alpha))


def min_detectable_difference(
    n_tasks: int,
    baseline: float = 0.5,
    rho: float = 0.3,
    alpha: float = 0.05,
    power: float = 0.8,
    n_sim: int = 4000,
    seed: int = 0,
) -> PowerResult:
    """The smallest ``d`` (0.01 steps) whose simulated power reaches ``power``."""
    if n_tasks < 1:
        raise ValueError(f"n_tasks must be at least 1, got {n_tasks}")
    if not 0 < baseline < 1:
        raise ValueError(f"baseline must be between 0 and 1, got {baseline}")
    if not -1 <= rho <= 1:
        raise ValueError(f"rho must be between -1 and 1, got {rho}")
    found = achieved = None
    for step in range(1, int(round((1 - baseline) * 100)) + 1):
        d = step / 100
        got = simulated_power(n_tasks, baseline, d, rho, alpha, n_sim, seed)
        if got is not None and got >= power:
            found, achieved = d, got
            break
    return PowerResult(n_tasks, baseline, rho, alpha, power, found, achieved, n_sim)


def format_power(result: PowerResult) -> str:
    """The report's sentence."""
    head = (
        f"With {result.n_tasks} task(s) per stack, a baseline success rate of "
        f"{result.baseline:.2f} and outcome correlation {result.rho:.2f} between two stacks "
        f"on a task, the exact McNemar test at alpha = {result.alpha:g}"
    )
    if result.min_detectable_difference is None:
        return (
            f"{head} cannot reach {result.power:.0%} power for any difference in success "
            "rate: add tasks."
        )
    return (
        f"{head} detects a difference in success rate of "
        f"{result.min_detectable_difference:.2f} or more with {result.power:.0%} power "
        f"(simulated: {result.achieved_power:.1%} over {result.n_sim} experiments); smaller "
        "differences between two stacks will mostly go unseen."
    )

"""Reproducible stratified sampling of tasks.

Experiments run on a subset of tasks; comparing stacks is only fair if that subset keeps
the domain/difficulty mix of the full set and is identical on every machine for a seed.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable
from typing import Any

import polars as pl

from mastif.tasks.model import Task

StratumKey = tuple[Any, ...]

# Attributes with one hashable, orderable value per task (reference_steps is a list).
STRATIFIABLE: tuple[str, ...] = (
    "task_id",
    "confirmed_task",
    "website",
    "domain",
    "subdomain",
    "level",
    "n_steps",
)


def stratified_sample(
    tasks: Iterable[Task],
    n: int,
    strata: list[str],
    seed: int,
    *,
    min_per_stratum: int | None = 0,
) -> tuple[list[Task], pl.DataFrame]:
    """Draw ``n`` tasks with proportional allocation over ``strata``.

    Allocation (largest remainder / Hamilton method): stratum *h* with population N_h
    out of N has the exact quota q_h = n * N_h / N. Each stratum first gets floor(q_h);
    the n - sum(floor) leftover units go one each to the strata with the largest
    fractional remainders, ties broken by the stratum key in sorted order. Remainders are
    compared in exact integer arithmetic, so ties are real ties, not float noise. Every
    allocation is then within 1 of its exact quota and never exceeds its population.

    ``min_per_stratum`` (default 0: pure proportional) guarantees small strata a floor.
    A minimum larger than a stratum's population is capped at that population. Strata
    whose proportional quota falls below their minimum are fixed at the minimum and the
    remaining units are redistributed proportionally (Hamilton again) over the other
    strata, repeating until no quota is below its minimum. More than ``n`` units of
    minimums is an error.

    Drawing: within a stratum, tasks are sorted by ``task_id`` and drawn with
    ``random.Random`` seeded by SHA-256 of (seed, strata names, stratum key) — not the
    salted built-in ``hash`` — so a seed gives the same sample on every run, machine and
    input order, and strata draw independently of one another.

    ``min_per_stratum=None`` ("represent every stratum that can be"): 1 when ``n`` is at
    least the number of strata, else 0 (then the strata with the largest quotas are the
    ones represented, by the rule above).

    Every task must have a value for every stratum attribute: a source without domains
    (Online-Mind2Web) cannot be stratified by domain, and saying so beats putting all its
    tasks in one "None" stratum.

    ``strata=[]`` is a simple random sample (one stratum). Returns the sample sorted by
    (strata values..., task_id) and an allocation frame with columns ``stratum``
    (values joined by ``|``, ``"all"`` without strata), one column per stratum attribute,
    ``population``, ``quota`` (exact proportional quota), ``minimum`` (the floor
    applied, capped at the population) and ``sampled``.

    Raises ``ValueError`` if ``n <= 0``, ``n`` exceeds the population, a stratum
    attribute is unknown or repeated, task ids are duplicated, the minimums exceed n, or
    a task has no value for a stratum attribute.
    """
    pool = sorted(tasks, key=lambda t: t.task_id)
    _check_args(pool, n, strata, min_per_stratum)

    groups: dict[StratumKey, list[Task]] = {}
    for task in pool:
        groups.setdefault(tuple(getattr(task, s) for s in strata), []).append(task)
    keys = sorted(groups)
    populations = {k: len(groups[k]) for k in keys}
    minimum = min_per_stratum if min_per_stratum is not None else int(n >= len(keys))
    allocation = _allocate(n, populations, minimum)

    sample: list[Task] = []
    for key in keys:
        rng = random.Random(_stratum_seed(seed, strata, key))
        sample.extend(rng.sample(groups[key], allocation[key]))
    sample.sort(key=lambda t: (*(getattr(t, s) for s in strata), t.task_id))

    total = len(pool)
    rows = [
        {
            "stratum": _label(key),
            **dict(zip(strata, key, strict=True)),
            "population": populations[key],
            "quota": n * populations[key] / total,
            "minimum": min(minimum, populations[key]),
            "sampled": allocation[key],
        }
        for key in keys
    ]
    return sample, pl.DataFrame(rows)


def _check_args(pool: list[Task], n: int, strata: list[str], min_per_stratum: int) -> None:
    """Reject every argument problem before drawing anything."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if n <= 0:
        raise ValueError(f"sample size n must be positive, got {n}")
    if n > len(pool):
        raise ValueError(f"sample size n={n} exceeds the population of {len(pool)} tasks")
    for name in strata:
        if name not in STRATIFIABLE:
            raise ValueError(
                f"unknown stratum attribute {name!r}; expected one of {', '.join(STRATIFIABLE)}"
            )
    if len(set(strata)) != len(strata):
        raise ValueError(f"stratum attributes repeated: {strata}")
    ids = [t.task_id for t in pool]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate task_id in sampling input: {', '.join(dupes)}")
    if min_per_stratum is not None and min_per_stratum < 0:
        raise ValueError(f"min_per_stratum must be >= 0, got {min_per_stratum}")
    for name in strata:
        empty = [t.task_id for t in pool if getattr(t, name) in (None, "")]
        if empty:
            raise ValueError(
                f"stratum attribute {name!r} is empty for {len(empty)} of {len(pool)} tasks "
                f"(e.g. {', '.join(empty[:3])}): the task source does not give it; stratify "
                "on attributes every task has (Online-Mind2Web: website, level)"
            )


def _allocate(n: int, populations: dict[StratumKey, int], minimum: int) -> dict[StratumKey, int]:
    """Bounded proportional allocation; see :func:`stratified_sample` for the rule."""
    floor_of = {k: min(minimum, pop) for k, pop in populations.items()}
    if sum(floor_of.values()) > n:
        raise ValueError(
            f"min_per_stratum={minimum} needs {sum(floor_of.values())} tasks but n={n}"
        )
    fixed: dict[StratumKey, int] = {}
    active = sorted(populations)
    while True:
        units = n - sum(fixed.values())
        weight = sum(populations[k] for k in active)
        # q_h < min_h  <=>  units * N_h < min_h * weight (exact, no floats)
        low = [k for k in active if units * populations[k] < floor_of[k] * weight]
        if not low:
            break
        for k in low:
            fixed[k] = floor_of[k]
        active = [k for k in active if k not in fixed]
    return {**fixed, **_hamilton(units, {k: populations[k] for k in active})}


def _hamilton(units: int, weights: dict[StratumKey, int]) -> dict[StratumKey, int]:
    """Largest-remainder split of ``units`` by ``weights``; ties go to the smaller key."""
    if not weights:
        return {}
    total = sum(weights.values())
    alloc = {k: units * w // total for k, w in weights.items()}
    leftover = units - sum(alloc.values())
    # remainder of q_k is (units * w_k mod total) / total: compare numerators exactly
    order = sorted(weights, key=lambda k: (-(units * weights[k] % total), k))
    for k in order[:leftover]:
        alloc[k] += 1
    return alloc


def _stratum_seed(seed: int, strata: list[str], key: StratumKey) -> int:
    """A 64-bit seed stable across processes (unlike ``hash``, which is salted per run)."""
    payload = json.dumps([seed, strata, [str(v) for v in key]], ensure_ascii=True)
    return int.from_bytes(hashlib.sha256(payload.encode("utf-8")).digest()[:8], "big")


def _label(key: StratumKey) -> str:
    """Human-readable stratum name, e.g. ``"Travel|easy"``."""
    return "|".join(str(v) for v in key) if key else "all"

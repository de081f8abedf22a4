"""Experiments for the small-sample and adjusted-p rules of issue 38: the runs table of a
2-task experiment and of a 30-task one with a planted effect, and the stats tables of each
(mastif.analysis.stats's tests, mastif.analysis.bootstrap's effects, a mixed_joint table of its schema,
and the real joint_levels and joint_pairs of the runs)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import polars as pl

from mastif.analysis.bootstrap import bootstrap_effects
from mastif.analysis.mixed_joint import joint_contrasts
from mastif.analysis.stats import test_factors
from mastif.reporting.report_inference import MIXED_JOINT_SCHEMA

MODELS = ("m1", "m2")
PROTOCOLS = ("a2a", "mcp", "standard")
FRAMEWORKS = ("crewai", "langgraph")
MIN_N = 5


def planted_runs(n_tasks: int, seed: int = 38, repeats: int = 1) -> pl.DataFrame:
    """Every stack (2 models x 3 protocols x 2 frameworks) on the same ``n_tasks`` tasks.
    Planted: model m2 completes more (TCR +0.35, success +0.4) and is faster (CT x 0.5);
    each task has its own difficulty and typical time."""
    rng = np.random.default_rng(seed)
    task_q = rng.uniform(0.1, 0.5, n_tasks)
    task_ct = rng.lognormal(3.0, 0.3, n_tasks)
    rows = []
    for t, r, model, protocol, framework in itertools.product(
        range(n_tasks), range(repeats), MODELS, PROTOCOLS, FRAMEWORKS
    ):
        better = model == "m2"
        tcr = float(np.clip(task_q[t] + 0.35 * better + rng.normal(0, 0.05), 0, 1))
        rows.append(
            {
                "run_id": f"{model}-{protocol}-{framework}-t{t}-r{r}",
                "model": model,
                "protocol": protocol,
                "framework": framework,
                "task_id": f"t{t}",
                "repeat": r,
                "status": "ok",
                "judge_status": "ok",
                "has_final_answer": True,
                "TCR": tcr,
                "TU": tcr,
                "TA": tcr,
                "success": bool(rng.random() < task_q[t] + 0.4 * better),
                "CT": float(task_ct[t] * (0.5 if better else 1.0) * rng.lognormal(0, 0.1)),
                "V": float(500 + 50 * rng.normal()),
                "n_tool_calls": 4,
                "n_tool_ok": int(rng.integers(2, 5)),
                "TUSR": None,
                "IVS": float(rng.uniform(0.1, 0.3)),
            }
        )
    runs = pl.DataFrame(rows)
    return runs.with_columns((pl.col("n_tool_ok") / pl.col("n_tool_calls")).alias("TUSR"))


def mixed_joint(n_tasks: int) -> pl.DataFrame:
    """A mixed_joint table of the colleague's schema: model significant, protocol not after
    the adjustment (raw p 0.03, adjusted 0.12), framework n.s., one interaction."""
    rows = []
    for metric in ("success", "TCR", "CT"):
        rows += [
            (metric, "model", "Hotelling", 1, 25.0, 1e-6, 1e-5, None, n_tasks, None),
            (metric, "protocol", "Hotelling", 2, 7.0, 0.03, 0.12, None, n_tasks, None),
            (metric, "framework", "Hotelling", 1, 0.4, 0.52, 1.0, None, n_tasks, None),
            (metric, "model:protocol", "Hotelling", 2, 1.1, 0.58, 1.0, None, n_tasks, None),
        ]
    return pl.DataFrame(rows, schema=MIXED_JOINT_SCHEMA, orient="row")


@dataclass
class Experiment:
    n_tasks: int
    runs: pl.DataFrame
    tests: pl.DataFrame
    groups: pl.DataFrame
    posthoc: pl.DataFrame
    effects: pl.DataFrame
    joint: pl.DataFrame
    levels: pl.DataFrame
    pairs: pl.DataFrame


def experiment(n_tasks: int, repeats: int = 1) -> Experiment:
    """The runs and every stats table the report's inference tables and figures read."""
    runs = planted_runs(n_tasks, repeats=repeats)
    stats = test_factors(runs, min_n=MIN_N)
    effects = bootstrap_effects(runs, resamples=200, seed=1)
    levels, pairs = joint_contrasts(runs, min_n=MIN_N)
    return Experiment(
        n_tasks,
        runs,
        stats["tests"],
        stats["groups"],
        stats["posthoc"],
        effects,
        mixed_joint(n_tasks),
        levels,
        pairs,
    )

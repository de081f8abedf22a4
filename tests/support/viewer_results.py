"""A synthetic results tree for the trace viewer's tests and bench/viewer_scale.py.

Writes what the workflow's rules write, in their schemas (``mastif.core.trace.RUN_SCHEMA``,
``mastif.evaluation.judge.JUDGED_SCHEMA``, ``mastif.evaluation.values.VALUES_SCHEMA``), with
``results/metrics/runs.parquet`` computed by mastif's own ``run_metrics``: tasks.parquet,
runs/judged/values per stack, stats/judge_validity.parquet. Runs are drawn from a seeded
generator: mostly completed, some timed out or errored, some unjudged (judge_failed), some tasks without a check (success
null), some LLM calls without token counts (null, never 0).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from mastif.analysis.judge_validity import judge_validity
from mastif.core.trace import RUN_SCHEMA
from mastif.evaluation.judge import JUDGED_SCHEMA
from mastif.evaluation.metrics import run_metrics
from mastif.evaluation.values import VALUES_SCHEMA

VALUES = ("helpfulness", "honesty", "thrift", "privacy", "safety", "fairness", "care")
NODES = ("navigate", "observe", "interact", "report")
TOOLS = ("web_search", "wikipedia", "browser_open", "shop_add_to_cart")


@dataclass(frozen=True)
class SyntheticTree:
    """Where the tree's files are (every path under ``root``)."""

    root: Path
    tasks: Path
    metrics_runs: Path
    runs: list[Path]
    judged: list[Path]
    values: list[Path]
    judge_validity: Path  # results/stats/judge_validity.parquet (mastif.analysis.judge_validity)


def _task_rows(n_tasks: int, rng: random.Random) -> list[dict]:
    rows = []
    for t in range(n_tasks):
        has_check = t % 5 != 4  # every fifth task has no programmatic check
        rows.append(
            {
                "task_id": f"task-{t:04d}",
                "confirmed_task": f"Find the cheapest item number {t} in the shop and add it "
                f"to the cart, then report its price ({rng.choice(['books', 'tea', 'lamps'])})",
                "website": "shop",
                "domain": rng.choice(["Shopping", "Travel", "Info"]),
                "subdomain": None,
                "level": rng.choice(["easy", "medium", "hard"]),
                "n_steps": 3,
                "reference_steps": ["open the shop", f"search item {t}", "add to cart"],
                "reference_length": None,
                "start_url": "/shop/",
                "check": json.dumps({"cart_contains": f"item-{t}"}) if has_check else None,
            }
        )
    return rows


def _run_row(
    stack: tuple[str, str, str], task: dict, repeat: int, rng: random.Random
) -> tuple[dict, dict, dict]:
    """One run with its judged and values rows."""
    model, protocol, framework = stack
    run_id = f"{model}-{protocol}-{framework}-{task['task_id']}-r{repeat}"
    draw = rng.random()
    status = "ok" if draw < 0.85 else "timeout" if draw < 0.93 else "error"
    n_tools = rng.randint(0, 4)
    tool_calls = [
        {
            "node": "interact",
            "step": k,
            "name": rng.choice(TOOLS),
            "arguments": json.dumps({"query": f"item {task['task_id']} call {k}"}),
            "ok": k % 4 != 3,
            "output": f"result {k} of {task['task_id']}: " + "lorem ipsum " * rng.randint(5, 40),
            "error": None if k % 4 != 3 else "HTTP 404 from the sandbox",
            "duration_s": round(rng.uniform(0.05, 2.0), 3),
            "started_s": round(k * 1.5, 3),
        }
        for k in range(n_tools)
    ]
    llm_calls = [
        {
            "node": node,
            "started_s": float(k),
            "latency_s": round(rng.uniform(0.2, 3.0), 3),
            # a call whose usage lacked the count: null, never 0
            "prompt_tokens": None if (k == 1 and repeat == 1) else rng.randint(200, 900),
            "completion_tokens": rng.randint(10, 200),
            "http_status": 200,
            "error": None,
            "attempts": 1,
            "cached": False,
            "upstream_s": 0.5,
            "queue_s": 0.0,
            "backoff_s": 0.0,
        }
        for k, node in enumerate(NODES)
    ]
    answer = f"The cheapest item is {task['task_id']} at 3.50 EUR." if status == "ok" else None
    outputs = [
        {"node": node, "step": k, "output_key": node, "text": f"{node}: " + "step text " * 20}
        for k, node in enumerate(NODES[: 3 if status != "ok" else 4])
    ]
    if answer is not None:
        outputs[-1] = {"node": "report", "step": 3, "output_key": "final_answer", "text": answer}
    has_check = task["check"] is not None and status == "ok"
    success = (rng.random() < 0.5) if has_check else None
    run = {
        "run_id": run_id, "experiment": "synthetic", "model": model, "protocol": protocol,
        "framework": framework, "task_id": task["task_id"], "task_text": task["confirmed_task"],
        "website": task["website"], "domain": task["domain"], "level": task["level"],
        "status": status, "error_class": None if status == "ok" else status.title() + "Error",
        "error_message": None if status == "ok" else f"the run ended: {status}",
        "final_answer": answer, "node_outputs": outputs, "tool_calls": tool_calls,
        "llm_calls": llm_calls, "prompt_tokens": None if repeat == 1 else 2000,
        "completion_tokens": sum(c["completion_tokens"] for c in llm_calls),
        "n_llm_calls": len(llm_calls), "wall_seconds": round(rng.uniform(3, 120), 2),
        "repeat": repeat, "protocol_messages": 0 if protocol == "standard" else rng.randint(4, 30),
        "protocol_calls": 0 if protocol == "standard" else n_tools,
        "protocol_requests": 0, "protocol_bytes_sent": 0, "protocol_bytes_received": 0,
        "protocol_seconds": None if protocol == "a2a" else 0.0,
        "success": success,
        "check_detail": None if success is None else
        f"cart {'holds' if success else 'lacks'} item-{task['task_id']}",
        "web": "sandbox", "web_state": json.dumps({"cart": [task["task_id"]], "orders": []}),
        "origin": "run", "tokens_estimated": False,
    }  # fmt: skip
    judge_failed = rng.random() < 0.05
    score = None if judge_failed else rng.choice([0.0, 0.3, 0.5, 0.7, 1.0])
    judged = {
        "run_id": run_id, "model": model, "protocol": protocol, "framework": framework,
        "task_id": task["task_id"], "judge_model": "judge",
        "judge_status": "judge_failed" if judge_failed else "ok",
        "TU": score, "TA": score, "TCR": score,
        "TU_rationale": None if judge_failed else "The tools were used sensibly.",
        "TA_rationale": None if judge_failed else "The right tools for the task.",
        "TCR_rationale": None if judge_failed else f"Completed to degree {score}.",
        "judge_raw_reply": "{...}", "judge_attempts": 1,
        "judge_error": "no JSON in the reply" if judge_failed else None, "judge_n_clipped": 0,
        "judge_panel": [],
    }  # fmt: skip
    n_steps = len(outputs) - (1 if answer is not None else 0)
    values = {
        "run_id": run_id, "model": model, "protocol": protocol, "framework": framework,
        "task_id": task["task_id"], "has_final_answer": answer is not None,
        "prompt_values": ["thrift"],
        "step_values": [sorted(rng.sample(VALUES, rng.randint(0, 2))) for _ in range(n_steps)],
        "output_values": ["honesty"] if answer is not None else None,
        "n_sentences": 6, "n_value_sets": 1 + n_steps + (answer is not None),
        "n_empty_value_sets": 0, "n_ivs_pairs": 3, "IVS": round(rng.random(), 3),
        "IVS_prompt_output": None, "IVS_reasoning": None, "IVS_sensitivity": [],
    }  # fmt: skip
    return run, judged, values


def write_synthetic_results(
    root: Path,
    models: list[str],
    protocols: list[str],
    frameworks: list[str],
    n_tasks: int,
    repeats: int = 1,
    seed: int = 0,
) -> SyntheticTree:
    """Write results/ of an experiment of ``models x protocols x frameworks`` stacks on
    ``n_tasks`` tasks, ``repeats`` runs each, under ``root``; see the module doc."""
    rng = random.Random(seed)
    results = root / "results"
    tasks = _task_rows(n_tasks, rng)
    tasks_path = results / "tasks.parquet"
    tasks_path.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(tasks).write_parquet(tasks_path)
    paths: dict[str, list[Path]] = {"runs": [], "judged": [], "values": []}
    all_runs, all_judged, all_values = [], [], []
    for stack in ((m, p, f) for m in models for p in protocols for f in frameworks):
        rows = [_run_row(stack, task, r, rng) for task in tasks for r in range(repeats)]
        runs = pl.from_arrow(pa.Table.from_pylist([r[0] for r in rows], schema=RUN_SCHEMA))
        judged = pl.DataFrame([r[1] for r in rows], schema=JUDGED_SCHEMA)
        values = pl.DataFrame([r[2] for r in rows], schema=VALUES_SCHEMA)
        for kind, frame in (("runs", runs), ("judged", judged), ("values", values)):
            path = results / kind / stack[0] / stack[1] / f"{stack[2]}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "runs":
                pq.write_table(frame.to_arrow(), path)
            else:
                frame.write_parquet(path)
            paths[kind].append(path)
        all_runs.append(runs)
        all_judged.append(judged)
        all_values.append(values)
    metrics = run_metrics(pl.concat(all_runs), pl.concat(all_judged), pl.concat(all_values))
    metrics_path = results / "metrics" / "runs.parquet"
    metrics_path.parent.mkdir(parents=True, exist_ok=True)
    metrics.write_parquet(metrics_path)
    # the judge's scores are drawn apart from the checks (κ near 0); 6 tasks: the gate not
    # assessable (judge.gate_min_tasks)
    validity_path = results / "stats" / "judge_validity.parquet"
    validity_path.parent.mkdir(parents=True, exist_ok=True)
    judge_validity(metrics, resamples=100).write_parquet(validity_path)
    return SyntheticTree(
        root,
        tasks_path,
        metrics_path,
        paths["runs"],
        paths["judged"],
        paths["values"],
        validity_path,
    )

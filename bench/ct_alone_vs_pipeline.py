"""CT of one stack measured alone vs inside a full pipeline run (issue 16 item 4).

A stack's CT (paper Eq. 2) must not depend on what the scheduler ran beside it. This script
reads the stack's runs from a finished pipeline run (``<directory>/results/runs/...``), runs
the same stack on the same sampled tasks (``results/tasks.parquet``) again, alone, in this
process (mastif.execution.runner.execute_stack, what the ``execute_stack`` job runs; no response
cache, so every call reaches the model), and prints both CTs, per task and as means, their
ratio, and each mean's decomposition (model / queue / tools / protocol / harness).

The lead's figure, on the default profile (profiles/default: ``timing_lock`` keeps judge,
embedding and other model jobs off the CPUs while a stack runs):

    .venv/bin/snakemake --profile profiles/default          # the full default pipeline
    .venv/bin/python bench/ct_alone_vs_pipeline.py --stack all

with nothing else running on the machine for the alone part. The two measure the same
path: the gateway shows the model a stand-in for the sandbox's per-job port, so a run's
prompts are the same bytes in both and the seeded model answers the same. The smoke-test check, on the
scripted model (`.test/`, seconds):

    .venv/bin/snakemake results/runs/scripted/standard/langgraph.parquet --cores 2 \\
        --directory .test --configfile .test/config.yaml
    .venv/bin/python bench/ct_alone_vs_pipeline.py --directory .test \\
        --configfile .test/config.yaml

Exit status 1 when the two means differ by more than ``--tolerance`` (default 15%).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from mastif.core.config import Stack
from mastif.execution.experiment import parse_config
from mastif.execution.runner import execute_stack
from mastif.tasks import tasks_from_frame

#: what Snakemake sets for a script job with ``threads: 1`` (execute_stack's): the thread
#: pools of the job's libraries and of the llama.cpp server it starts follow these
JOB_ENV = {
    name: "1"
    for name in ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                 "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
}  # fmt: skip

PARTS = ("wall_model_s", "wall_queue_s", "wall_tools_s", "wall_protocol_s", "wall_harness_s")


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` deep-merged into ``base``, as Snakemake merges --configfile files."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def load_config(directory: Path, configfiles: list[Path]) -> dict[str, Any]:
    cfg = yaml.safe_load((directory / "config" / "config.yaml").read_text())
    for path in configfiles:
        cfg = merged(cfg, yaml.safe_load(path.read_text()) or {})
    # every call must reach the model: a replayed answer takes ~0 s
    cfg.setdefault("execution", {})["response_cache"] = None
    return cfg


def describe(label: str, runs: pl.DataFrame) -> float:
    ct = runs["wall_seconds"].mean()
    statuses = dict(runs.group_by("status").len().iter_rows())
    parts = "  ".join(
        f"{p.removeprefix('wall_').removesuffix('_s')} {runs[p].mean():.2f}"
        for p in PARTS
        if p in runs.columns and runs[p].null_count() < runs.height
    )
    print(f"{label:<9} CT {ct:8.2f} s over {runs.height} runs {statuses}   {parts}")
    return float(ct)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--directory",
        type=Path,
        default=Path("."),
        help="the pipeline's working directory (its results/ and config/)",
    )
    ap.add_argument(
        "--configfile",
        type=Path,
        action="append",
        default=[],
        help="the --configfile(s) the pipeline ran with",
    )
    ap.add_argument(
        "--stack",
        action="append",
        default=[],
        help="model/protocol/framework, repeatable (default: the config's first); "
        "'all' for every stack of the config",
    )
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument(
        "--alone-repeats",
        type=int,
        default=1,
        help="executions alone; with 2+ the spread between them shows how far CT moves "
        "with no neighbour at all",
    )
    ap.add_argument("--execute-to", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)  # fmt: skip

    configfiles = args.configfile = [p.resolve() for p in args.configfile]
    directory = args.directory.resolve()
    os.chdir(directory)  # paths in the config are relative to the pipeline's directory
    os.environ.setdefault("MASTIF_RESOURCES", str(directory / "resources"))
    config = parse_config(load_config(directory, configfiles), base_dir=directory)
    if args.stack == ["all"]:
        stacks = config.stacks()
    else:
        stacks = [Stack(*s.split("/")) for s in args.stack] or config.stacks()[:1]
    tasks = tasks_from_frame(pl.read_parquet(directory / "results" / "tasks.parquet"))
    if args.execute_to is not None:  # one execution alone, in this (fresh) process
        execute_alone(config, stacks[0], tasks, directory, args.execute_to)
        return 0

    summary = [compare_stack(config, stack, tasks, directory, args) for stack in stacks]
    if len(summary) > 1:
        print("\nstack                              CT pipeline   CT alone   ratio  same path")
        for row in summary:
            print(f"{row['stack']:<34} {row['pipeline']:9.2f} s {row['alone']:8.2f} s "
                  f"{row['ratio']:7.3f}  {'yes' if row['same_path'] else 'no'}")  # fmt: skip
        ratios = [r["ratio"] for r in summary]
        total_p, total_a = (sum(r[k] for r in summary) for k in ("pipeline", "alone"))
        print(f"all stacks: CT summed {total_p:.2f} s in the pipeline, {total_a:.2f} s alone, "
              f"ratio {total_a / total_p:.3f}")  # fmt: skip
        print(f"ratios from {min(ratios):.3f} to {max(ratios):.3f}; "
              f"{sum(abs(r - 1) <= args.tolerance for r in ratios)} of {len(ratios)} "
              f"within {args.tolerance:.0%}")  # fmt: skip
    return 0 if all(abs(r["ratio"] - 1) <= args.tolerance for r in summary) else 1


def compare_stack(
    config: Any, stack: Stack, tasks: list[Any], directory: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Runs ``stack`` alone ``args.alone_repeats`` times and prints its CT beside the
    pipeline's; the row of the summary."""
    piped = pl.read_parquet(directory / "results" / "runs" / f"{stack.path}.parquet")
    frames = []
    for execution in range(args.alone_repeats):
        # a fresh process per execution, as the pipeline runs one per stack job: in one
        # long process, threads and state left by earlier frameworks slowed later stacks'
        # model calls by up to 39% (measured)
        with tempfile.TemporaryDirectory(prefix="ct-alone-") as tmp:
            out = Path(tmp) / "runs.parquet"
            cmd = [sys.executable, __file__, "--directory", str(directory), "--stack",
                   stack.path, "--execute-to", str(out)]  # fmt: skip
            for path in args.configfile:
                cmd += ["--configfile", str(path)]
            subprocess.run(cmd, check=True, env={**os.environ, **JOB_ENV})
            frames.append(pl.read_parquet(out).with_columns(execution=pl.lit(execution)))
    every_alone = pl.concat(frames)
    if args.alone_repeats > 1:
        per_execution = every_alone.group_by("execution").agg(pl.col("wall_seconds").mean())
        cts = per_execution["wall_seconds"].to_list()
        print(f"alone, {args.alone_repeats} executions: mean CT "
              + ", ".join(f"{c:.2f}" for c in sorted(cts))
              + f" s; largest / smallest = {max(cts) / min(cts):.3f}")  # fmt: skip
    alone = every_alone.filter(pl.col("execution") == 0).drop("execution")
    print(f"stack {stack.path}: {alone.height} runs alone per execution, {piped.height} in "
          "the pipeline")  # fmt: skip
    pairs = piped.select("task_id", "repeat", pl.col("wall_seconds").alias("pipeline")).join(
        alone.select("task_id", "repeat", pl.col("wall_seconds").alias("alone")),
        on=["task_id", "repeat"],
    )
    for task_id, repeat, p, a in pairs.iter_rows():
        print(f"  task {task_id} repeat {repeat}: pipeline {p:.2f} s, alone {a:.2f} s, "
              f"ratio {a / p if p else float('nan'):.3f}")  # fmt: skip
    ct_pipeline = describe("pipeline", piped)
    ct_alone = describe("alone", every_alone)
    ratio = ct_alone / ct_pipeline if ct_pipeline else float("nan")
    per_task = [a / p for *_, p, a in pairs.iter_rows() if p]
    print(f"CT alone / CT in the pipeline = {ratio:.3f}"
          f" (median per task {statistics.median(per_task) if per_task else float('nan'):.3f})")  # fmt: skip
    print(f"within {args.tolerance:.0%}: {'yes' if abs(ratio - 1.0) <= args.tolerance else 'NO'}")
    # the gateway shows the model one name for the sandbox in every job, so a seeded model
    # takes the same path alone and in the pipeline; where it did not (a tool whose output
    # moves, e.g. the clock), CT compares two paths: the model's seconds per 1,000 tokens
    # is then what a neighbour would slow down
    speed_p, speed_a = model_speed(piped), model_speed(every_alone)
    key = ["task_id", "repeat", "n_llm_calls", "prompt_tokens", "completion_tokens"]
    same_path = (
        piped.select(key)
        .sort("task_id", "repeat")
        .equals(alone.select(key).sort("task_id", "repeat"))
    )
    print(
        f"model s per 1k tokens: pipeline {speed_p:.3f}, alone {speed_a:.3f}, "
        f"ratio {speed_a / speed_p:.3f}; same calls and tokens in both: "
        f"{'yes' if same_path else 'no (CT compares different paths)'}"
    )
    return {"stack": stack.path, "pipeline": ct_pipeline, "alone": ct_alone,
            "ratio": ratio, "same_path": same_path}  # fmt: skip


def execute_alone(config: Any, stack: Stack, tasks: list[Any], directory: Path, out: Path) -> None:
    """``stack`` on ``tasks`` as its ``execute_stack`` job runs it; the traces' CT columns
    to ``out``."""
    with tempfile.TemporaryDirectory(prefix="ct-alone-") as tmp:
        traces = execute_stack(
            config, stack, tasks, Path(tmp) / "ckpt.jsonl", Path(tmp) / "server.log",
            directory,
        )  # fmt: skip
    pl.DataFrame(
        [
            {
                "task_id": t.task_id,
                "repeat": t.repeat,
                "status": t.status,
                "wall_seconds": t.wall_seconds,
                "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens,
                "n_llm_calls": t.n_llm_calls,
                **{p: getattr(t, p) for p in PARTS},
            }
            for t in traces
        ]  # fmt: skip
    ).write_parquet(out)


def model_speed(runs: pl.DataFrame) -> float:
    """Model seconds (the CT split's) per 1,000 prompt + completion tokens, over the runs."""
    tokens = (runs["prompt_tokens"].sum() + runs["completion_tokens"].sum()) / 1000
    return float(runs["wall_model_s"].sum() / tokens) if tokens else float("nan")


if __name__ == "__main__":
    sys.exit(main())

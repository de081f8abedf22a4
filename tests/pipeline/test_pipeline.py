"""The Snakemake pipeline: lint, the DAG, and one end-to-end run on the real bundled model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.support.paths import BIN, REPO
from tests.support.pipeline import snakemake

#: the one lint mastif does not satisfy: its rules have no conda environment or container,
#: because the environment is the .venv of `make setup`, pinned by requirements.lock (no
#: conda or container runtime where it runs; docs/architecture.md, "Snakemake conventions")
ACCEPTED_LINTS = {"Specify a conda environment or container for each rule."}

#: a stack's job on the real model computes with one thread here: the other xdist worker
#: runs a model server of its own on these 2 cores, and llama.cpp's spinning threads on an
#: oversubscribed machine slowed a run past its time-out (in make run the job has the
#: machine to itself: timing_lock, threads 2)
ONE_THREAD = ("--set-threads", "execute_stack=1")


def test_lint_is_clean():
    proc = snakemake("--lint", cwd=REPO)
    out = proc.stdout + proc.stderr
    lints = set(re.findall(r"^\s+\* (.+?):$", out, flags=re.MULTILINE))
    assert lints <= ACCEPTED_LINTS, out
    assert proc.returncode == 0 or (lints and "Lints for rule" in out), out
    fmt = subprocess.run(
        [str(BIN / "snakefmt"), "--check", "Snakefile", "workflow/"],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.mark.slow
def test_dry_run_shows_the_stages(pipeline_copy):
    proc = snakemake("-n", cwd=pipeline_copy)
    assert proc.returncode == 0, proc.stderr
    for rule in ("sample_tasks", "execute_stack", "all"):
        assert rule in proc.stdout
    assert "results/runs/smollm2/standard/langgraph.parquet" in proc.stdout


def llama_servers_under(path: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            cwd = str((proc / "cwd").resolve())
        except (OSError, RuntimeError):
            continue
        if "mastif.providers.xllamacpp_server" in cmd and cwd.startswith(str(path)):
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow
def test_end_to_end_on_the_bundled_model(pipeline_copy):
    # one stack, under MCP so the protocol's servers are in it: test_frameworks_real covers
    # all 12 cells on the model, tests/pipeline/test_dotest_pipeline.py the whole DAG on a scripted one
    override = {
        "protocols": ["mcp"],
        "frameworks": ["langgraph"],
        "tasks": {"sample_size": 1, "strata": ["domain"]},
        "generation": {"max_tokens": 48, "max_steps": 1, "max_tool_rounds": 1, "timeout_s": 120},
    }
    (pipeline_copy / "override.yaml").write_text(yaml.safe_dump(override))
    proc = snakemake(
        "--cores", "2", *ONE_THREAD, "--configfile", "override.yaml", cwd=pipeline_copy
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    tasks = pl.read_parquet(pipeline_copy / "results" / "tasks.parquet")
    assert tasks.height == 1
    runs = pl.read_parquet(pipeline_copy / "results/runs/smollm2/mcp/langgraph.parquet")
    assert runs.height == 1
    run = runs.row(0, named=True)
    assert run["task_id"] == tasks["task_id"][0]
    assert run["status"] == "ok", run["error_message"]
    assert run["prompt_tokens"] > 0 and run["completion_tokens"] > 0
    assert run["n_llm_calls"] == len(run["llm_calls"]) >= 3
    assert sum(c["completion_tokens"] for c in run["llm_calls"]) == run["completion_tokens"]
    assert [n["node"] for n in run["node_outputs"]][0] == "navigate"
    assert run["node_outputs"][-1]["node"] == "report"
    assert run["final_answer"] == run["node_outputs"][-1]["text"]
    assert run["max_tokens"] == 48 and run["temperature"] == 0.7
    assert (
        (pipeline_copy / "logs/execute_stack/smollm2/mcp/langgraph/1-of-1.server.log")
        .stat()
        .st_size
    )
    assert not (pipeline_copy / "results/checkpoints/smollm2/mcp/langgraph/1-of-1.jsonl").exists()
    assert llama_servers_under(pipeline_copy) == []

    results = pipeline_copy / "results"
    judged = pl.read_parquet(results / "judged/smollm2/mcp/langgraph.parquet")
    assert judged["run_id"].to_list() == runs["run_id"].to_list()
    assert judged["judge_model"][0] == "gemma3"
    values = pl.read_parquet(results / "values/smollm2/mcp/langgraph.parquet")
    assert values.height == 1
    # the model's sentences may carry no value: IVS is then null (no informative pair), not 1
    ivs, pairs = values["IVS"][0], values["n_ivs_pairs"][0]
    assert (ivs is None) == (pairs == 0)
    assert ivs is None or 0.0 <= ivs <= 1.0
    stacks = pl.read_parquet(results / "metrics/stacks.parquet")
    assert stacks.height == 1 and stacks["n_runs"].to_list() == [1]
    # real protocol traffic: tools/list at least
    assert run["protocol_messages"] > 0 and run["protocol_bytes_sent"] > 0
    # what produced the run is on its row
    assert run["mastif_version"] and run["python_version"] and run["langgraph_version"]
    assert run["model_server"] == "xllamacpp" and run["model_server_version"]
    assert (results / "tables/table7_protocol_cost.md").read_text().strip()
    for name in ("tests", "groups", "posthoc", "blocked_tests", "blocked_pairs",
                 "mixed_models", "effects", "repeats", "judge_validity", "judge_panel"):  # fmt: skip
        assert (results / f"stats/{name}.parquet").exists()
    # one task: the statistics say there is too little to go on; none fails
    mixed = pl.read_parquet(results / "stats/mixed_models.parquet")
    assert mixed["note"].str.starts_with("insufficient").all()
    assert "add tasks" in (results / "tables/power.md").read_text()
    pngs = sorted((results / "plots").glob("*.png"))
    # 7 violins, Pareto, top values, effects with CIs, the joint tests' levels
    assert len(pngs) == 7 + 1 + 1 + 1 + 1 and all(p.stat().st_size > 1000 for p in pngs)
    assert (results / "report/front_page.rst").read_text().startswith("Does a factor matter?")
    assert (results / "tables/table2_task_completion.md").read_text().strip()

    report = snakemake(
        "--report", "results/report.html", "--configfile", "override.yaml", cwd=pipeline_copy
    )
    assert report.returncode == 0, report.stderr[-2000:]
    assert (results / "report.html").stat().st_size > 10_000

    def dry_run_rules() -> set[str]:
        out = snakemake("-n", "--configfile", "override.yaml", cwd=pipeline_copy).stdout
        return {
            line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("rule ")
        }

    # a second invocation has nothing to do
    assert dry_run_rules() == set()
    # a rubric edit reruns only the judge and what follows it
    rubric = pipeline_copy / "config/rubric.md"
    original = rubric.read_text()
    rubric.write_text(original + "\nBe strict.\n")
    assert dry_run_rules() == {
        "judge_runs", "aggregate_metrics", "test_factors", "mixed_models", "blocked_tests", "plot_violins",
        "plot_pareto", "bootstrap_effects", "plot_effects", "write_tables", "judge_agreement",
        "build_viewer", "judge_gate", "joint_tests", "plot_joint_effects", "front_page", "all",
    }  # fmt: skip
    rubric.write_text(original)
    # a prompt edit reruns execution (and everything after it), not sampling
    prompt = pipeline_copy / "config/prompts/observe.md"
    prompt.write_text(prompt.read_text() + "\nBe brief.\n")
    rules = dry_run_rules()
    assert "execute_stack" in rules and "sample_tasks" not in rules


@pytest.mark.slow
def test_a_killed_stack_job_resumes_without_redoing_finished_runs(pipeline_copy):
    """kill -9 the whole Snakemake process group mid-stack (a crashed node), rerun: the
    runs finished before the kill are kept as they were, the rest run, none twice."""
    override = {
        "protocols": ["standard"],
        "frameworks": ["langgraph"],
        "tasks": {"source": "builtin", "sample_size": 6, "strata": ["domain"]},
        "tools": ["sympy"],
        "generation": {"max_tokens": 24, "max_steps": 1, "max_tool_rounds": 1},
        "workflow": {
            "nodes": [
                {
                    "name": "report",
                    "prompt": "config/prompts/report.md",
                    "output_key": "final_answer",
                }
            ]
        },  # fmt: skip
    }
    (pipeline_copy / "kill.yaml").write_text(yaml.safe_dump(override))
    target = "results/runs/smollm2/standard/langgraph.parquet"
    checkpoint = pipeline_copy / "results/checkpoints/smollm2/standard/langgraph/1-of-1.jsonl"
    # the target first: --configfile takes every argument after it
    cmd = [str(BIN / "snakemake"), target, "--cores", "2", *ONE_THREAD, "--configfile", "kill.yaml"]
    job = subprocess.Popen(
        cmd, cwd=pipeline_copy, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not (checkpoint.exists() and len(checkpoint.read_text().splitlines()) >= 2):
        assert job.poll() is None and time.monotonic() < deadline, "no run finished"
        time.sleep(0.2)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(30)
    before = {
        r["run_id"]: r["started_at"] for r in map(json.loads, checkpoint.read_text().splitlines())
    }
    assert 2 <= len(before) < 6, "killed too late to test a resume"
    deadline = time.monotonic() + 30
    while llama_servers_under(pipeline_copy):  # the model server dies with its job
        assert time.monotonic() < deadline, "the local model server outlived its killed job"
        time.sleep(0.2)

    assert snakemake("--unlock", "--configfile", "kill.yaml", cwd=pipeline_copy).returncode == 0
    proc = snakemake(
        target, "--cores", "2", *ONE_THREAD, "--configfile", "kill.yaml", cwd=pipeline_copy
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    runs = pl.read_parquet(pipeline_copy / target)
    assert runs.height == 6 and runs["run_id"].n_unique() == 6
    started = dict(zip(runs["run_id"], runs["started_at"], strict=True))
    for run_id, at in before.items():  # kept, not executed again
        assert started[run_id].isoformat() == at
    log = (pipeline_copy / "logs/execute_stack/smollm2/standard/langgraph/1-of-1.log").read_text()
    assert f"6 runs, {len(before)} already done" in log
    assert not checkpoint.exists()

"""config/experiments/paper.yaml: the seed paper's grid, planned offline; Mind2Web sampled
through the workflow's own rule from a hub cache (no network: the fixtures' cache)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml

from mastif.execution.experiment import load_config
from mastif.tasks import Task, stratified_sample, tasks_to_frame
from tests.support.hub_cache import make_hub_cache
from tests.support.paths import BIN, REPO
from tests.support.pipeline import snakemake

PAPER = "config/experiments/paper.yaml"


def offline_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_HUB_CACHE=str(tmp_path / "hub"),
        MASTIF_CACHE=str(tmp_path / "mastif-cache"),
        # the paper's models and judge read these; planning needs them set, not valid
        HF_TOKEN="hf_placeholder",
        OPENAI_API_KEY="sk-placeholder",
    )
    return env


def job_counts(stdout: str) -> dict[str, int]:
    """Snakemake's "Job stats" table of a dry run: rule -> jobs."""
    table = stdout.split("Job stats:", 1)[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


def test_the_paper_config_is_the_papers_experiment() -> None:
    cfg = load_config(REPO / PAPER, base_dir=REPO, base=REPO / "config" / "config.yaml")
    served = [cfg.models[m].model for m in cfg.agent_models]
    assert served == [
        "mistralai/Mistral-7B-Instruct-v0.1",
        "Qwen/Qwen2.5-7B-Instruct",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    ]
    assert {cfg.models[m].base_url for m in cfg.agent_models} == {
        "https://router.huggingface.co/v1"
    }
    judge = cfg.models[cfg.judge.model]
    assert (judge.model, judge.base_url) == ("gpt-4o-mini", "https://api.openai.com/v1")
    assert (cfg.tasks.source, cfg.tasks.sample_size, cfg.tasks.seed) == ("mind2web", 300, 20260504)
    g = cfg.generation
    assert (g.temperature, g.max_tokens, g.max_steps, g.max_tool_rounds, g.timeout_s) == (
        0.7, 1024, 3, 3, 100,
    )  # fmt: skip
    assert len(cfg.tools) == 15
    assert len(cfg.stacks()) == 36
    assert sorted(cfg.required_envvars()) == ["HF_TOKEN", "OPENAI_API_KEY"]


@pytest.mark.slow
def test_dry_run_plans_36_stacks_and_10800_runs_offline(
    pipeline_copy: Path, tmp_path: Path
) -> None:
    """With the sample cached in results/tasks.parquet, planning needs no hub."""
    tasks = [
        Task(
            task_id=f"m2w-{i:04d}",
            confirmed_task=f"Task number {i}",
            website=f"site{i % 7}",
            domain=("Travel", "Shopping", "Entertainment")[i % 3],
            subdomain=f"Sub{i % 5}",
            reference_steps=["[button] Go -> CLICK"] * (1 + i % 11),
        )
        for i in range(300)
    ]
    (pipeline_copy / "results").mkdir()
    # what an earlier `sample_tasks` left: the sample and its allocation table
    tasks_to_frame(tasks).write_parquet(pipeline_copy / "results" / "tasks.parquet")
    _, allocation = stratified_sample(tasks, 300, ["domain", "subdomain", "level"], 20260504)
    allocation.write_parquet(pipeline_copy / "results" / "tasks_allocation.parquet")
    allocation.write_csv(pipeline_copy / "results" / "tasks_allocation.csv")
    proc = snakemake("-n", "--configfile", PAPER, cwd=pipeline_copy, env=offline_env(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = job_counts(proc.stdout)
    assert "sample_tasks" not in jobs, jobs
    assert jobs["execute_stack"] == 36 and jobs["judge_runs"] == 36 and jobs["tag_values"] == 36
    for model in ("mistral7b", "qwen25_7b", "llama4_scout"):
        assert f"results/runs/{model}/a2a/semantic_kernel.parquet" in proc.stdout
    validate = subprocess.run(
        [str(BIN / "mastif"), "validate", PAPER], cwd=pipeline_copy, capture_output=True, text=True
    )
    assert validate.returncode == 0, validate.stderr
    assert "36 stack(s) x 300 task(s) x 1 repeat(s) = 10,800 runs" in validate.stdout


@pytest.mark.slow
def test_sample_tasks_draws_mind2web_from_the_hub_cache(
    pipeline_copy: Path, tmp_path: Path
) -> None:
    env = offline_env(tmp_path)
    make_hub_cache(Path(env["HF_HUB_CACHE"]))
    small = pipeline_copy / "small.yaml"
    small.write_text(yaml.safe_dump({"tasks": {"sample_size": 20}}))
    proc = snakemake(
        "--cores", "1", "results/tasks.parquet", "--configfile", PAPER, str(small),
        cwd=pipeline_copy, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tasks = pl.read_parquet(pipeline_copy / "results" / "tasks.parquet")
    allocation = pl.read_csv(pipeline_copy / "results" / "tasks_allocation.csv")
    assert tasks.height == 20 and allocation["sampled"].sum() == 20
    assert allocation.height == 15 and (allocation["sampled"] >= 1).all()
    assert set(allocation.columns) >= {"domain", "subdomain", "level", "quota", "minimum"}
    assert tasks["reference_steps"].list.len().min() >= 1


@pytest.mark.slow
def test_sample_tasks_fails_loudly_when_the_hub_is_out_of_reach(
    pipeline_copy: Path, tmp_path: Path
) -> None:
    proc = snakemake(
        "--cores", "1", "results/tasks.parquet", "--configfile", PAPER,
        cwd=pipeline_copy, env=offline_env(tmp_path),
    )  # fmt: skip
    assert proc.returncode != 0
    log = (pipeline_copy / "logs" / "sample_tasks" / "sample_tasks.log").read_text()
    text = proc.stderr + log
    assert "is not in the local Hugging Face cache" in text, text[-3000:]
    assert not (pipeline_copy / "results" / "tasks.parquet").exists()

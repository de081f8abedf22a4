"""Bridge: run one shard of one stack over the sampled tasks (see mastif.execution.runner.execute_stack)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import os
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from mastif.core.config import Stack
from mastif.core.trace import runs_to_table
from mastif.execution.budget_gate import model_job_gate, stop_at_budget
from mastif.execution.experiment import stack_job_config
from mastif.execution.runner import execute_stack, parse_scatteritem, setup_model_job
from mastif.tasks import tasks_from_frame

setup_model_job(snakemake.log.run)
# the sandbox is served from the workflow's resources/ (the files the rule tracks), not
# from wherever the package is installed
os.environ.setdefault("MASTIF_RESOURCES", str(Path.cwd() / "resources"))

w = snakemake.wildcards
p = snakemake.params
# everything from the rule's params, not from the config: what the job reads is what
# Snakemake tracks, so changing it reruns the job. The progress bar only draws on stderr
# and is no param, so toggling it reruns nothing.
config = stack_job_config(
    experiment=p.experiment,
    model_id=w.model,
    model=p.model_spec,
    protocol=w.protocol,
    prompt_format=p.prompt_format,
    generation=p.generation,
    tools=p.tools,
    web=p.web,
    web_options=p.web_options,
    workflow=p.workflow,
    repeats=p.repeats,
    sampling_seed=p.sampling_seed,
    execution={**p.execution, "progress": snakemake.config["execution"]["progress"]},
    base_dir=Path.cwd(),
    threads=snakemake.threads,
)
stack = Stack(w.model, w.protocol, w.framework)
tasks = tasks_from_frame(pl.read_parquet(snakemake.input.tasks))
# The budget and the price it is counted at are read from the config, not params: neither
# changes a run this job writes, and a param would make Snakemake rerun every finished
# stack (whose checkpoints are gone) when the budget is raised to continue.
budget = model_job_gate(
    snakemake.config["execution"]["budget"],
    snakemake.config["models"][w.model]["price"],
    stack,
    longest_s=config.generation.timeout_s,  # a run's time-out
)
# the budget's stop: no shard Parquet is written, the checkpoint keeps the finished runs
with stop_at_budget(stack.path):
    traces = execute_stack(
        config,
        stack,
        tasks,
        checkpoint_path=Path(p.checkpoint),
        server_log=Path(snakemake.log.server),
        base_dir=Path.cwd(),
        shard=parse_scatteritem(w.scatteritem),
        budget=budget,
    )
pq.write_table(runs_to_table(traces), snakemake.output.runs)
# the Parquet now holds this shard's runs; the checkpoint only served an interrupted job
Path(p.checkpoint).unlink(missing_ok=True)

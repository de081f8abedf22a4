"""Bridge: run one shard of one stack over the sampled tasks (see mastif.runner.execute_stack)."""

from mastif.logsetup import log_to

log_to(snakemake.log[0])

import os
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from mastif.config import Stack, parse_config
from mastif.runner import execute_stack, parse_scatteritem, setup_model_job
from mastif.tasks import tasks_from_frame
from mastif.trace import runs_to_table

setup_model_job(snakemake.log.run)
# the sandbox is served from the workflow's resources/ (the files the rule tracks), not
# from wherever the package is installed
os.environ.setdefault("MASTIF_RESOURCES", str(Path.cwd() / "resources"))

config = parse_config(snakemake.config, base_dir=Path.cwd())
w = snakemake.wildcards
stack = Stack(w.model, w.protocol, w.framework)
tasks = tasks_from_frame(pl.read_parquet(snakemake.input.tasks))
traces = execute_stack(
    config,
    stack,
    tasks,
    checkpoint_path=Path(snakemake.params.checkpoint),
    server_log=Path(snakemake.log.server),
    base_dir=Path.cwd(),
    shard=parse_scatteritem(w.scatteritem),
)
pq.write_table(runs_to_table(traces), snakemake.output.runs)
# the Parquet now holds this shard's runs; the checkpoint only served an interrupted job
Path(snakemake.params.checkpoint).unlink(missing_ok=True)

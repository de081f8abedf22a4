"""Bridge: run one stack over the sampled tasks (see mastif.runner.execute_stack)."""

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from mastif.config import Stack, parse_config
from mastif.runner import execute_stack, setup_model_job
from mastif.tasks import tasks_from_frame
from mastif.trace import runs_to_table

setup_model_job(snakemake.log.run)

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
)
pq.write_table(runs_to_table(traces), snakemake.output.runs)
# the Parquet now holds every run; the checkpoint only served an interrupted job
Path(snakemake.params.checkpoint).unlink(missing_ok=True)

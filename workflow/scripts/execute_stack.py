"""Bridge: run one stack over the sampled tasks (see mastif.runner.execute_stack)."""

import logging
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from mastif.config import Stack, parse_config
from mastif.runner import execute_stack, exit_cleanly_on_sigterm
from mastif.tasks import tasks_from_frame
from mastif.trace import runs_to_table

exit_cleanly_on_sigterm()
logging.basicConfig(
    filename=snakemake.log.run, level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
)
for noisy in ("httpx", "httpx2"):
    logging.getLogger(noisy).setLevel(logging.WARNING)

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

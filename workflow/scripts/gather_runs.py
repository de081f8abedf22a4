"""Bridge: one stack's shard Parquets -> its runs Parquet (see mastif.core.trace.gather_runs)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import logging

import pyarrow.parquet as pq

from mastif.core.trace import gather_runs

table = gather_runs([str(p) for p in snakemake.input.shards])
logging.info("%d runs from %d shard(s)", table.num_rows, len(snakemake.input.shards))
pq.write_table(table, snakemake.output.runs)

"""Bridge: one stack's shard Parquets -> its runs Parquet (see mastif.trace.gather_runs)."""

import logging

import pyarrow.parquet as pq

from mastif.trace import gather_runs

logging.basicConfig(filename=str(snakemake.log[0]), level=logging.INFO)
table = gather_runs([str(p) for p in snakemake.input.shards])
logging.info("%d runs from %d shard(s)", table.num_rows, len(snakemake.input.shards))
pq.write_table(table, snakemake.output.runs)

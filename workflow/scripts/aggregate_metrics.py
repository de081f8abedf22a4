"""Bridge: per-run and per-stack metrics, paper Eqs. 1-5 and 8 (see mastif.metrics)."""

import logging

import polars as pl

from mastif.metrics import run_metrics, stack_metrics

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

runs = pl.concat([pl.read_parquet(p) for p in snakemake.input.runs], how="vertical")
judged = pl.concat([pl.read_parquet(p) for p in snakemake.input.judged], how="vertical")
values = pl.concat([pl.read_parquet(p) for p in snakemake.input.values], how="vertical")
per_run = run_metrics(runs, judged, values, prices=snakemake.params.prices)
per_run.write_parquet(snakemake.output.runs)
stack_metrics(per_run).write_parquet(snakemake.output.stacks)

"""Bridge: mixed-effects and GEE models of every metric, clustered by task (mastif.mixed)."""

from mastif.logsetup import log_to

log_to(snakemake.log[0])

import logging

import polars as pl

from mastif.mixed import mixed_models

log = logging.getLogger("mixed_models")
table = mixed_models(
    pl.read_parquet(snakemake.input.runs),
    confidence=snakemake.params.confidence,
    progress=lambda metric: log.info("fitting %s", metric),
)
for row in table.filter(pl.col("term").is_null()).iter_rows(named=True):
    log.warning("%s: %s", row["metric"], row["note"])
table.write_parquet(snakemake.output.models)

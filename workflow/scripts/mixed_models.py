"""Bridge: mixed-effects and GEE models of every metric, clustered by task (mastif.analysis.mixed;
descriptive coefficients, no p or interval)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import logging

import polars as pl

from mastif.analysis.mixed import mixed_models

log = logging.getLogger("mixed_models")
runs = pl.read_parquet(snakemake.input.runs)
table = mixed_models(
    runs,
    min_n=snakemake.params.min_n,
    progress=lambda metric: log.info("fitting %s", metric),
)
for row in table.filter(pl.col("term").is_null()).iter_rows(named=True):
    log.warning("%s: %s", row["metric"], row["note"])
table.write_parquet(snakemake.output.models)

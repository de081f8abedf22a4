"""Bridge: mixed-effects and GEE models of every metric, clustered by task (mastif.analysis.mixed;
descriptive coefficients, no p or interval), and the joint test of each factor and
interaction (mastif.analysis.mixed_joint)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import logging

import polars as pl

from mastif.analysis.mixed import mixed_models
from mastif.analysis.mixed_joint import joint_tests

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

log.info("joint tests per factor and interaction")
joint = joint_tests(
    runs, min_n=snakemake.params.min_n, family_adjust=snakemake.params.family_adjust
)
log.info("%d joint tests, %d with a p-value", joint.height, joint["p_value"].is_not_null().sum())
joint.write_parquet(snakemake.output.joint)

"""Bridge: the joint test of each factor and interaction per metric, and within each factor its
levels' means and pairwise contrasts (mastif.analysis.mixed_joint): the inference path the
report leads with."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import logging

import polars as pl

from mastif.analysis.mixed_joint import joint_contrasts, joint_tests

log = logging.getLogger("joint_tests")
runs = pl.read_parquet(snakemake.input.runs)
joint = joint_tests(
    runs, min_n=snakemake.params.min_n, family_adjust=snakemake.params.family_adjust
)
log.info("%d joint tests, %d with a p-value", joint.height, joint["p_value"].is_not_null().sum())
levels, pairs = joint_contrasts(
    runs, min_n=snakemake.params.min_n, confidence=snakemake.params.confidence
)
log.info("%d level means, %d pairwise contrasts", levels.height, pairs.height)
joint.write_parquet(snakemake.output.joint)
levels.write_parquet(snakemake.output.levels)
pairs.write_parquet(snakemake.output.pairs)

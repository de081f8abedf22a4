"""Bridge: blocked omnibus and pairwise tests per metric and factor (mastif.analysis.blocked)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import logging

import polars as pl

from mastif.analysis.blocked import blocked_tests

results = blocked_tests(
    pl.read_parquet(snakemake.input.runs),
    min_n=snakemake.params.min_n,
    family_adjust=snakemake.params.family_adjust,
    seed=snakemake.params.seed,
)
results["tests"].write_parquet(snakemake.output.tests)
results["pairs"].write_parquet(snakemake.output.pairs)

tests = results["tests"]
alpha = snakemake.params.alpha
logging.getLogger("mastif.analysis.blocked").info(
    "%d omnibus rows, %d with a p-value, %d with %s-adjusted p < alpha %g; %d pairs",
    tests.height,
    tests["p_value"].is_not_null().sum(),
    (tests["p_adjusted"] < alpha).sum(),
    snakemake.params.family_adjust,
    alpha,
    results["pairs"].height,
)

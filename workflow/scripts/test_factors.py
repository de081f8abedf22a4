"""Bridge: Shapiro-Wilk, ANOVA / Kruskal-Wallis and Dunn per metric and factor (mastif.stats)."""

import logging

import polars as pl

from mastif.stats import test_factors

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

results = test_factors(
    pl.read_parquet(snakemake.input.runs),
    alpha=snakemake.params.alpha,
    p_adjust=snakemake.params.p_adjust,
)
for name in ("tests", "groups", "posthoc"):
    results[name].write_parquet(snakemake.output[name])

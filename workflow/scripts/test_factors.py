"""Bridge: the paper's tests (Shapiro-Wilk, ANOVA / Kruskal-Wallis, Dunn) per metric and
factor (mastif.analysis.stats)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import polars as pl

from mastif.analysis.stats import test_factors

results = test_factors(
    pl.read_parquet(snakemake.input.runs),
    alpha=snakemake.params.alpha,
    p_adjust=snakemake.params.p_adjust,
    min_n=snakemake.params.min_n,
    family_adjust=snakemake.params.family_adjust,
)
for name in ("tests", "groups", "posthoc"):
    results[name].write_parquet(snakemake.output[name])

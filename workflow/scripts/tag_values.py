"""Bridge: tag social values in the prompt, reasoning steps and answer of every run (mastif.evaluation.values)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import polars as pl

from mastif.evaluation.values import (
    DEFAULT_THRESHOLD,
    ValueTagger,
    load_value_corpus,
    load_value_embedder,
    tag_runs,
)

p = snakemake.params
corpus = load_value_corpus(snakemake.input.corpus[0] if snakemake.input.corpus else p.corpus)
threshold = DEFAULT_THRESHOLD if p.threshold is None else p.threshold
# the embedding computes with the job's threads, not every core of the machine
embedder = load_value_embedder(p.backend, threads=snakemake.threads)
tagger = ValueTagger(corpus, embedder, threshold=threshold)
values = tag_runs(pl.read_parquet(snakemake.input.runs), tagger, list(p.sensitivity_thresholds))
values.write_parquet(snakemake.output.values)

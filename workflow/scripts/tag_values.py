"""Bridge: tag social values in the prompt, reasoning steps and answer of every run (mastif.values)."""

from mastif.logsetup import log_to

log_to(snakemake.log[0])

import polars as pl
import torch

# torch uses every core by default: keep the embedding to the job's threads, so it does
# not take more of the machine than the scheduler gave it
torch.set_num_threads(snakemake.threads)

from mastif.values import (
    DEFAULT_THRESHOLD,
    ValueTagger,
    load_minilm_embedder,
    load_value_corpus,
    tag_runs,
)

p = snakemake.params
corpus = load_value_corpus(snakemake.input.corpus[0] if snakemake.input.corpus else p.corpus)
threshold = DEFAULT_THRESHOLD if p.threshold is None else p.threshold
tagger = ValueTagger(corpus, load_minilm_embedder(), threshold=threshold)
values = tag_runs(pl.read_parquet(snakemake.input.runs), tagger, list(p.sensitivity_thresholds))
values.write_parquet(snakemake.output.values)

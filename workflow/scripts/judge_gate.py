"""Bridge: the judge gate's verdict beside the pooled judge-vs-check row it reads
(mastif.analysis.judge_validity.gate_table, mastif.analysis.inference.gate_verdict)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import polars as pl

from mastif.analysis.judge_validity import gate_table

gate_table(pl.read_parquet(snakemake.input.judge_validity)).write_csv(snakemake.output.gate)

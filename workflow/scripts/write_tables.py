"""Bridge: the paper's Tables 2-6 and the protocol-cost Table 7 as Markdown and CSV (mastif.report)."""

from pathlib import Path

import polars as pl

from mastif.report import paper_tables, write_tables

tables = paper_tables(
    pl.read_parquet(snakemake.input.stacks),
    pl.read_parquet(snakemake.input.tests),
    pl.read_parquet(snakemake.input.groups),
)
write_tables(tables, Path(snakemake.output.markdown[0]).parent)

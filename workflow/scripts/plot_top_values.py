"""Bridge: top-10 social values per model in inputs, reasoning and outputs (mastif.reporting.plots)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from pathlib import Path

import polars as pl

from mastif.reporting.plots import plot_top_values

values = pl.concat([pl.read_parquet(p) for p in snakemake.input.values], how="vertical")
plot_top_values(values, Path(snakemake.output.png[0]).parent)

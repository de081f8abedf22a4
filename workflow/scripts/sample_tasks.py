"""Bridge: draw the stratified task sample (see mastif.tasks.sampling)."""

import logging

from mastif.tasks import load_tasks, stratified_sample, tasks_to_frame

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

p = snakemake.params
source_path = snakemake.input.tasks[0] if p.source == "jsonl" else None
population = load_tasks(p.source, source_path)
sample, allocation = stratified_sample(population, p.sample_size, list(p.strata), p.seed)
tasks_to_frame(sample).write_parquet(snakemake.output.tasks)
allocation.write_parquet(snakemake.output.allocation)
logging.info("sampled %d of %d tasks\n%s", len(sample), len(population), allocation)

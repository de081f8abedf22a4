"""Bridge: draw the stratified task sample (see mastif.tasks.sampling)."""

import logging

from mastif.tasks import load_tasks, stratified_sample, tasks_to_frame

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

p = snakemake.params
# the rule's input is the task file for every source (builtin = the file in resources/)
population = load_tasks("jsonl", snakemake.input.tasks[0])
sample, allocation = stratified_sample(
    population, p.sample_size, list(p.strata), p.seed, min_per_stratum=p.min_per_stratum
)
tasks_to_frame(sample).write_parquet(snakemake.output.tasks)
allocation.write_parquet(snakemake.output.allocation)
logging.info("sampled %d of %d tasks\n%s", len(sample), len(population), allocation)

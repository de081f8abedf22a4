"""Bridge: draw the stratified task sample (see mastif.tasks.sampling)."""

import logging

from mastif.tasks import stratified_sample, tasks_to_frame
from mastif.tasks.loaders import load_task_files

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)

p = snakemake.params
# the rule's inputs are the task files for every source (builtin, sandbox: files in resources/)
population = load_task_files(snakemake.input.tasks)
sample, allocation = stratified_sample(
    population, p.sample_size, list(p.strata), p.seed, min_per_stratum=p.min_per_stratum
)
tasks_to_frame(sample).write_parquet(snakemake.output.tasks)
allocation.write_parquet(snakemake.output.allocation)
logging.info("sampled %d of %d tasks\n%s", len(sample), len(population), allocation)

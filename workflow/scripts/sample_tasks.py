"""Bridge: load the configured task source and draw the stratified sample (mastif.tasks)."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

import logging

from mastif.tasks import load_tasks, stratified_sample, tasks_to_frame
from mastif.tasks.loaders import load_task_files

p = snakemake.params
if p.source in ("builtin", "sandbox", "jsonl"):
    # their files are the rule's inputs (for builtin and sandbox: files in resources/)
    population = load_task_files(snakemake.input.tasks)
else:
    path = snakemake.input.tasks[0] if snakemake.input.tasks else None
    population = load_tasks(
        p.source, path, format=p.format, columns=p.columns, splits=p.splits, hub=p.hub
    )
sample, allocation = stratified_sample(
    population, p.sample_size, list(p.strata), p.seed, min_per_stratum=p.min_per_stratum
)
tasks_to_frame(sample).write_parquet(snakemake.output.tasks)
allocation.write_parquet(snakemake.output.allocation)
allocation.write_csv(snakemake.output.allocation_csv)
logging.info("sampled %d of %d tasks\n%s", len(sample), len(population), allocation)

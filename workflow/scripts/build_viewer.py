"""Bridge: the trace viewer, a static site of every run (mastif.reporting.viewer, docs/viewer.md), with
the judge gate's verdict on every page."""

from mastif.core.logsetup import log_to

log_to(snakemake.log[0])

from mastif.reporting.viewer import build_site

build_site(
    snakemake.output.site,
    metrics_runs=snakemake.input.metrics_runs,
    tasks=snakemake.input.tasks,
    runs=list(snakemake.input.runs),
    judged=list(snakemake.input.judged),
    values=list(snakemake.input.values),
    title=snakemake.params.title,
    judge_validity=snakemake.input.judge_validity,
)

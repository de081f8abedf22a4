# mastif: compare agent technology stacks (model x protocol x framework) on web tasks.
# The DAG: sample_tasks -> execute_stack (one job per stack) -> judge_runs + tag_values
# -> aggregate_metrics -> test_factors, mixed_models, judge_agreement -> plots, tables,
# the trace viewer (results/viewer/), report. With import.mastif_log set,
# import_mastif_log (a log of the original MASTIF) replaces sample_tasks and execute_stack.
# The environment is the .venv `make setup` builds (pinned by requirements.lock); a smoke
# test of the whole DAG on a scripted model: see .test/config.yaml.
from snakemake.utils import min_version

min_version("9.20")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"


if IMPORTING:

    include: "workflow/rules/import.smk"

else:

    include: "workflow/rules/sample.smk"
    include: "workflow/rules/execute.smk"


include: "workflow/rules/judge.smk"
include: "workflow/rules/judge_panel.smk"
include: "workflow/rules/values.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/stats.smk"
include: "workflow/rules/effects.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/plots.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/viewer.smk"


rule all:
    default_target: True
    input:
        get_final_outputs(),

# mastif: compare agent technology stacks (model x protocol x framework) on web tasks.
# The DAG: sample_tasks -> execute_stack (one job per stack) -> (later) judge, values, metrics.


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/sample.smk"
include: "workflow/rules/execute.smk"


rule all:
    default_target: True
    input:
        get_final_outputs(),

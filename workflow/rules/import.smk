# Import mode (import.mastif_log): a results log of the original MASTIF becomes the task
# table and one runs Parquet per stack it has runs of, in place of sample_tasks and
# execute_stack; judging, values, metrics, statistics and figures then run as usual.
rule import_mastif_log:
    input:
        log=config["import"]["mastif_log"],
    output:
        tasks=results.tasks(),
        runs=every_stack(results.runs),
    log:
        "logs/import_mastif_log/import_mastif_log.log",
    localrule: True
    script:
        "../scripts/import_mastif_log.py"

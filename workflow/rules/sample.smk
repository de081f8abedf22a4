rule sample_tasks:
    input:
        tasks=get_task_source_files,
    output:
        tasks="results/tasks.parquet",
        allocation="results/tasks_allocation.parquet",
    log:
        "logs/sample_tasks/sample_tasks.log",
    conda:
        "../envs/mastif.yaml"
    params:
        source=config["tasks"]["source"],
        sample_size=config["tasks"]["sample_size"],
        strata=config["tasks"]["strata"],
        min_per_stratum=config["tasks"]["min_per_stratum"],
        seed=config["tasks"]["seed"],
    script:
        "../scripts/sample_tasks.py"

rule build_viewer:
    input:
        metrics_runs="results/metrics/runs.parquet",
        tasks="results/tasks.parquet",
        runs=get_run_outputs(),
        judged=get_judged_outputs(),
        values=get_values_outputs(),
    output:
        site=report(
            directory("results/viewer"),
            htmlindex="index.html",
            caption="../report/viewer.rst",
            category="Trace viewer",
        ),
    log:
        "logs/build_viewer/build_viewer.log",
    params:
        title=config["experiment"],
    script:
        "../scripts/build_viewer.py"

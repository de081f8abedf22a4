rule build_viewer:
    input:
        metrics_runs="results/metrics/runs.parquet",
        tasks="results/tasks.parquet",
        runs=get_run_outputs(),
        judged=get_judged_outputs(),
        values=get_values_outputs(),
        # the judge gate's verdict, shown on every page
        judge_validity="results/stats/judge_validity.parquet",
    output:
        # not a report() item: a directory with an htmlindex makes Snakemake refuse a
        # single-file report (.html); workflow.rst links to it instead
        site=directory("results/viewer"),
    log:
        "logs/build_viewer/build_viewer.log",
    params:
        title=config["experiment"],
    script:
        "../scripts/build_viewer.py"

rule build_viewer:
    input:
        metrics_runs=results.metrics("runs"),
        tasks=results.tasks(),
        runs=every_stack(results.runs),
        judged=every_stack(results.judged),
        values=every_stack(results.values),
        # the judge gate's verdict, shown on every page
        judge_validity=results.stats("judge_validity"),
    output:
        # not a report() item: a directory with an htmlindex makes Snakemake refuse a
        # single-file report (.html); workflow.rst links to it instead
        site=directory(results.VIEWER),
    log:
        "logs/build_viewer/build_viewer.log",
    params:
        title=config["experiment"],
    script:
        "../scripts/build_viewer.py"

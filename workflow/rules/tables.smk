rule write_tables:
    input:
        stacks="results/metrics/stacks.parquet",
        tests="results/stats/tests.parquet",
        groups="results/stats/groups.parquet",
        effects="results/stats/effects.parquet",
        repeats="results/stats/repeats.parquet",
        judge_validity="results/stats/judge_validity.parquet",
        judge_panel="results/stats/judge_panel.parquet",
        # the versions table reads the runs' provenance columns
        runs=get_run_outputs(),
    output:
        markdown=expand("results/tables/{table}.md", table=TABLES),
        csv=report(
            expand("results/tables/{table}.csv", table=TABLES),
            caption="../report/tables.rst",
            category="Tables",
        ),
        versions_markdown="results/tables/versions.md",
        versions=report(
            "results/tables/versions.csv",
            caption="../report/versions.rst",
            category="Tables",
        ),
    log:
        "logs/write_tables/write_tables.log",
    params:
        alpha=config["stats"]["alpha"],
    script:
        "../scripts/write_tables.py"

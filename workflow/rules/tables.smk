rule write_tables:
    input:
        stacks="results/metrics/stacks.parquet",
        # the mixed models' joint test per factor and interaction (the report leads with it)
        joint="results/stats/mixed_joint.parquet",
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
            labels=with_judge_gate({"tables": "mastif tables"}),
        ),
        versions_markdown="results/tables/versions.md",
        versions=report(
            "results/tables/versions.csv",
            caption="../report/versions.rst",
            category="Tables",
            labels={"tables": "versions"},
        ),
    log:
        "logs/write_tables/write_tables.log",
    params:
        alpha=config["stats"]["alpha"],
        # below min_n independent tasks: no p-value, no best level, and the caption says why
        min_n=config["stats"]["min_n"],
    script:
        "../scripts/write_tables.py"

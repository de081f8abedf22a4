rule write_tables:
    input:
        stacks=results.metrics("stacks"),
        # the mixed models' joint test per factor and interaction (the report leads with it)
        joint=results.stats("mixed_joint"),
        tests=results.stats("tests"),
        groups=results.stats("groups"),
        effects=results.stats("effects"),
        repeats=results.stats("repeats"),
        judge_validity=results.stats("judge_validity"),
        judge_panel=results.stats("judge_panel"),
        # the versions table reads the runs' provenance columns
        runs=every_stack(results.runs),
    output:
        markdown=expand(results.table("{table}", "md"), table=TABLES),
        csv=report(
            expand(results.table("{table}", "csv"), table=TABLES),
            caption="../report/tables.rst",
            category="Tables",
            labels=with_judge_gate({"tables": "mastif tables"}),
        ),
        versions_markdown=results.table("versions", "md"),
        versions=report(
            results.table("versions", "csv"),
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

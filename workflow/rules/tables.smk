rule write_tables:
    input:
        stacks=results.metrics("stacks"),
        # the mixed models' joint test per factor and interaction (the report leads with it)
        joint=results.stats("mixed_joint"),
        # within each factor: levels' means and pairwise contrasts (Table 6's best level)
        joint_levels=results.stats("joint_levels"),
        joint_pairs=results.stats("joint_pairs"),
        tests=results.stats("tests"),
        effects=results.stats("effects"),
        repeats=results.stats("repeats"),
        judge_validity=results.stats("judge_validity"),
        judge_panel=results.stats("judge_panel"),
        # the versions table reads the runs' provenance columns
        runs=every_stack(results.runs),
    output:
        markdown=expand(results.table("{table}", "md"), table=TABLES),
        lead_csv=report(
            expand(results.table("{table}", "csv"), table=LEAD_TABLES),
            caption="../report/lead_tables.rst",
            category=LEAD_CATEGORY,
            subcategory="Joint tests",
            labels=with_judge_gate({"tables": "joint tests and Table 6"}),
        ),
        csv=report(
            expand(results.table("{table}", "csv"), table=OTHER_TABLES),
            caption="../report/tables.rst",
            category=TABLES_CATEGORY,
            labels=with_judge_gate({"tables": "mastif tables"}),
        ),
        paper_csv=report(
            expand(results.table("{table}", "csv"), table=PAPER_TABLES),
            caption="../report/paper_tests.rst",
            category=PAPER_CATEGORY,
            subcategory="Tests per metric and factor",
            labels=with_judge_gate({"tables": "the paper's tests"}),
        ),
        versions_markdown=results.table("versions", "md"),
        versions=report(
            results.table("versions", "csv"),
            caption="../report/versions.rst",
            category=TABLES_CATEGORY,
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


rule front_page:
    input:
        joint=results.stats("mixed_joint"),
        figure=results.plot("joint_effects", "png"),
        judge_validity=results.stats("judge_validity"),
        # the independent tasks are counted in the runs
        runs=results.metrics("runs"),
    output:
        # included by workflow/report/workflow.rst
        page=results.FRONT_PAGE,
    log:
        "logs/front_page/front_page.log",
    params:
        alpha=config["stats"]["alpha"],
        min_n=config["stats"]["min_n"],
        family_adjust=config["stats"]["family_adjust"],
    script:
        "../scripts/write_front_page.py"

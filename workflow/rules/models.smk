rule mixed_models:
    input:
        runs=results.metrics("runs"),
    output:
        models=results.stats("mixed_models"),
    log:
        "logs/mixed_models/mixed_models.log",
    params:
        # below min_n independent tasks: no fit
        min_n=config["stats"]["min_n"],
    script:
        "../scripts/mixed_models.py"


rule joint_tests:
    input:
        runs=results.metrics("runs"),
    output:
        # what the report leads with: one test per factor and interaction, per metric
        joint=results.stats("mixed_joint"),
        # within a factor: its levels' means and their pairwise contrasts (Table 6)
        levels=results.stats("joint_levels"),
        pairs=results.stats("joint_pairs"),
    log:
        "logs/joint_tests/joint_tests.log",
    params:
        confidence=config["stats"]["confidence"],
        # below min_n independent tasks: no p; below 15 (MIN_TASKS_FOR_CI) no interval
        min_n=config["stats"]["min_n"],
        family_adjust=config["stats"]["family_adjust"],
    script:
        "../scripts/joint_tests.py"

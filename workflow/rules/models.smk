rule mixed_models:
    input:
        runs=results.metrics("runs"),
    output:
        models=results.stats("mixed_models"),
        joint=results.stats("mixed_joint"),
    log:
        "logs/mixed_models/mixed_models.log",
    params:
        confidence=config["stats"]["confidence"],
        # below min_n independent tasks: no p, no interval, no joint test
        min_n=config["stats"]["min_n"],
        family_adjust=config["stats"]["family_adjust"],
    script:
        "../scripts/mixed_models.py"

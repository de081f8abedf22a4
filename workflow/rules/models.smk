rule mixed_models:
    input:
        runs="results/metrics/runs.parquet",
    output:
        models="results/stats/mixed_models.parquet",
    log:
        "logs/mixed_models/mixed_models.log",
    params:
        confidence=config["stats"]["confidence"],
    script:
        "../scripts/mixed_models.py"

rule test_factors:
    input:
        runs="results/metrics/runs.parquet",
    output:
        tests="results/stats/tests.parquet",
        groups="results/stats/groups.parquet",
        posthoc="results/stats/posthoc.parquet",
    log:
        "logs/test_factors/test_factors.log",
    params:
        alpha=config["stats"]["alpha"],
        p_adjust=config["stats"]["p_adjust"],
    script:
        "../scripts/test_factors.py"

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
        min_n=config["stats"]["min_n"],
        family_adjust=config["stats"]["family_adjust"],
    script:
        "../scripts/test_factors.py"


rule blocked_tests:
    input:
        runs="results/metrics/runs.parquet",
    output:
        tests="results/stats/blocked_tests.parquet",
        pairs="results/stats/blocked_pairs.parquet",
    log:
        "logs/blocked_tests/blocked_tests.log",
    params:
        alpha=config["stats"]["alpha"],
        min_n=config["stats"]["min_n"],
        family_adjust=config["stats"]["family_adjust"],
        # the permutation p's of small samples
        seed=config["stats"]["seed"],
    script:
        "../scripts/blocked_tests.py"

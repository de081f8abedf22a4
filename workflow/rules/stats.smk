rule test_factors:
    input:
        runs=results.metrics("runs"),
    output:
        tests=results.stats("tests"),
        groups=results.stats("groups"),
        posthoc=results.stats("posthoc"),
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
        runs=results.metrics("runs"),
    output:
        tests=results.stats("blocked_tests"),
        pairs=results.stats("blocked_pairs"),
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

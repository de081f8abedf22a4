rule bootstrap_effects:
    input:
        runs=results.metrics("runs"),
    output:
        effects=results.stats("effects"),
        repeats=results.stats("repeats"),
        judge_validity=results.stats("judge_validity"),
    log:
        "logs/bootstrap_effects/bootstrap_effects.log",
    params:
        bootstrap_resamples=config["stats"]["bootstrap_resamples"],
        confidence=config["stats"]["confidence"],
        seed=config["stats"]["seed"],
        min_kappa=config["judge"]["min_kappa"],
        # below min_n independent tasks no Pareto share (a front of so few tasks is no finding)
        min_n=config["stats"]["min_n"],
    script:
        "../scripts/bootstrap_effects.py"

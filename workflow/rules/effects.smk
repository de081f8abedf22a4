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
        # the judge gate (mastif.analysis.inference.assess_gate): its threshold and floors
        min_kappa=config["judge"]["min_kappa"],
        # below min_n independent tasks no Pareto share (a front of so few tasks is no finding)
        min_n=config["stats"]["min_n"],
        gate_min_tasks=config["judge"]["gate_min_tasks"],
        gate_min_per_class=config["judge"]["gate_min_per_class"],
    script:
        "../scripts/bootstrap_effects.py"

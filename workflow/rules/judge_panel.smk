rule judge_agreement:
    input:
        judged=every_stack(results.judged),
        runs=results.metrics("runs"),
    output:
        judge_panel=results.stats("judge_panel"),
    log:
        "logs/judge_agreement/judge_agreement.log",
    params:
        judge_models=get_judge_panel(),
        judge_repeats=config["judge"]["repeats"],
        bootstrap_resamples=config["stats"]["bootstrap_resamples"],
        confidence=config["stats"]["confidence"],
        seed=config["stats"]["seed"],
    script:
        "../scripts/judge_agreement.py"

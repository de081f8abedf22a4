rule tag_values:
    input:
        runs=results.runs(),
        corpus=get_values_corpus_file,
    output:
        values=results.values(),
    log:
        "logs/tag_values/{model}/{protocol}/{framework}.log",
    priority: 10
    threads: 1
    resources:
        # half of timing_lock: never beside an execute_stack job (whose CT it would slow)
        timing_lock=1,
    params:
        corpus=config["values"]["corpus"],
        threshold=config["values"]["threshold"],
        sensitivity_thresholds=config["values"]["sensitivity_thresholds"],
        backend=config["values"]["backend"],
    script:
        "../scripts/tag_values.py"

rule tag_values:
    input:
        runs="results/runs/{model}/{protocol}/{framework}.parquet",
        corpus=get_values_corpus_file,
    output:
        values="results/values/{model}/{protocol}/{framework}.parquet",
    log:
        "logs/tag_values/{model}/{protocol}/{framework}.log",
    params:
        corpus=config["values"]["corpus"],
        threshold=config["values"]["threshold"],
        sensitivity_thresholds=config["values"]["sensitivity_thresholds"],
    script:
        "../scripts/tag_values.py"

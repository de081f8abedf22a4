rule aggregate_metrics:
    input:
        runs=get_run_outputs(),
        judged=get_judged_outputs(),
        values=get_values_outputs(),
    output:
        runs="results/metrics/runs.parquet",
        stacks="results/metrics/stacks.parquet",
    log:
        "logs/aggregate_metrics/aggregate_metrics.log",
    params:
        prices=get_model_prices(),
    script:
        "../scripts/aggregate_metrics.py"

rule write_tables:
    input:
        stacks="results/metrics/stacks.parquet",
        tests="results/stats/tests.parquet",
        groups="results/stats/groups.parquet",
    output:
        markdown=expand("results/tables/{table}.md", table=TABLES),
        csv=report(
            expand("results/tables/{table}.csv", table=TABLES),
            caption="../report/tables.rst",
            category="Tables",
        ),
    log:
        "logs/write_tables/write_tables.log",
    conda:
        "../envs/mastif.yaml"
    script:
        "../scripts/write_tables.py"

rule aggregate_metrics:
    input:
        runs=every_stack(results.runs),
        judged=every_stack(results.judged),
        values=every_stack(results.values),
    output:
        runs=results.metrics("runs"),
        stacks=results.metrics("stacks"),
        # groups of stacks with byte-identical final answers (mastif.evaluation.answers); its one-line
        # summary is a label the report's front page prints (workflow.rst)
        identical_answers=report(
            results.metrics("identical_answers", "csv"),
            caption="../report/identical_answers.rst",
            category=TABLES_CATEGORY,
            subcategory="Identical outputs",
            labels=get_identical_answers_labels,
        ),
    log:
        "logs/aggregate_metrics/aggregate_metrics.log",
    params:
        prices=get_model_prices(),
    script:
        "../scripts/aggregate_metrics.py"


# The judge gate's verdict (mastif.analysis.inference.gate_verdict) as a one-row table; its label
# (get_judge_gate_labels) is what the report's front page prints at the top (workflow.rst),
# whatever other report item carries it.
rule judge_gate:
    input:
        judge_validity=results.stats("judge_validity"),
    output:
        gate=report(
            results.table("judge_gate", "csv"),
            caption="../report/judge_gate.rst",
            category=GATE_CATEGORY,
            labels=get_judge_gate_labels,
        ),
    log:
        "logs/judge_gate/judge_gate.log",
    script:
        "../scripts/judge_gate.py"

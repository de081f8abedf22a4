rule plot_violins:
    input:
        runs=results.metrics("runs"),
        posthoc=results.stats("posthoc"),
        # the judge gate's verdict, written inside the figure of a judge score
        judge_validity=results.stats("judge_validity"),
    output:
        png=report(
            results.plot("violin_{metric}", "png"),
            caption="../report/violin.rst",
            category=PAPER_CATEGORY,
            subcategory="Metric by factor (Dunn brackets)",
            labels=with_judge_gate(
                {"metric": "{metric}", "figure": "violin"},
                judge_based=lambda wildcards: wildcards.metric in JUDGE_METRICS,
                extra=get_dunn_labels,
            ),
        ),
        svg=results.plot("violin_{metric}", "svg"),
    log:
        "logs/plot_violins/{metric}.log",
    params:
        alpha=config["stats"]["alpha"],
        # no star below min_n independent tasks (runs of one task are not independent)
        min_n=config["stats"]["min_n"],
    script:
        "../scripts/plot_violins.py"


rule plot_pareto:
    input:
        stacks=results.metrics("stacks"),
        # the tasks counted: below stats.min_n of them no stack is starred Pareto-optimal
        runs=results.metrics("runs"),
        judge_validity=results.stats("judge_validity"),
    output:
        png=report(
            results.plot("pareto", "png"),
            caption="../report/pareto.rst",
            category=FIGURES_CATEGORY,
            subcategory="Efficiency",
            labels=with_judge_gate({"figure": "Pareto frontier"}),
        ),
        svg=results.plot("pareto", "svg"),
    log:
        "logs/plot_pareto/plot_pareto.log",
    params:
        # no Pareto star below min_n independent tasks (runs of one task are not independent)
        min_n=config["stats"]["min_n"],
    script:
        "../scripts/plot_pareto.py"


rule plot_effects:
    input:
        effects=results.stats("effects"),
        judge_validity=results.stats("judge_validity"),
    output:
        png=report(
            results.plot("effects", "png"),
            caption="../report/effects.rst",
            category=FIGURES_CATEGORY,
            subcategory="Effects",
            labels=with_judge_gate({"figure": "per-stack means with CIs"}),
        ),
        svg=results.plot("effects", "svg"),
    log:
        "logs/plot_effects/plot_effects.log",
    params:
        confidence=config["stats"]["confidence"],
    script:
        "../scripts/plot_effects.py"


rule plot_top_values:
    input:
        values=every_stack(results.values),
    output:
        png=report(
            expand(results.plot("top_values_{model}", "png"), model=STACK_MODELS),
            caption="../report/top_values.rst",
            category=FIGURES_CATEGORY,
            subcategory="Social values",
            labels=lambda wildcards: {"figure": "top values"},
        ),
        svg=expand(results.plot("top_values_{model}", "svg"), model=STACK_MODELS),
    log:
        "logs/plot_top_values/plot_top_values.log",
    script:
        "../scripts/plot_top_values.py"


rule plot_joint_effects:
    input:
        joint=results.stats("mixed_joint"),
        levels=results.stats("joint_levels"),
        # the judge gate's verdict stands inside the figure (it shows TCR, TU and TA)
        judge_validity=results.stats("judge_validity"),
    output:
        png=report(
            results.plot("joint_effects", "png"),
            caption="../report/joint_effects.rst",
            category=LEAD_CATEGORY,
            subcategory="Joint tests",
            labels=with_judge_gate(
                {"figure": "each factor's levels, with its joint test"}
            ),
        ),
        svg=results.plot("joint_effects", "svg"),
    log:
        "logs/plot_joint_effects/plot_joint_effects.log",
    params:
        # (n.s.) marks an adjusted p not below alpha
        alpha=config["stats"]["alpha"],
    script:
        "../scripts/plot_joint_effects.py"

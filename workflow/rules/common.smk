import glob
import os
from pathlib import Path

from snakemake.utils import validate

from mastif.core import metric_registry, results
from mastif.core.config import ConfigError

from mastif.execution.experiment import parse_config
from mastif.execution.frameworkenv import declared_envs, framework_env
from mastif.importers import MastifLogError, stacks_in_log

# Rules and defaults live in the schema; a typo'd key or a wrong type stops here,
# before any job (and so any model) starts.
validate(config, schema="../../config/schema/config.schema.yaml")
try:
    EXPERIMENT = parse_config(config, base_dir=Path.cwd())
except ConfigError as exc:
    raise ValueError(str(exc)) from None

# Import mode (import.mastif_log): the stacks are those the log has runs of (the whole log
# is checked here, so a bad log stops the run before any job); else the factorial grid.
IMPORTING = EXPERIMENT.importing
if IMPORTING:
    try:
        STACKS = stacks_in_log(EXPERIMENT.import_.mastif_log)
    except MastifLogError as exc:
        raise ValueError(str(exc)) from None
else:
    STACKS = EXPERIMENT.stacks()
# the models of the stacks, in order: one top-values figure each
STACK_MODELS = list(dict.fromkeys(s.model for s in STACKS))


# API keys are read from the environment in code, never passed as params; declaring them
# makes Snakemake stop before any job when one is unset, and pass them on to cluster jobs.
envvars:
    *EXPERIMENT.required_envvars(),


# the paper's per-run metrics (one violin each) and the judge's scores, from the registry
METRICS = list(metric_registry.PER_RUN)
# The report's categories, in the order its menu sorts them: what it leads with first (the
# joint tests and Table 6, which names a best level from their family), then the judge gate,
# then the rest; the paper's own tests (runs pooled as independent) in a section of their own.
LEAD_CATEGORY = "1 Joint tests (read first)"
GATE_CATEGORY = "2 Judge gate"
TABLES_CATEGORY = "3 Tables"
FIGURES_CATEGORY = "4 Figures"
PAPER_CATEGORY = "5 The paper's tests (runs pooled)"
LEAD_TABLES = ["mixed_joint", "table6_best_stacks"]
PAPER_TABLES = ["kruskal_summary"]
OTHER_TABLES = [
    "table2_task_completion",
    "table3_efficiency",
    "table4_tool_use",
    "table5_social_values",
    "table7_protocol_cost",
    "table8_ground_truth",
    "effects",
    "repeats",
    "judge_validity",
    "judge_panel",
    "power",
]
TABLES = LEAD_TABLES + OTHER_TABLES + PAPER_TABLES
FIGURE_FORMATS = ["png", "svg"]
TABLE_FORMATS = ["md", "csv"]


wildcard_constraints:
    metric="|".join(METRICS),
    model="|".join(sorted({s.model for s in STACKS})),
    protocol="|".join(sorted({s.protocol for s in STACKS})),
    framework="|".join(sorted({s.framework for s in STACKS})),


def every_stack(path):
    """``path`` (a function of mastif.core.results, e.g. results.runs) of every stack."""
    return [path(s.path) for s in STACKS]


def get_final_outputs():
    return (
        [results.tasks()]
        + ([] if IMPORTING else [results.tasks_allocation()])
        + every_stack(results.runs)
        + every_stack(results.judged)
        + every_stack(results.values)
        + [
            results.metrics("runs"),
            results.metrics("stacks"),
            results.metrics("identical_answers", "csv"),
            results.table("judge_gate", "csv"),
        ]
        + expand(
            results.stats("{name}"),
            name=[
                "tests",
                "groups",
                "posthoc",
                "blocked_tests",
                "blocked_pairs",
                "mixed_models",
                "mixed_joint",
                "joint_levels",
                "joint_pairs",
                "effects",
                "repeats",
                "judge_validity",
                "judge_panel",
            ],
        )
        + expand(
            results.plot("violin_{metric}", "{ext}"), metric=METRICS, ext=FIGURE_FORMATS
        )
        + expand(results.plot("pareto", "{ext}"), ext=FIGURE_FORMATS)
        + expand(results.plot("effects", "{ext}"), ext=FIGURE_FORMATS)
        + expand(results.plot("joint_effects", "{ext}"), ext=FIGURE_FORMATS)
        + [results.FRONT_PAGE]
        + expand(
            results.plot("top_values_{model}", "{ext}"),
            model=STACK_MODELS,
            ext=FIGURE_FORMATS,
        )
        + expand(results.table("{table}", "{ext}"), table=TABLES, ext=TABLE_FORMATS)
        + expand(results.table("versions", "{ext}"), ext=TABLE_FORMATS)
        + [results.VIEWER]
    )


def get_task_source_files(wildcards):
    """The task files are inputs, so editing one resamples.

    Mind2Web comes from the hub (repo and revision are params), so planning never touches
    the network.
    """
    tasks = config["tasks"]
    if tasks["source"] in ("jsonl", "file", "online_mind2web"):
        return [tasks["path"]]
    if tasks["source"] == "mind2web":
        return []
    if tasks["source"] == "sandbox":
        return sorted(glob.glob("resources/sandbox/tasks/*.jsonl"))
    return ["resources/tasks/builtin.jsonl"]


def get_sandbox_files(wildcards):
    """The sandbox sites (data, templates, knowledge corpus) under web: sandbox, so editing
    a site reruns execution; its task files only matter through the sample."""
    if config["web"] != "sandbox":
        return []
    files = glob.glob("resources/sandbox/**/*", recursive=True)
    return sorted(
        f
        for f in files
        if os.path.isfile(f) and not f.startswith("resources/sandbox/tasks/")
    )


def get_prompt_files(wildcards):
    """Prompts are inputs: editing one reruns execution and what follows."""
    return [node["prompt"] for node in config["workflow"]["nodes"]]


def run_shaping_spec(model_id):
    """What of a model's spec shapes its replies; the price only prices them (a metrics
    param)."""
    return {k: v for k, v in config["models"][model_id].items() if k != "price"}


def get_model_spec(wildcards):
    """What shapes a stack's runs."""
    return run_shaping_spec(wildcards.model)


def get_prompt_format(wildcards):
    """Whether the stack's prompts are wrapped in its protocol's message format."""
    return EXPERIMENT.prompt_format_for(wildcards.protocol) is not None


def get_stack_execution():
    """The execution keys a stack job reads that shape its runs (progress only draws)."""
    keys = ("concurrency", "provider_retries", "response_cache")
    return {k: config["execution"][k] for k in keys}


def get_model_prices():
    """Model id -> price per million tokens (or None), for the cost columns."""
    return {mid: spec.get("price") for mid, spec in config["models"].items()}


def get_judge_panel():
    """The judges: judge.models, or judge.model alone."""
    return list(config["judge"].get("models") or [config["judge"]["model"]])


def get_judge_model_specs():
    """Per judge of the panel, what shapes its replies."""
    return {mid: run_shaping_spec(mid) for mid in get_judge_panel()}


def model_files(spec):
    """The files a model spec names: a scripted model's script, a local server's chat
    template. Editing one reruns what the model produced."""
    files = [spec["model"]] if spec["provider"] == "scripted" else []
    options = spec.get("options") or {}
    templates = [options.get(key) for key in ("chat_template", "tool_call_template")]
    return files + [t for t in templates if spec["provider"] == "local" and t]


def get_framework_env_record(wildcards):
    """A framework with an environment of its own gets it built before its stack jobs."""
    return results.framework_env() if wildcards.framework in declared_envs() else []


def get_framework_lock(wildcards):
    """The lock a framework's environment is built from: a new lock rebuilds it."""
    return str(framework_env(wildcards.framework).lock)


def get_model_files(wildcards):
    """The stack model's files (script, chat template) are inputs of its runs."""
    return model_files(config["models"][wildcards.model])


def get_judge_model_files(wildcards):
    """The judges' files (script, chat template) are inputs of judging."""
    return [f for s in get_judge_model_specs().values() for f in model_files(s)]


def get_values_corpus_file(wildcards):
    """A local corpus is an input (editing it re-tags); a URL is fetched by the job."""
    corpus = config["values"]["corpus"]
    return [] if corpus.startswith(("http://", "https://")) else [corpus]


# ---- what a model job holds (profiles/default, profiles/api, profiles/slurm) ----------
# A local model is a llama.cpp server on this machine's cores: its jobs hold a
# local_model_slot (bounded by cores) and the timing_lock (its CT must not share the CPUs).
# Any other model (a remote endpoint, the scripted test model) costs this machine only the
# harness: its jobs hold a remote_model_slot (bounded by what the endpoints allow) and no
# timing_lock, so judging and tagging overlap execution.
def is_local_model(model_id):
    return config["models"][model_id]["provider"] == "local"


def stack_model_is_local(wildcards):
    return is_local_model(wildcards.model)


def judges_are_local():
    return any(is_local_model(m) for m in get_judge_panel())


def get_execute_priority():
    """20 when a stack's runs hold the whole machine (a local agent model: timing_lock), else 0.

    A stack's judging and tagging (priority 10) start as soon as its runs exist, so with
    remote models they overlap the next stacks' runs. Beside a local model's runs nothing
    may run, and a lone judging job between two stacks left one of two cores idle (each
    local judge and tag job takes one): 15% of the default run's core time. With the runs
    first, the scheduler starts the next stack's runs instead, and two stacks' judging jobs
    then run side by side (4% idle; bench/default_run_time.py)."""
    return 20 if any(is_local_model(m) for m in config["agent_models"]) else 0


def get_execute_threads(wildcards):
    """A local server computes with the job's threads (the machine is the job's, timing_lock);
    a remote model's job needs one core for its harness."""
    return 2 if stack_model_is_local(wildcards) else 1


def held_by_model_job(kind, local, timing_lock):
    """What a model job holds of resource `kind` (see above): a local model's job a local
    slot and `timing_lock` units of timing_lock, any other model's job a remote slot."""
    return {
        "local_model_slots": 1 if local else 0,
        "remote_model_slots": 0 if local else 1,
        "timing_lock": timing_lock if local else 0,
    }[kind]


def get_execute_resources(kind):
    """execute_stack's `kind` resource: the stack's model decides; a local model's job
    holds all of timing_lock."""
    return lambda wildcards: held_by_model_job(
        kind, stack_model_is_local(wildcards), timing_lock=2
    )


def get_judge_resource(kind):
    """judge_runs' `kind` resource: local judges (opened one at a time) hold a local slot and
    half of timing_lock, so never beside an execute_stack job of a local model."""
    return held_by_model_job(kind, judges_are_local(), timing_lock=1)


# ---- report-time labels (workflow/report/workflow.rst prints them on the front page) -------
# A report() item's labels= function is called when `snakemake --report` builds the report,
# after the results exist; Snakemake fills wildcards into label text, so braces are dropped.
JUDGE_GATE_LABEL = "judge gate"
IDENTICAL_OUTPUTS_LABEL = "identical outputs"


def _label_text(text):
    return text.replace("{", "(").replace("}", ")")


def get_judge_gate_labels(wildcards):
    """{"judge gate": the gate's verdict} (mastif.analysis.inference.gate_verdict of
    results/stats/judge_validity.parquet; "no judge-validity result" without it): the label of
    every figure and table built on judge scores (the front page prints it after the joint
    tests)."""
    import polars as pl

    from mastif.analysis.inference import gate_verdict

    path = Path(results.stats("judge_validity"))
    validity = pl.read_parquet(path) if path.is_file() else pl.DataFrame()
    return {JUDGE_GATE_LABEL: _label_text(gate_verdict(validity).text)}


def with_judge_gate(labels, judge_based=None, extra=None):
    """A labels= function for a report item built on judge scores: ``labels`` (Snakemake
    fills their "{wildcard}" patterns) plus {"judge gate": verdict}
    (:func:`get_judge_gate_labels`); with ``judge_based`` (wildcards -> bool) only where it
    holds, e.g. the violins of TCR, TU and TA but not of CT; plus ``extra(wildcards)``'s.
    """

    def labels_with_gate(wildcards):
        out = dict(labels)
        if judge_based is None or judge_based(wildcards):
            out.update(get_judge_gate_labels(wildcards))
        if extra is not None:
            out.update(extra(wildcards))
        return out

    return labels_with_gate


DUNN_LABEL = "Dunn brackets"


def get_dunn_labels(wildcards):
    """{"Dunn brackets": whether the violins may draw them}: "drawn where significant" from
    stats.min_n independent tasks (counted in results/metrics/runs.parquet) on, else why
    none is; workflow/report/violin.rst prints the star legend only in the first case.
    """
    import polars as pl

    from mastif.analysis.inference import independent_tasks

    path = Path(results.metrics("runs"))
    runs = (
        pl.read_parquet(path, columns=["task_id"]) if path.is_file() else pl.DataFrame()
    )
    n_tasks, min_n = independent_tasks(runs), config["stats"]["min_n"]
    if n_tasks >= min_n:
        return {DUNN_LABEL: "drawn where significant"}
    return {DUNN_LABEL: f"none: {n_tasks} tasks < stats.min_n {min_n}"}


#: the judge's scores: a figure or table of one of them carries the judge gate's label
JUDGE_METRICS = metric_registry.JUDGE_SCORES


def get_identical_answers_labels(wildcards):
    """{"identical outputs": which stacks gave byte-identical final answers on every task}
    (mastif.evaluation.answers.identical_answers_note of results/metrics/identical_answers.csv).
    """
    import polars as pl

    from mastif.evaluation.answers import ANSWER_GROUPS_SCHEMA, identical_answers_note

    path = Path(results.metrics("identical_answers", "csv"))
    if path.is_file():
        groups = pl.read_csv(path, schema=ANSWER_GROUPS_SCHEMA)
        note = identical_answers_note(groups, len(STACKS))
    else:
        note = f"unknown: {path} not built"
    return {
        "table": "identical final answers",
        IDENTICAL_OUTPUTS_LABEL: _label_text(note),
    }

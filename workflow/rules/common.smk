from pathlib import Path

from snakemake.utils import validate

from mastif.config import ConfigError, parse_config

# Rules and defaults live in the schema; a typo'd key or a wrong type stops here,
# before any job (and so any model) starts.
validate(config, schema="../../config/schema/config.schema.yaml")
try:
    EXPERIMENT = parse_config(config, base_dir=Path.cwd())
except ConfigError as exc:
    raise ValueError(str(exc)) from None

STACKS = EXPERIMENT.stacks()


wildcard_constraints:
    model="|".join(sorted({s.model for s in STACKS})),
    protocol="|".join(sorted({s.protocol for s in STACKS})),
    framework="|".join(sorted({s.framework for s in STACKS})),


def get_run_outputs():
    return [f"results/runs/{s.path}.parquet" for s in STACKS]


def get_final_outputs():
    return [
        "results/tasks.parquet",
        "results/tasks_allocation.parquet",
    ] + get_run_outputs()


def get_task_source_files(wildcards):
    """The task file is an input, so editing it resamples."""
    tasks = config["tasks"]
    if tasks["source"] == "jsonl":
        return [tasks["path"]]
    return ["resources/tasks/builtin.jsonl"]


def get_prompt_files(wildcards):
    """Prompts are inputs: editing one reruns execution and what follows."""
    return [node["prompt"] for node in config["workflow"]["nodes"]]


def get_model_spec(wildcards):
    return config["models"][wildcards.model]

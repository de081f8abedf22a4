"""Reading an experiment config: the schema (filling its defaults), finite numbers, and the
cross-references that need more than the types of :mod:`mastif.core.config` — installed
framework plugins, prompt placeholders, the rubric, local model files, a scripted model's
script. The types live in :mod:`mastif.core.config`; this module sits above the frameworks
and providers it checks against, so core imports none of them.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from mastif.core.config import (
    PATH_SOURCES,
    PROMPT_FIELDS,
    PROVIDER_PRESETS,
    REPO_ROOT,
    SCHEMA_PATH,
    ConfigError,
    ExperimentConfig,
    ModelSpec,
    apply_preset,
    is_loopback_url,
    merge_configs,
    prompt_placeholders,
    read_yaml_mapping,
    resolve_path,
)


def load_schema() -> dict[str, Any]:
    with SCHEMA_PATH.open() as fh:
        return yaml.safe_load(fh)


def _extend_with_default(validator_class: type) -> type:
    """A validator that fills schema defaults while validating (as snakemake's validate does)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # type: ignore[no-untyped-def]
        if isinstance(instance, dict):
            for prop, subschema in properties.items():
                if "default" in subschema and prop not in instance:
                    instance[prop] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


_DefaultFillingValidator = _extend_with_default(jsonschema.Draft202012Validator)


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "<top level>"


#: largest magnitude of an integer in a config (int64: the Parquet columns and seeds)
MAX_CONFIG_INT = 2**63 - 1


def _check_numbers(value: Any, key: str = "") -> None:
    """Every number in the config is finite (YAML's ``.nan``/``.inf`` pass JSON Schema's
    ``minimum``/``maximum``, since NaN compares false) and every integer fits int64."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_numbers(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_numbers(v, f"{key}.{i}" if key else str(i))
    elif isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"invalid config:\n  {key}: {value} is not a finite number")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_CONFIG_INT:
        raise ConfigError(f"invalid config:\n  {key}: {value} is out of range (beyond int64)")


def plaintext_key_warnings(data: Mapping[str, Any]) -> list[str]:
    """One sentence per model whose API key would travel unencrypted: an ``api_key_env`` with
    a plain ``http://`` ``base_url`` on a host other than this machine. A warning, not an
    error: a key-checking server on a trusted LAN is legitimate, but anyone on the path can
    read the key, so ``mastif validate`` says so."""
    warnings = []
    for mid, spec in (data.get("models") or {}).items():
        url = spec.get("base_url") or ""
        if spec.get("api_key_env") and url.lower().startswith("http://"):
            if not is_loopback_url(url):
                warnings.append(
                    f"models.{mid}: the API key in ${spec['api_key_env']} is sent unencrypted "
                    f"to {url} (plain http:// to a host other than this machine); use https://"
                )
    return warnings


def validate_config(raw: Mapping[str, Any], base_dir: Path | None = None) -> dict[str, Any]:
    """Validate a raw config dict, fill defaults, check cross-references; return the new dict.

    Raises :class:`ConfigError` naming the key at fault. Nothing here loads a model.
    """
    data = copy.deepcopy(dict(raw))
    _check_numbers(data)
    validator = _DefaultFillingValidator(load_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{_key_path(e)}: {e.message}" for e in errors]
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines))
    _check_references(data, base_dir or REPO_ROOT)
    return data


def _check_references(data: dict[str, Any], base_dir: Path) -> None:
    """What the schema cannot check: names that must exist, files that must be there, and
    the rules between sections; the first problem raises ConfigError."""
    from mastif.frameworks import FrameworkNotFound, check_frameworks

    try:
        check_frameworks(data["frameworks"])
    except FrameworkNotFound as exc:
        raise ConfigError(f"frameworks: {exc}") from None
    _check_model_ids(data, base_dir)
    _check_files(data, base_dir)
    for mid, spec in data["models"].items():
        apply_preset(mid, spec)
        if spec["provider"] == "openai_compatible" and not spec.get("base_url"):
            raise ConfigError(
                f"models.{mid}.base_url: required for provider openai_compatible "
                f"(or set a preset: {sorted(PROVIDER_PRESETS)})"
            )
        if spec["provider"] == "scripted":
            _check_script(mid, spec, base_dir)
        _check_local_server(mid, spec, base_dir)
    _check_task_source(data["tasks"], base_dir)
    _check_workflow_nodes(data, base_dir)


def _check_model_ids(data: dict[str, Any], base_dir: Path) -> None:
    """The agent models and the judges are configured models, the judge is in its panel,
    a dollar budget has every charged model's price; and the log to import exists."""
    models = data["models"]
    for i, mid in enumerate(data["agent_models"]):
        if mid not in models:
            raise ConfigError(
                f"agent_models.{i}: unknown model id {mid!r}; known: {sorted(models)}"
            )
    mastif_log = data["import"]["mastif_log"]
    if mastif_log is not None and not resolve_path(mastif_log, base_dir).is_file():
        raise ConfigError(
            f"import.mastif_log: file not found: {resolve_path(mastif_log, base_dir)}"
        )
    judge_model = data["judge"]["model"]
    if judge_model not in models:
        raise ConfigError(f"judge.model: unknown model id {judge_model!r}; known: {sorted(models)}")
    panel = data["judge"].get("models")
    if panel is not None:
        for i, mid in enumerate(panel):
            if mid not in models:
                raise ConfigError(
                    f"judge.models.{i}: unknown model id {mid!r}; known: {sorted(models)}"
                )
        if judge_model not in panel:
            raise ConfigError(
                f"judge.model {judge_model!r} is not one of judge.models {list(panel)}: the "
                "panel must include the judge whose replies the judged table records"
            )
    budget_usd = data["execution"]["budget"]["usd"]
    if budget_usd is not None:
        # the judges' calls count too; an import calls no agent model
        agents = [] if data["import"]["mastif_log"] else list(data["agent_models"])
        charged = list(dict.fromkeys([*agents, *(panel or [judge_model])]))
        unpriced = [m for m in charged if models[m].get("price") is None]
        if unpriced:
            raise ConfigError(
                f"execution.budget.usd = {budget_usd} needs a price for every agent model "
                f"and judge; models.{unpriced[0]}.price is null (a free model: "
                "input_per_mtok: 0, output_per_mtok: 0)"
            )


def _check_files(data: dict[str, Any], base_dir: Path) -> None:
    """The judge's rubric and a local value corpus exist (the rubric also readable)."""
    rubric = resolve_path(data["judge"]["rubric"], base_dir)
    if not rubric.is_file():
        raise ConfigError(f"judge.rubric: file not found: {rubric}")
    _check_rubric(rubric)
    corpus = data["values"]["corpus"]
    if (
        not corpus.startswith(("http://", "https://"))
        and not resolve_path(corpus, base_dir).is_file()
    ):
        raise ConfigError(f"values.corpus: file not found: {resolve_path(corpus, base_dir)}")


def _check_task_source(tasks: dict[str, Any], base_dir: Path) -> None:
    """``tasks.path`` exactly for the sources read from a file, and there; ``columns`` for
    ``file`` only."""
    if tasks["source"] in PATH_SOURCES and not tasks["path"]:
        raise ConfigError(f"tasks.path: required when tasks.source is {tasks['source']}")
    if tasks["source"] not in PATH_SOURCES and tasks["path"]:
        raise ConfigError(
            f"tasks.path: only for tasks.source {', '.join(PATH_SOURCES)}, not {tasks['source']}"
        )
    if tasks["source"] in PATH_SOURCES and not resolve_path(tasks["path"], base_dir).is_file():
        raise ConfigError(f"tasks.path: file not found: {resolve_path(tasks['path'], base_dir)}")
    if tasks["columns"] and tasks["source"] != "file":
        raise ConfigError("tasks.columns: only for tasks.source file")


def _check_workflow_nodes(data: dict[str, Any], base_dir: Path) -> None:
    """The workflow's shape and nodes: unique names, valid ``stop_when`` regexes, prompt
    files that exist and use known placeholders only."""
    workflow = data["workflow"]
    if workflow["shape"] == "hierarchical":
        nodes = workflow["nodes"]
        if len(nodes) != 3 or any(n["loop"] for n in nodes):
            raise ConfigError(
                "workflow.nodes: the hierarchical shape needs exactly three nodes without loop "
                f"(decomposer, worker, synthesiser); got {[n['name'] for n in nodes]}"
            )
    seen_names: set[str] = set()
    for i, node in enumerate(data["workflow"]["nodes"]):
        key = f"workflow.nodes.{i}"
        if node["name"] in seen_names:
            raise ConfigError(f"{key}.name: duplicate node name {node['name']!r}")
        if node["name"] == "orchestrator" and "a2a" in data["protocols"]:
            raise ConfigError(
                f"{key}.name: 'orchestrator' is the A2A orchestrator agent's name; "
                "choose another node name"
            )
        seen_names.add(node["name"])
        if node["stop_when"] is not None:
            try:
                re.compile(node["stop_when"])
            except re.error as exc:
                raise ConfigError(f"{key}.stop_when: not a valid regex: {exc}") from exc
        prompt_path = resolve_path(node["prompt"], base_dir)
        if not prompt_path.is_file():
            raise ConfigError(f"{key}.prompt: file not found: {prompt_path}")
        unknown = prompt_placeholders(prompt_path.read_text()) - PROMPT_FIELDS
        if unknown:
            raise ConfigError(
                f"{key}.prompt: unknown placeholder(s) {sorted(unknown)} in {prompt_path}; "
                f"allowed: {sorted(PROMPT_FIELDS)}"
            )


def _check_rubric(path: Path) -> None:
    """The judge's rubric is UTF-8 text with something in it: an empty rubric would have the
    judge score against nothing, and a binary file would fail only when the judge runs."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"judge.rubric: {path} is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    except OSError as exc:
        raise ConfigError(f"judge.rubric: cannot read {path}: {exc}") from None
    if not text.strip():
        raise ConfigError(f"judge.rubric: {path} is empty")


def _check_local_server(model_id: str, spec: dict[str, Any], base_dir: Path) -> None:
    """A local server's template files exist (both builds read them at start)."""
    opts = spec.get("options") or {}
    key = f"models.{model_id}.options"
    if spec.get("provider") != "local":
        return
    for option in ("chat_template", "tool_call_template"):
        template = opts.get(option)
        if template is not None and not resolve_path(template, base_dir).is_file():
            raise ConfigError(f"{key}.{option}: file not found: {resolve_path(template, base_dir)}")


def _check_script(model_id: str, spec: dict[str, Any], base_dir: Path) -> None:
    """A scripted model's ``model`` is its script file: it must exist and parse."""
    from mastif.providers.scripted import ScriptError, load_script

    for key in ("base_url", "api_key_env"):
        if spec.get(key):
            raise ConfigError(f"models.{model_id}.{key}: not for provider scripted")
    path = resolve_path(spec["model"], base_dir)
    if not path.is_file():
        raise ConfigError(f"models.{model_id}.model: script file not found: {path}")
    try:
        load_script(path)
    except ScriptError as exc:
        raise ConfigError(f"models.{model_id}.model: {exc}") from exc


def parse_config(raw: Mapping[str, Any], base_dir: Path | None = None) -> ExperimentConfig:
    """Validate (filling defaults) and return the typed config."""
    return ExperimentConfig.model_validate(validate_config(raw, base_dir))


def model_spec(model_id: str, raw: Mapping[str, Any], base_dir: Path | None = None) -> ModelSpec:
    """One ``models.<id>`` entry, validated as :func:`validate_config` does (schema defaults,
    preset, a scripted model's script): for a job that is given only its model's entry."""
    schema = load_schema()
    entry_schema = {**schema["properties"]["models"]["additionalProperties"]}
    data = copy.deepcopy(dict(raw))
    errors = list(_DefaultFillingValidator(entry_schema).iter_errors(data))
    if errors:
        lines = [f"models.{model_id}.{_key_path(e)}: {e.message}" for e in errors]
        raise ConfigError("invalid model:\n  " + "\n  ".join(lines))
    apply_preset(model_id, data)
    if data["provider"] == "scripted":
        _check_script(model_id, data, base_dir or REPO_ROOT)
    _check_local_server(model_id, data, base_dir or REPO_ROOT)
    return ModelSpec.model_validate(data)


def stack_job_config(
    *,
    experiment: str,
    model_id: str,
    model: Mapping[str, Any],
    protocol: str,
    prompt_format: bool,
    generation: Mapping[str, Any],
    tools: list[str],
    web: str,
    web_options: Mapping[str, Any],
    workflow: Mapping[str, Any],
    repeats: int,
    sampling_seed: int,
    execution: Mapping[str, Any],
    base_dir: Path | None = None,
    threads: int | None = None,
) -> ExperimentConfig:
    """The config a stack job (rule ``execute_stack``) runs with, built from its rule's
    params only, so every key the job reads is one Snakemake tracks.

    ``threads``: the CPUs the job holds (its rule's ``threads``); a local model's server
    computes with that many unless the model's ``options.n_threads`` says otherwise.

    The stack's model is the only model (and stands in as the judge, which the job never
    calls); keys the job does not read take their schema defaults. ``execution``: the
    execution keys the job reads (concurrency, provider_retries, response_cache, progress).
    """
    model = dict(model)
    if threads and model.get("provider") == "local":
        options = dict(model.get("options") or {})
        options.setdefault("n_threads", threads)
        model["options"] = options
    raw = {
        "experiment": experiment,
        "models": {model_id: model},
        "agent_models": [model_id],
        "judge": {"model": model_id},
        "protocols": [protocol],
        "protocol_options": {protocol: {"prompt_format": prompt_format}},
        "tasks": {"seed": sampling_seed},
        "generation": dict(generation),
        "tools": list(tools),
        "web": web,
        "web_options": dict(web_options),
        "workflow": copy.deepcopy(dict(workflow)),
        "repeats": repeats,
        "execution": dict(execution),
    }
    return parse_config(raw, base_dir)


def load_config(
    path: str | Path, base_dir: Path | None = None, base: str | Path | None = None
) -> ExperimentConfig:
    """Load ``path``; with ``base``, ``path`` overrides it as Snakemake's ``--configfile`` does."""
    raw = read_yaml_mapping(path)
    if base is not None and Path(base).resolve() != Path(path).resolve():
        raw = merge_configs(read_yaml_mapping(base), raw)
    return parse_config(raw, base_dir)

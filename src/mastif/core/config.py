"""The typed experiment config and the identity of a stack.

``config/schema/config.schema.yaml`` is the single source of rules and defaults: it is what
the Snakefile validates with ``snakemake.utils.validate`` and what :func:`load_config`
validates here (with defaults filled in the same way). The pydantic models below are only a
typed view of an already-valid dict, so they carry no defaults of their own.
"""

from __future__ import annotations

import copy
import ipaddress
import os
import string
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from mastif.core.paths import data_root, schema_path

#: where the default config's relative paths (config/prompts/..., resources/...) resolve:
#: the repository in a checkout, the package's own copy in an installed wheel
REPO_ROOT = data_root()
SCHEMA_PATH = schema_path()

#: Placeholders a node prompt may use; anything else is a config error.
PROMPT_FIELDS = frozenset(
    {
        "task",
        "website",
        "domain",
        "subdomain",
        "step",
        "max_steps",
        "history",
        "tools",
        "subtask",
        "max_subtasks",
        "start_url",
        "page",
    }
)


#: openai_compatible presets: what ``preset`` fills in when the config leaves it out
PROVIDER_PRESETS: dict[str, dict[str, str | None]] = {
    "openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"},
    # Hugging Face's OpenAI-compatible router to its inference providers
    "hf_router": {"base_url": "https://router.huggingface.co/v1", "api_key_env": "HF_TOKEN"},
    # Anthropic's OpenAI SDK compatibility endpoint
    "anthropic": {"base_url": "https://api.anthropic.com/v1", "api_key_env": "ANTHROPIC_API_KEY"},
    "ollama": {"base_url": "http://127.0.0.1:11434/v1", "api_key_env": None},
    "vllm": {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": None},
}


#: task sources read from a local file (``tasks.path``)
PATH_SOURCES = ("jsonl", "file", "online_mind2web")


class ConfigError(ValueError):
    """The experiment config is invalid; the message names the offending key."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelOptions(_Frozen):
    server: Literal["xllamacpp", "llama-server"]
    chat_template: str | None = None
    tool_call_template: str | None = None
    n_ctx: int
    n_threads: int | None = None
    parallel: int
    prompt_cache_mib: int
    max_connections: int
    request_timeout_s: float
    startup_timeout_s: float


class ModelPrice(_Frozen):
    input_per_mtok: float
    output_per_mtok: float


class ModelSpec(_Frozen):
    provider: Literal["local", "openai_compatible", "scripted"]
    model: str
    preset: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    price: ModelPrice | None = None
    options: ModelOptions


class JudgeSpec(_Frozen):
    model: str
    rubric: str
    temperature: float
    max_tokens: int
    attempts: int
    seed: int
    reference_guided: bool
    node_chars: int
    tool_chars: int
    answer_chars: int
    min_kappa: float
    #: the judge gate's floors: checked tasks, and runs in each class of the check
    gate_min_tasks: int
    gate_min_per_class: int
    #: the judge panel (None: judge.model alone)
    models: tuple[str, ...] | None
    #: how many times each judge scores each run
    repeats: int

    @property
    def panel(self) -> tuple[str, ...]:
        """The judges, in the config's order (``judge.models``, or ``judge.model`` alone)."""
        return self.models or (self.model,)


class ValuesSpec(_Frozen):
    corpus: str
    threshold: float | None
    sensitivity_thresholds: tuple[float, ...]
    backend: Literal["onnx", "torch"] = "onnx"


class StatsSpec(_Frozen):
    alpha: float
    p_adjust: str
    family_adjust: str
    min_n: int
    bootstrap_resamples: int
    confidence: float
    seed: int


class HubSpec(_Frozen):
    repo_id: str
    revision: str
    endpoint: str | None
    archive_password_env: str


class TaskSpec(_Frozen):
    source: Literal["builtin", "sandbox", "jsonl", "file", "online_mind2web", "mind2web"]
    path: str | None
    format: Literal["json", "jsonl", "csv", "parquet"] | None
    columns: dict[str, str]
    splits: tuple[str, ...]
    hub: HubSpec
    sample_size: int
    strata: tuple[str, ...]
    min_per_stratum: int | None
    seed: int


#: seconds a framework's model client waits beyond ``generation.request_timeout_s``, so the
#: gateway's own 504 (a recorded call) reaches it before its client gives up
CLIENT_TIMEOUT_MARGIN_S = 5.0


class GenerationSpec(_Frozen):
    temperature: float
    max_tokens: int
    max_steps: int
    max_tool_rounds: int
    timeout_s: float  # the run's budget
    request_timeout_s: float  # one model call, as a framework makes it (the gateway bounds it)
    seed: int

    @property
    def client_timeout_s(self) -> float:
        """The frameworks' model clients' timeout: the gateway answers first."""
        return self.request_timeout_s + CLIENT_TIMEOUT_MARGIN_S


class NodeSpec(_Frozen):
    name: str
    prompt: str
    output_key: str
    loop: bool
    use_tools: bool
    tool_choice: Literal["auto", "required"]
    stop_when: str | None


class WorkflowSpec(_Frozen):
    shape: Literal["linear", "hierarchical"]
    max_subtasks: int
    nodes: tuple[NodeSpec, ...]


class ProtocolOptions(_Frozen):
    prompt_format: bool


class WebOptions(_Frozen):
    allow_private: bool
    allowed_hosts: tuple[str, ...]
    browser_executable: str
    action_timeout_s: float
    http_timeout_s: float
    page_chars: int
    search_backend: str


class BudgetSpec(_Frozen):
    """``execution.budget``: caps of the whole experiment's agent runs (None: no cap)."""

    usd: float | None
    tokens: int | None


class ExecutionSpec(_Frozen):
    concurrency: int | None
    provider_retries: int
    shards: int
    job_retries: int
    response_cache: str | None
    progress: bool
    budget: BudgetSpec


class ImportSpec(_Frozen):
    #: a results log of the original MASTIF to evaluate instead of running stacks
    mastif_log: str | None


class ExperimentConfig(_Frozen):
    experiment: str
    models: dict[str, ModelSpec]
    agent_models: tuple[str, ...]
    judge: JudgeSpec
    protocols: tuple[str, ...]
    protocol_options: dict[str, ProtocolOptions]
    frameworks: tuple[str, ...]
    tasks: TaskSpec
    generation: GenerationSpec
    tools: tuple[str, ...]
    web: Literal["sandbox", "live"]
    web_options: WebOptions
    workflow: WorkflowSpec
    values: ValuesSpec
    stats: StatsSpec
    repeats: int
    execution: ExecutionSpec
    import_: ImportSpec = Field(alias="import")  # `import` is a Python keyword

    @property
    def importing(self) -> bool:
        """Import mode: the runs come from ``import.mastif_log``, no stack is executed."""
        return self.import_.mastif_log is not None

    def prompt_format_for(self, protocol: str) -> str | None:
        """The protocol whose message format wraps prompts in this stack, if the flag is on."""
        opts = self.protocol_options.get(protocol)
        return protocol if opts is not None and opts.prompt_format else None

    def concurrency_for(self, model_id: str) -> int:
        """Runs in flight at once in a job of ``model_id``'s stacks."""
        return self.execution.concurrency or self.models[model_id].options.max_connections

    def models_in_use(self) -> list[str]:
        """The agent models and the judge, in order, once each; in import mode only the
        judge (no agent model is called)."""
        if self.importing:
            return list(self.judge.panel)
        return list(dict.fromkeys([*self.agent_models, *self.judge.panel]))

    def required_envvars(self) -> list[str]:
        """Environment variables (API keys) the models in use read; names only."""
        names = (self.models[m].api_key_env for m in self.models_in_use())
        return sorted({n for n in names if n})

    def stacks(self) -> list[Stack]:
        """The full factorial grid, in a stable order."""
        return [
            Stack(m, p, f)
            for m in self.agent_models
            for p in self.protocols
            for f in self.frameworks
        ]


@dataclass(frozen=True, order=True)
class Stack:
    """A technology stack TS = (LLM, AP, IF) (paper Section 3)."""

    model: str
    protocol: str
    framework: str

    @property
    def path(self) -> str:
        return f"{self.model}/{self.protocol}/{self.framework}"


def is_loopback_url(url: str) -> bool:
    """Whether ``url``'s host is this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = (urllib.parse.urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def apply_preset(model_id: str, spec: dict[str, Any]) -> None:
    """Fill ``base_url``/``api_key_env`` of an ``openai_compatible`` model from its preset,
    where the config does not give them."""
    preset = spec.get("preset")
    if preset is None:
        return
    if spec["provider"] != "openai_compatible":
        raise ConfigError(
            f"models.{model_id}.preset: only for provider openai_compatible, not {spec['provider']}"
        )
    for key, value in PROVIDER_PRESETS[preset].items():
        if value is not None:
            spec.setdefault(key, value)


def missing_envvars(config: ExperimentConfig) -> list[str]:
    """The API-key variables the config needs that are unset or empty here."""
    return [name for name in config.required_envvars() if not os.environ.get(name)]


def prompt_placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


def resolve_path(path: str, base_dir: Path | None = None) -> Path:
    """``path`` relative to ``base_dir`` (default: mastif's data root). A relative path that
    is not under ``base_dir`` but is one of mastif's own files (``config/prompts/...``,
    ``config/rubric.md``, ``resources/...``) resolves to that file, so the default
    experiment's paths work from any directory once mastif is installed."""
    p = Path(path)
    if p.is_absolute():
        return p
    candidate = (base_dir or REPO_ROOT) / p
    if not candidate.exists() and (REPO_ROOT / p).exists():
        return REPO_ROOT / p
    return candidate


def merge_configs(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Nested mappings merge key by key, anything else is replaced (as ``--configfile`` does)."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_configs(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error on one line: its problem and where (line:column, 1-based)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else problem


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as fh:
            raw = yaml.safe_load(fh) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return raw

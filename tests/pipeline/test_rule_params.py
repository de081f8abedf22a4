"""No stale outputs: every config key that changes what a rule writes is an input or param of
that rule (issue 16, item 7).

:data:`READS` says, for every key of ``config/schema/config.schema.yaml``, which rules' outputs
depend on it. A key may be declared with its whole subtree (``generation``) where the rules
pass that subtree whole, so a new key under it reaches them by construction; elsewhere each
leaf is declared on its own, and a schema key that no entry covers fails
:func:`test_every_schema_key_is_declared`, so a new key forces a decision.

:func:`test_changing_a_key_changes_exactly_the_declared_rules` checks the map against the
workflow itself: for every leaf it loads the Snakefile (Snakemake's API, in-process, no DAG,
~0.2 s) with that key changed, evaluates every rule's inputs and params for every stack, and
requires that exactly the declared rules see a difference. A key a rule reads through
``snakemake.config`` instead of its params would be missed, so the scripts may not read it
(:func:`test_scripts_read_no_config_beyond_their_params`).
"""

from __future__ import annotations

import copy
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from mastif.core.config import merge_configs
from mastif.execution.experiment import load_schema, validate_config
from tests.support.paths import REPO

EXEC, JUDGE, GATHER = "execute_stack", "judge_runs", "gather_runs"
#: the rules whose inputs list every stack's files (the grid's shape)
PER_GRID = {
    "aggregate_metrics", "write_tables", "plot_top_values", "judge_agreement", "build_viewer",
}  # fmt: skip

#: schema key (``*``: any model id; ``[]``: any item of a list) -> rules whose output depends
#: on it through their inputs or params. The most specific declared prefix of a key applies.
READS: dict[str, set[str]] = {
    # recorded in every run row; the trace viewer's title
    "experiment": {EXEC, "build_viewer"},
    # a stack's model: execute_stack's model_spec (all but the price), the judge's spec
    "models.*": {EXEC, JUDGE},
    "models.*.price": {"aggregate_metrics"},
    # the grid: which stacks' files the per-grid rules read (per-stack rules: wildcards)
    "agent_models": PER_GRID,
    "protocols": PER_GRID,
    "frameworks": PER_GRID,
    # judge_agreement: the panel, judge.model alone unless judge.models is set
    "judge.model": {JUDGE, "judge_agreement"},
    "judge.models": {JUDGE, "judge_agreement"},
    "judge.repeats": {JUDGE, "judge_agreement"},
    "judge.rubric": {JUDGE},
    "judge.temperature": {JUDGE},
    "judge.max_tokens": {JUDGE},
    "judge.attempts": {JUDGE},
    "judge.seed": {JUDGE},
    "judge.reference_guided": {JUDGE},
    "judge.node_chars": {JUDGE},
    "judge.tool_chars": {JUDGE},
    "judge.answer_chars": {JUDGE},
    # the judge gate: judge_validity.parquet records its verdict (and the thresholds), which
    # every judge-based table and figure reads as an input
    "judge.min_kappa": {"bootstrap_effects"},
    "judge.gate_min_tasks": {"bootstrap_effects"},
    "judge.gate_min_per_class": {"bootstrap_effects"},
    "protocol_options": {EXEC},  # prompt_format
    "tasks.source": {"sample_tasks"},
    "tasks.path": {"sample_tasks"},
    "tasks.format": {"sample_tasks"},
    "tasks.columns": {"sample_tasks"},  # passed whole
    "tasks.splits": {"sample_tasks"},
    "tasks.hub": {"sample_tasks"},  # passed whole
    "tasks.sample_size": {"sample_tasks"},
    "tasks.strata": {"sample_tasks"},
    "tasks.min_per_stratum": {"sample_tasks"},
    "tasks.seed": {"sample_tasks", EXEC},  # execute_stack records it as sampling_seed
    "generation": {EXEC},  # passed whole
    "tools": {EXEC},
    "web": {EXEC},  # a param, and the sandbox files are inputs under web: sandbox
    "web_options": {EXEC},  # passed whole
    "workflow": {EXEC},  # passed whole; the prompt files are inputs
    "values.corpus": {"tag_values"},
    "values.threshold": {"tag_values"},
    "values.sensitivity_thresholds": {"tag_values"},
    "values.backend": {"tag_values"},
    "stats.alpha": {
        "test_factors",
        "blocked_tests",
        "write_tables",
        "plot_violins",
        # the front page and its figure mark an adjusted p (n.s.) (issue 51)
        "front_page",
        "plot_joint_effects",
    },
    "stats.p_adjust": {"test_factors"},
    "stats.family_adjust": {"test_factors", "blocked_tests", "joint_tests", "front_page"},
    # below min_n independent tasks no p-value, star or best level anywhere (issue 38)
    "stats.min_n": {
        "test_factors",
        "blocked_tests",
        "write_tables",
        "plot_violins",
        "mixed_models",
        # no Pareto share in effects.parquet, no Pareto star in the figure (issue 51)
        "bootstrap_effects",
        "plot_pareto",
        # the joint tests, their pairs and the front page that leads with them (issue 51)
        "joint_tests",
        "front_page",
    },
    "stats.bootstrap_resamples": {"bootstrap_effects", "judge_agreement"},
    "stats.confidence": {
        "bootstrap_effects",
        "plot_effects",
        "judge_agreement",
        "joint_tests",
    },
    "stats.seed": {"bootstrap_effects", "blocked_tests", "judge_agreement"},
    "repeats": {EXEC},
    # runs in flight at once: contention changes every run's time
    "execution.concurrency": {EXEC},
    "execution.provider_retries": {EXEC, JUDGE},
    # replayed answers change the runs' and judgements' latencies
    "execution.response_cache": {EXEC, JUDGE},
    # the shard files gather_runs reads (each shard's own output path names the split)
    "execution.shards": {GATHER},
    "execution.job_retries": set(),
    "execution.progress": set(),
    "execution.budget.usd": set(),
    "execution.budget.tokens": set(),
    "import.mastif_log": {"import_mastif_log"},
}

#: why a key changes no rule's output
NO_OUTPUT_EFFECT = {
    "execution.job_retries": "Snakemake's retries: of a failed model job; a retried stack job "
    "resumes from its checkpoint and writes the same runs",
    "execution.progress": "a progress bar on the stack job's stderr (read by execute_stack.py "
    "from the config, deliberately not a param: toggling it must rerun nothing)",
    **dict.fromkeys(
        ("execution.budget.usd", "execution.budget.tokens"),
        "whether a stack job starts its next run (read by execute_stack.py from the config, "
        "deliberately not a param: raising the budget to continue must not rerun the stacks "
        "that finished, whose checkpoints are gone)",
    ),
}

#: keys not changed one at a time here, and why
NOT_MUTATED = {
    "import.mastif_log": "switches the whole DAG to import mode (no sample_tasks or "
    "execute_stack); the log is import_mastif_log's input, the only rule that reads it",
}

#: snakemake.config reads the bridges may make: keys that change nothing the reading rule
#: writes (script ``x.py`` is rule ``x``)
ALLOWED_CONFIG_READS = {
    'snakemake.config["execution"]["progress"]': "execution.progress",
    'snakemake.config["execution"]["budget"]': "execution.budget.usd",
    # the dollars the budget counts a run at (the price prices runs only in the metrics)
    'snakemake.config["models"][w.model]["price"]': "models.*.price",
    # the dollars the budget counts a judgement at
    'snakemake.config["models"][m]["price"]': "models.*.price",
}


# ------------------------------------------------------------------ the schema's keys


def schema_leaves(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every key of the schema, as a dotted path, with its subschema: recursing into
    objects' properties, a map's values (``*``), a list's items (``[]``) and ``$ref``s."""
    defs = schema.get("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        return defs[ref.rsplit("/", 1)[-1]] if ref else node

    def walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
        node = resolve(node)
        if "properties" in node:
            for name, sub in node["properties"].items():
                yield from walk(sub, f"{path}.{name}" if path else name)
        elif isinstance(node.get("additionalProperties"), dict):
            yield from walk(node["additionalProperties"], f"{path}.*")
        elif node.get("type") == "array" and "properties" in resolve(node.get("items", {})):
            yield from walk(node["items"], f"{path}[]")
        else:
            yield path, node

    return list(walk(schema, ""))


def declared(path: str) -> str | None:
    """The most specific entry of :data:`READS` covering ``path``."""
    parts = re.split(r"\.|(?=\[\])", path)
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n]).replace(".[]", "[]")
        if prefix in READS:
            return prefix
    return None


def test_every_schema_key_is_declared():
    leaves = [p for p, _ in schema_leaves(load_schema())]
    assert len(leaves) > 60  # the walker reached the nested keys
    assert "workflow.nodes[].prompt" in leaves and "models.*.options.n_ctx" in leaves
    assert "protocol_options.mcp.prompt_format" in leaves
    undeclared = [p for p in leaves if declared(p) is None]
    assert not undeclared, (
        f"config keys {undeclared} are in the schema but not in READS: say which rules' "
        "outputs they change and make them inputs or params of those rules"
    )
    used = {declared(p) for p in leaves}
    assert set(READS) <= used, f"READS entries no schema key has: {set(READS) - used}"
    for key, rules in READS.items():
        assert rules or key in NO_OUTPUT_EFFECT, f"{key}: no rule reads it; say why"


def test_declared_prefix_is_the_most_specific():
    assert declared("models.*.price") == "models.*.price"
    assert declared("models.*.options.n_ctx") == "models.*"
    assert declared("workflow.nodes[].prompt") == "workflow"
    assert declared("judge.brand_new_key") is None  # judge's keys are declared one by one


# ------------------------------------------------------------- the workflow's params

#: the base of every load: a three-stack grid (one per protocol) with an agent model and a
#: judge on endpoints that are never called (nothing runs; only the rules are evaluated)
BASE_OVERRIDES: dict[str, Any] = {
    "models": {
        # priced, so a dollar budget (execution.budget.usd) is a valid change
        "agent": {"provider": "openai_compatible", "model": "a", "base_url": "http://127.0.0.1:9/v1",
                  "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}},
        "judge": {"provider": "openai_compatible", "model": "j", "base_url": "http://127.0.0.1:9/v1",
                  "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}},
    },
    "agent_models": ["agent"],
    "judge": {"model": "judge"},
    "protocols": ["standard", "mcp", "a2a"],
    "frameworks": ["langgraph"],
}  # fmt: skip
MODELS_IN_USE = ("agent", "judge")
#: the wildcards of every rule's jobs in the base grid
STACKS = [SimpleNamespace(model="agent", protocol=p, framework="langgraph") for p in
          ("standard", "mcp", "a2a")]  # fmt: skip


def generic_change(node: dict[str, Any], value: Any) -> Any:
    """Another value the schema accepts for a key whose value is ``value``."""
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else types
    if "enum" in node:
        return next(e for e in node["enum"] if e is not None and e != value)
    if "boolean" in types:
        return not value
    if "integer" in types:
        if value is None:
            return node.get("minimum", 0) + 1
        return value + 1 if value + 1 <= node.get("maximum", value + 1) else value - 1
    if "number" in types:
        if value is None:
            return 0.5
        up = value + 0.1
        fits = up <= node.get("maximum", up) and up < node.get("exclusiveMaximum", up + 1)
        return up if fits else value - 0.1
    if "string" in types:
        return "x" if value is None else value + "x"
    if "array" in types:
        items = node.get("items", {})
        new = next((e for e in items.get("enum", []) if e not in value), None)
        if new is None and "number" in items.get("type", ()):
            new = 0.5 if 0.5 not in value else 0.55
        if new is None:
            new = "example.org:1" if "pattern" in items else "x"
        return [*value, new]
    raise AssertionError(f"no generic change for {node}; add one to special_changes")


def special_changes(tmp: Path) -> dict[str, Callable[[dict[str, Any]], None]]:
    """Changes the generic rule cannot make valid (paths to files that exist, keys that
    other keys constrain): leaf -> an in-place edit of the full config."""
    rubric = shutil.copy(REPO / "config" / "rubric.md", tmp / "rubric.md")
    corpus = shutil.copy(REPO / "resources" / "values" / "corpus.json", tmp / "corpus.json")
    prompt = shutil.copy(REPO / "config" / "prompts" / "navigate.md", tmp / "navigate.md")
    task_file = str(REPO / "resources" / "tasks" / "builtin.jsonl")

    def tasks_file(column: str | None = None) -> Callable[[dict[str, Any]], None]:
        def change(c: dict[str, Any]) -> None:
            c["tasks"].update(source="file", path=task_file)
            if column:
                c["tasks"]["columns"] = {column: "x"}

        return change

    def hierarchical(c: dict[str, Any]) -> None:
        c["workflow"]["shape"] = "hierarchical"
        c["workflow"]["nodes"] = [{**n, "loop": False} for n in c["workflow"]["nodes"][:3]]

    changes: dict[str, Callable[[dict[str, Any]], None]] = {
        "models.*.api_key_env": lambda c: [
            c["models"][m].update(api_key_env="MASTIF_PARAM_TEST_KEY") for m in MODELS_IN_USE
        ],
        # a preset without an API key (the rules see the raw entry, the preset unapplied)
        "models.*.preset": lambda c: [
            c["models"][m].update(preset="ollama") for m in MODELS_IN_USE
        ],
        # another price changes both its keys
        **{
            f"models.*.price.{k}": lambda c: [
                c["models"][m].update(price={"input_per_mtok": 1, "output_per_mtok": 2})
                for m in MODELS_IN_USE
            ]
            for k in ("input_per_mtok", "output_per_mtok")
        },
        "agent_models": lambda c: c.update(agent_models=["agent", "judge"]),
        "protocols": lambda c: c.update(protocols=["standard", "mcp"]),
        # names must be registered frameworks (entry points), not any string
        "frameworks": lambda c: c.update(frameworks=[*c["frameworks"], "crewai"]),
        "judge.model": lambda c: c["judge"].update(model="agent"),
        "judge.models": lambda c: c["judge"].update(models=["judge", "agent"]),
        "judge.rubric": lambda c: c["judge"].update(rubric=str(rubric)),
        "tasks.path": tasks_file(),
        "values.corpus": lambda c: c["values"].update(corpus=str(corpus)),
        "workflow.shape": hierarchical,
        "workflow.nodes[].prompt": lambda c: c["workflow"]["nodes"][0].update(prompt=str(prompt)),
    }
    schema = load_schema()
    for column in schema["properties"]["tasks"]["properties"]["columns"]["properties"]:
        changes[f"tasks.columns.{column}"] = tasks_file(column)
    return changes


def get_path(cfg: dict[str, Any], path: str) -> list[tuple[dict[str, Any], str]]:
    """The (parent mapping, key) pairs ``path`` names in ``cfg`` (``*``: the models in use,
    ``[]``: the first item)."""
    parents: list[Any] = [cfg]
    parts = path.replace("[]", ".[]").split(".")
    for part in parts[:-1]:
        nxt: list[Any] = []
        for p in parents:
            if part == "*":
                nxt += [p[m] for m in MODELS_IN_USE]
            elif part == "[]":
                nxt.append(p[0])
            else:
                nxt.append(p.setdefault(part, {}))
        parents = nxt
    return [(p, parts[-1]) for p in parents]


def evaluate(value: Any, wildcards: SimpleNamespace) -> Any:
    if callable(value):
        value = value(wildcards)
    if isinstance(value, list | tuple):
        return [str(v) if isinstance(v, str) else v for v in value]
    return str(value) if isinstance(value, str) else value


def rule_signatures(cfg: dict[str, Any]) -> dict[str, Any]:
    """Rule name -> its inputs and params, evaluated for every job of the base grid."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        workflow_api = api.workflow(
            ResourceSettings(), ConfigSettings(config=cfg), snakefile=REPO / "Snakefile",
            workdir=REPO,
        )  # fmt: skip
        rules = list(workflow_api._workflow.rules)
        out = {}
        for rule in rules:
            if rule.name == "all":
                continue
            jobs = [SimpleNamespace(**vars(s), scatteritem="1-of-1", metric="TCR") for s in
                    STACKS] if rule.wildcard_names else [SimpleNamespace()]  # fmt: skip
            out[rule.name] = [
                (
                    [evaluate(v, w) for v in rule.input],
                    {k: evaluate(v, w) for k, v in rule.params.items()},
                )
                for w in jobs
            ]
    return out


@pytest.fixture(scope="module")
def base_full_config() -> dict[str, Any]:
    """The base config as the workflow sees it: config.yaml, the overrides, the defaults."""
    raw = merge_configs(yaml.safe_load((REPO / "config" / "config.yaml").read_text()),
                        BASE_OVERRIDES)  # fmt: skip
    return validate_config(raw, REPO)


def test_changing_a_key_changes_exactly_the_declared_rules(base_full_config, tmp_path, monkeypatch):
    monkeypatch.setenv("MASTIF_PARAM_TEST_KEY", "not-a-key")
    base = rule_signatures(base_full_config)
    assert {EXEC, JUDGE, "sample_tasks", "tag_values", "aggregate_metrics"} <= set(base)
    specials = special_changes(tmp_path)
    wrong = []
    for path, node in schema_leaves(load_schema()):
        entry = declared(path)
        if entry in NOT_MUTATED:
            continue
        cfg = copy.deepcopy(base_full_config)
        if path in specials:
            specials[path](cfg)
        else:
            for parent, key in get_path(cfg, path):
                parent[key] = generic_change(node, parent.get(key))
        try:
            changed = rule_signatures(cfg)
        except Exception as exc:  # noqa: BLE001 - name the key whose change broke loading
            wrong.append(f"{path}: the changed config does not load: {exc}")
            continue
        differ = {r for r in base if r in changed and changed[r] != base[r]}
        if differ != READS[entry]:
            wrong.append(f"{path}: changes {sorted(differ)}, READS[{entry!r}] says "
                         f"{sorted(READS[entry])}")  # fmt: skip
    assert not wrong, "\n".join(wrong)


def test_prompt_format_reruns_only_its_protocols_stacks(base_full_config):
    """The bug of issue 16: toggling mcp's prompt_format left mcp's runs up to date."""
    cfg = copy.deepcopy(base_full_config)
    cfg["protocol_options"] = {"mcp": {"prompt_format": True}}
    before, after = rule_signatures(base_full_config)[EXEC], rule_signatures(cfg)[EXEC]
    # the jobs in STACKS order: standard, mcp, a2a
    assert [b == a for b, a in zip(before, after, strict=True)] == [True, False, True]
    assert after[1][1]["prompt_format"] is True and before[1][1]["prompt_format"] is False


# -------------------------------------------------------------------- the bridges


def test_scripts_read_no_config_beyond_their_params():
    """A bridge that reads ``snakemake.config`` reads keys Snakemake does not track."""
    found = {}
    for script in sorted((REPO / "workflow" / "scripts").glob("*.py")):
        for read in re.findall(r"snakemake\.config(?:\[[^]]*\])*", script.read_text()):
            key = ALLOWED_CONFIG_READS.get(read)
            if key is None or script.stem in READS[key]:
                found.setdefault(script.name, []).append(read)
    assert not found, f"scripts read the config beyond their params: {found}"
    for read, key in ALLOWED_CONFIG_READS.items():
        assert key in READS, read

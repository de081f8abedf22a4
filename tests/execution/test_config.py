"""Config validation: a typo'd key or a wrong type is named before any model is loaded."""

from __future__ import annotations

import os

import pytest
import yaml

from mastif.core.config import ConfigError
from mastif.execution.experiment import load_config, parse_config
from mastif.frameworks import FRAMEWORKS, PAPER_FRAMEWORKS
from tests.support.paths import REPO
from tests.support.pipeline import snakemake


def test_default_config_is_valid_and_defaults_are_filled(base_config):
    cfg = parse_config(base_config)
    assert cfg.generation.temperature == 0.7
    assert cfg.generation.max_steps == 2  # the paper's 3 lives in config/experiments/paper.yaml
    assert cfg.generation.max_tool_rounds == 1
    assert [n.name for n in cfg.workflow.nodes] == ["navigate", "observe", "interact", "report"]
    assert cfg.stacks()[0].path == "smollm2/standard/langgraph"
    # the full grid: every protocol x every framework
    assert len(cfg.stacks()) == 3 * 4 and cfg.workflow.shape == "linear"
    assert {s.protocol for s in cfg.stacks()} == {"standard", "mcp", "a2a"}


def test_protocol_options_and_hierarchical_shape_are_checked(base_config):
    base_config["protocol_options"] = {"mcp": {"prompt_format": True}}
    cfg = parse_config(base_config)
    assert cfg.prompt_format_for("mcp") == "mcp" and cfg.prompt_format_for("a2a") is None
    base_config["protocol_options"] = {"mpc": {"prompt_format": True}}
    with pytest.raises(ConfigError, match="protocol_options"):
        parse_config(base_config)
    base_config["protocol_options"] = {}
    base_config["protocols"] = ["standard", "http"]
    with pytest.raises(ConfigError, match="protocols"):
        parse_config(base_config)
    base_config["protocols"] = ["a2a"]
    base_config["workflow"]["nodes"][0]["name"] = "orchestrator"  # the orchestrator agent's
    with pytest.raises(ConfigError, match="workflow.nodes.0.name: 'orchestrator'"):
        parse_config(base_config)
    base_config["workflow"]["nodes"][0]["name"] = "navigate"
    base_config["workflow"]["shape"] = "hierarchical"  # with the four linear nodes
    with pytest.raises(ConfigError, match="hierarchical shape needs exactly three nodes"):
        parse_config(base_config)
    hierarchical = load_config(REPO / "config/experiments/hierarchical.yaml",
                               base=REPO / "config/config.yaml")  # fmt: skip
    assert hierarchical.workflow.shape == "hierarchical" and len(hierarchical.stacks()) == 12
    six = load_config(
        REPO / "config/experiments/frameworks6.yaml", base=REPO / "config/config.yaml"
    )
    assert set(six.frameworks) == set(FRAMEWORKS[:6]) and len(six.stacks()) == 18
    ten = load_config(
        REPO / "config/experiments/frameworks10.yaml", base=REPO / "config/config.yaml"
    )
    assert set(ten.frameworks) == set(FRAMEWORKS[:10]) and len(ten.stacks()) == 30
    every = load_config(
        REPO / "config/experiments/frameworks_all.yaml", base=REPO / "config/config.yaml"
    )
    assert tuple(every.frameworks) == FRAMEWORKS and len(every.stacks()) == 57
    # the default grid stays the seed paper's four
    assert tuple(load_config(REPO / "config/config.yaml").frameworks) == PAPER_FRAMEWORKS


def test_defaults_filled_when_sections_missing(base_config):
    for key in ("generation", "tasks", "tools", "execution", "protocols", "frameworks"):
        base_config.pop(key)
    cfg = parse_config(base_config)
    assert cfg.generation.max_tokens == 1024
    assert cfg.generation.max_steps == 3 and cfg.generation.max_tool_rounds == 3  # the paper's
    assert cfg.generation.timeout_s == 100
    assert cfg.tasks.seed == 20260504
    assert cfg.protocols == ("standard",)


def test_typo_key_is_named(base_config):
    base_config["generation"]["tempreature"] = 0.5
    with pytest.raises(ConfigError, match=r"generation: .*'tempreature' was unexpected"):
        parse_config(base_config)


def test_top_level_typo_is_named(base_config):
    base_config["framworks"] = ["langgraph"]
    with pytest.raises(ConfigError, match="'framworks' was unexpected"):
        parse_config(base_config)


def test_wrong_type_is_named(base_config):
    base_config["generation"]["max_steps"] = "three"
    with pytest.raises(
        ConfigError, match=r"generation\.max_steps: 'three' is not of type 'integer'"
    ):
        parse_config(base_config)


def test_nested_model_option_typo_is_named(base_config):
    base_config["models"]["smollm2"]["options"]["n_cxt"] = 10
    with pytest.raises(ConfigError, match=r"models\.smollm2\.options: .*'n_cxt'"):
        parse_config(base_config)


def test_unknown_agent_model(base_config):
    base_config["agent_models"] = ["nope"]
    with pytest.raises(ConfigError, match=r"agent_models\.0: unknown model id 'nope'"):
        parse_config(base_config)


def test_missing_prompt_file(base_config):
    base_config["workflow"]["nodes"][0]["prompt"] = "config/prompts/missing.md"
    with pytest.raises(ConfigError, match=r"workflow\.nodes\.0\.prompt: file not found"):
        parse_config(base_config)


def test_unknown_prompt_placeholder(base_config, tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text("Do {task} on {webiste}")
    base_config["workflow"]["nodes"][0]["prompt"] = str(bad)
    with pytest.raises(ConfigError, match=r"unknown placeholder\(s\) \['webiste'\]"):
        parse_config(base_config)


def test_remote_model_needs_base_url(base_config):
    base_config["models"]["remote"] = {"provider": "openai_compatible", "model": "gpt-x"}
    with pytest.raises(ConfigError, match=r"models\.remote\.base_url"):
        parse_config(base_config)


def test_load_config_reads_yaml(tmp_path, base_config):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(base_config))
    assert load_config(path).experiment == "default"


@pytest.mark.slow
def test_snakemake_dry_run_names_bad_key_before_any_job(tmp_path, base_config):
    """The Snakefile validates against the same schema; nothing runs."""
    base_config["generation"]["max_tokens"] = "lots"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(base_config))
    proc = snakemake(
        "-n", "--configfile", str(bad), "--directory", str(tmp_path),
        "--snakefile", str(REPO / "Snakefile"), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "max_tokens" in out and "'lots' is not of type 'integer'" in out
    assert not (tmp_path / "results").exists()


def test_experiment_files_override_the_default(tmp_path):
    for path in sorted((REPO / "config" / "experiments").glob("*.yaml")):
        cfg = load_config(path, base_dir=REPO, base=REPO / "config" / "config.yaml")
        assert cfg.experiment == path.stem


def test_merge_is_nested(tmp_path, base_config):
    from mastif.core.config import merge_configs

    merged = merge_configs(base_config, {"generation": {"max_tokens": 7}, "tools": ["sympy"]})
    assert merged["generation"]["max_tokens"] == 7
    assert merged["generation"]["temperature"] == 0.7  # kept from the base
    assert merged["tools"] == ["sympy"]  # lists are replaced


@pytest.mark.parametrize(
    ("preset", "base_url", "key_env"),
    [
        ("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        ("hf_router", "https://router.huggingface.co/v1", "HF_TOKEN"),
        ("anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY"),
        ("ollama", "http://127.0.0.1:11434/v1", None),
        ("vllm", "http://127.0.0.1:8000/v1", None),
    ],
)
def test_presets_fill_base_url_and_key_variable(base_config, preset, base_url, key_env):
    base_config["models"]["remote"] = {
        "provider": "openai_compatible", "preset": preset, "model": "m",
    }  # fmt: skip
    base_config["agent_models"] = ["remote"]
    spec = parse_config(base_config).models["remote"]
    assert (spec.base_url, spec.api_key_env) == (base_url, key_env)


def test_explicit_values_win_over_the_preset(base_config):
    base_config["models"]["remote"] = {
        "provider": "openai_compatible", "preset": "openai", "model": "m",
        "base_url": "https://proxy.example/v1", "api_key_env": "MY_KEY",
    }  # fmt: skip
    spec = parse_config(base_config).models["remote"]
    assert (spec.base_url, spec.api_key_env) == ("https://proxy.example/v1", "MY_KEY")


def test_preset_on_a_local_model_or_unknown_preset_is_named(base_config):
    base_config["models"]["smollm2"]["preset"] = "openai"
    with pytest.raises(ConfigError, match=r"models\.smollm2\.preset: only for provider"):
        parse_config(base_config)
    base_config["models"]["smollm2"]["preset"] = "azure"
    with pytest.raises(ConfigError, match=r"models\.smollm2\.preset"):
        parse_config(base_config)


def test_required_envvars_are_the_keys_of_models_in_use(base_config, monkeypatch):
    from mastif.core.config import missing_envvars

    base_config["models"]["a"] = {"provider": "openai_compatible", "preset": "hf_router",
                                  "model": "m"}  # fmt: skip
    base_config["models"]["unused"] = {"provider": "openai_compatible", "preset": "openai",
                                       "model": "m"}  # fmt: skip
    base_config["agent_models"] = ["a", "smollm2"]
    base_config["models"]["j"] = {"provider": "openai_compatible", "preset": "anthropic",
                                  "model": "m"}  # fmt: skip
    base_config["judge"]["model"] = "j"
    cfg = parse_config(base_config)
    assert cfg.required_envvars() == ["ANTHROPIC_API_KEY", "HF_TOKEN"]
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert missing_envvars(cfg) == ["ANTHROPIC_API_KEY"]


@pytest.mark.slow
def test_snakemake_stops_before_any_job_when_a_key_is_unset(pipeline_copy, base_config):
    base_config["models"]["remote"] = {"provider": "openai_compatible", "preset": "openai",
                                       "model": "gpt-4o-mini", "api_key_env": "MASTIF_TEST_KEY"}  # fmt: skip
    base_config["judge"]["model"] = "remote"
    (pipeline_copy / "remote.yaml").write_text(yaml.safe_dump(base_config))
    args = ("-n", "--configfile", "remote.yaml")
    env = {k: v for k, v in os.environ.items() if k != "MASTIF_TEST_KEY"}
    proc = snakemake(*args, cwd=pipeline_copy, env=env, timeout=120)
    assert proc.returncode != 0
    assert "MASTIF_TEST_KEY" in proc.stdout + proc.stderr
    # set: the plan goes through, and the key appears in none of its output
    env["MASTIF_TEST_KEY"] = "sk-secret-value-123"
    proc = snakemake(*args, cwd=pipeline_copy, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sk-secret-value-123" not in proc.stdout + proc.stderr


def test_repeats_and_execution_defaults(base_config):
    cfg = parse_config(base_config)
    assert cfg.repeats == 1
    assert cfg.execution.shards == 1 and cfg.execution.response_cache is None
    # concurrency follows the endpoint's connections unless set
    assert cfg.concurrency_for("smollm2") == cfg.models["smollm2"].options.max_connections
    base_config["execution"] = {"concurrency": 5}
    assert parse_config(base_config).concurrency_for("smollm2") == 5
    base_config["repeats"] = 0
    with pytest.raises(ConfigError, match="repeats"):
        parse_config(base_config)


def test_stack_job_threads_reach_a_local_server_unless_the_model_sets_them(base_config):
    """An execute_stack job holds the machine (timing_lock): its local server computes with
    the job's threads; a model's own options.n_threads wins; remote models are untouched."""
    from mastif.execution.experiment import stack_job_config

    def job(model: dict, threads: int | None) -> object:
        return stack_job_config(
            experiment="x",
            model_id="m",
            model=model,
            protocol="standard",
            prompt_format=False,
            generation=base_config["generation"],
            tools=base_config["tools"],
            web=base_config["web"],
            web_options=base_config["web_options"],
            workflow=base_config["workflow"],
            repeats=1,
            sampling_seed=1,
            execution={},
            threads=threads,
        ).models["m"]

    local = dict(base_config["models"]["smollm2"])
    assert job(local, 2).options.n_threads == 2
    assert job(local, None).options.n_threads is None
    own = {**local, "options": {**local["options"], "n_threads": 1}}
    assert job(own, 2).options.n_threads == 1
    remote = {"provider": "openai_compatible", "model": "gpt", "base_url": "http://x/v1"}
    assert job(remote, 2).options.n_threads is None


def test_a_local_servers_threads_do_not_change_run_ids(base_config):
    """Threads set a server's speed, not the run: a job run with other threads resumes the
    same checkpointed runs; another context size is another run."""
    import copy

    from mastif.execution.runner import run_fingerprint
    from mastif.frameworks.plan import plan_workflow

    def fingerprint(**options):
        cfg = copy.deepcopy(base_config)
        cfg["models"]["smollm2"]["options"].update(options)
        parsed = parse_config(cfg)
        plan = plan_workflow(parsed.workflow, parsed.generation)
        return run_fingerprint(parsed, parsed.stacks()[0], plan)

    assert fingerprint(n_threads=1) == fingerprint(n_threads=2) == fingerprint()
    assert fingerprint(n_ctx=2048) != fingerprint()

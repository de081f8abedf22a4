"""Importing logs of the original MASTIF: mapping, duplicates, envelopes, estimates, errors,
the CLI and the workflow's import mode (a dry run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from mastif.analysis.stats import test_factors as factor_tests
from mastif.cli import main
from mastif.core.config import ConfigError, Stack
from mastif.core.trace import RUN_SCHEMA
from mastif.evaluation.metrics import run_metrics, stack_metrics
from mastif.execution.experiment import parse_config
from mastif.importers import MastifLogError, read_mastif_log, unwrap_envelope, write_imported
from mastif.importers.mastif_names import (
    classify_error,
    framework_id,
    model_ids,
    protocol_id,
)
from mastif.reporting.report import paper_tables
from mastif.tasks import TASK_SCHEMA, tasks_from_frame
from tests.support.paths import TESTS
from tests.support.pipeline import snakemake

FIXTURES = TESTS / "fixtures" / "mastif_logs"
PARTIAL = FIXTURES / "partial-fixture.json"
EXPORT = FIXTURES / "export-old.json"

MISTRAL = "mistralai-mistral-7b-instruct-v0-1"
QWEN = "qwen-qwen2-5-7b-instruct"
FIXTURE_STACKS = [
    Stack(MISTRAL, "a2a", "semantic_kernel"),
    Stack(MISTRAL, "standard", "crewai"),
    Stack(QWEN, "a2a", "langgraph"),
    Stack(QWEN, "mcp", "langgraph"),
]


def run_of(imported, model: str, protocol: str, framework: str, task_id: str):  # type: ignore[no-untyped-def]
    (run,) = [
        r
        for r in imported.runs
        if (r.model, r.protocol, r.framework, r.task_id) == (model, protocol, framework, task_id)
    ]
    return run


def write_log(tmp_path: Path, log: Any, name: str = "log.json") -> Path:
    path = tmp_path / name
    path.write_text(log if isinstance(log, str) else json.dumps(log))
    return path


def fixture_log() -> dict[str, Any]:
    return json.loads(PARTIAL.read_text())


# --------------------------------------------------------------------------- mapping


def test_a_run_maps_onto_the_run_schema():
    imported = read_mastif_log(PARTIAL)
    run = run_of(imported, MISTRAL, "standard", "crewai", "task-000")
    assert run.served_model == "mistralai/Mistral-7B-Instruct-v0.1"
    assert run.experiment == "Fixture experiment"
    assert run.origin == "mastif_log"
    assert run.task_text == "Find the cheapest red backpack and report its price"
    assert (run.website, run.domain) == ("shopsphere", "Shopping")
    assert run.status == "ok" and run.error_class is None and run.error_message is None
    assert run.final_answer == "The cheapest red backpack is the City Pack at 29.50."
    assert run.raw_final_answer is None  # nothing was unwrapped
    assert run.wall_seconds == 7.25  # latency
    assert run.started_at is not None and run.started_at.isoformat() == "2026-01-01T00:00:00+00:00"
    # MASTIF's success is "ran without error": it sets status, never the task check
    assert run.success is None and run.web == "live"
    assert run.prompt_format is False
    # each reasoning step's thought in the node it belongs to, then the answer
    assert [(o.node, o.step) for o in run.node_outputs] == [
        ("run", 1), ("navigate", 2), ("navigate", 3), ("navigate", 4),
        ("conclude", 5), ("conclude", 6), ("final", 7),
    ]  # fmt: skip
    assert run.node_outputs[2].text == "Searching the shop for red backpacks"
    assert run.node_outputs[-1].text == run.final_answer
    # the step whose action is a tool is a tool call; web_search had no failure in tool_log
    (call,) = run.tool_calls
    assert (call.name, call.node, call.step, call.ok) == ("web_search", "navigate", 3, True)
    assert json.loads(call.arguments) == {"query": "red backpack"}
    assert call.output.startswith("3 results") and call.duration_s is None
    assert (run.tool_log_calls, run.tool_log_ok) == (2, 2)
    # not recorded by the log: null, not 0
    assert run.temperature is None and run.n_llm_calls is None and run.llm_calls == []
    assert run.protocol_messages is None and run.protocol_seconds is None
    assert run.protocol_exchange_seconds is None and run.protocol_peer_seconds is None
    meta = json.loads(run.import_meta)
    assert meta["framework"] == "CrewAI" and meta["task_index"] == 0
    assert meta["metadata"]["total_overhead_ms"] == 0.07
    assert meta["level_source"] == "unknown"


def test_ids_protocols_and_frameworks():
    imported = read_mastif_log(PARTIAL)
    # "A2A" and "a2a" are one protocol; the stacks are those with runs, sorted
    assert imported.stacks() == FIXTURE_STACKS
    assert imported.model_names == {
        MISTRAL: "mistralai/Mistral-7B-Instruct-v0.1",
        QWEN: "Qwen/Qwen2.5-7B-Instruct",
    }
    assert [protocol_id(p) for p in ("standard", "STANDARD", "MCP", "A2A", "ACP")] == [
        "standard", "standard", "mcp", "a2a", "acp",
    ]  # fmt: skip
    assert [framework_id(f) for f in ("CrewAI", "LangChain", "LangGraph", "SemanticKernel")] == [
        "crewai", "langchain", "langgraph", "semantic_kernel",
    ]  # fmt: skip
    assert framework_id("Smolagents") == "smolagents" and framework_id("LlamaIndex") == "llamaindex"
    # slugs that collide get a hash suffix each, deterministically
    ids = model_ids(["org/Model.1", "org/model-1", "other/x"])
    assert ids["other/x"] == "other-x"
    assert ids["org/Model.1"] != ids["org/model-1"]
    assert all(i.startswith("org-model-1-") for i in (ids["org/Model.1"], ids["org/model-1"]))
    assert model_ids(["org/model-1", "org/Model.1", "other/x"]) == ids  # order-independent


def test_run_ids_are_stable_across_reimports_and_a_grown_log(tmp_path):
    def ids(imported) -> dict[tuple[str, str, str, str], str]:  # type: ignore[no-untyped-def]
        return {(r.model, r.protocol, r.framework, r.task_id): r.run_id for r in imported.runs}

    first = ids(read_mastif_log(PARTIAL))
    log = fixture_log()
    log["updated_at"] = "2026-01-02T00:00:00"
    log["results"].append(dict(log["results"][0], framework="LangChain"))  # the log grew
    grown = read_mastif_log(write_log(tmp_path, log))
    again = ids(grown)
    assert {k: again[k] for k in first} == first
    assert len(set(again.values())) == len(again) == len(first) + 1


def test_a_duplicated_run_keeps_its_last_occurrence():
    imported = read_mastif_log(PARTIAL)
    assert (imported.n_results, imported.n_duplicates, len(imported.runs)) == (6, 1, 5)
    run = run_of(imported, QWEN, "mcp", "langgraph", "task-001")
    assert run.status == "ok" and run.wall_seconds == 9.5  # the re-run, not the 402 failure
    assert run.final_answer == "Hotel Alfama Rooms: 2 nights for 112 euros."
    meta = json.loads(run.import_meta)
    assert (meta["occurrences"], meta["result_index"]) == (2, 5)
    # its tool_log: 2 calls, 1 failed
    assert (run.tool_log_calls, run.tool_log_ok) == (2, 1)


# --------------------------------------------------------------------------- envelopes


def test_envelope_wrapped_answers_are_unwrapped_and_the_original_kept():
    imported = read_mastif_log(PARTIAL)
    assert imported.envelopes == {"a2a": 1, "mcp": 1}
    a2a = run_of(imported, MISTRAL, "a2a", "semantic_kernel", "task-000")
    assert a2a.final_answer == "The City Pack is the cheapest red backpack (29.50)."
    assert json.loads(a2a.raw_final_answer)["protocol"] == "A2A/1.0"
    assert json.loads(a2a.import_meta)["envelope"] == "a2a"
    assert a2a.prompt_format is True
    mcp = run_of(imported, QWEN, "mcp", "langgraph", "task-001")
    assert mcp.raw_final_answer.startswith("```json\n{")  # fenced envelope, kept verbatim
    assert "MCP/1.0" not in mcp.final_answer


@pytest.mark.parametrize(
    ("reply", "text", "kind"),
    [
        ('{"protocol": "MCP/1.0", "content": "hi"}', "hi", "mcp"),
        ('```json\n{"protocol": "A2A/1.0", "payload": {"content": "hi"}}\n```', "hi", "a2a"),
        ('{"payload": {"content": "hi"}}', "hi", "a2a"),
        ("{'content': 'hi'}", "hi", "content"),  # the reply dict logged as its repr
        ('{"protocol_version": "ACP/2.0", "message": {"id": "m", "content": "hi"}}', "hi", "acp"),
        ('{"protocol": "MCP/1.0", "content": "line one\nline two"}', "line one\nline two", "mcp"),
        (
            '{"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hi"}]}}',
            "hi",
            "jsonrpc",
        ),
        (
            '{"jsonrpc": "2.0", "id": 1, "result": {"kind": "task", "artifacts": '
            '[{"parts": [{"kind": "text", "text": "hi"}]}]}}',
            "hi",
            "jsonrpc",
        ),
        (
            '{"kind": "message", "role": "agent", "parts": [{"kind": "text", "text": "hi"}]}',
            "hi",
            "a2a",
        ),
        # the envelope first, the agent's remarks after it: both stay, without the wrapper
        ('```json\n{"protocol": "MCP/1.0", "content": "hi"}\n```\n\nDone.', "hi\n\nDone.", "mcp"),
        # nested
        (
            '{"protocol": "A2A/1.0", "payload": {"content": "{\\"content\\": \\"hi\\"}"}}',
            "hi",
            "a2a",
        ),
        # not envelopes: an agent answering in JSON, a JSON string, prose, broken JSON
        ('{"action": "click", "element": "#buy"}', '{"action": "click", "element": "#buy"}', None),
        ('"just a string"', '"just a string"', None),
        ("The answer is 42.", "The answer is 42.", None),
        (
            '{"protocol": "MCP/1.0", "content": "cut',
            '{"protocol": "MCP/1.0", "content": "cut',
            None,
        ),
    ],
)
def test_unwrap_envelope(reply: str, text: str, kind: str | None):
    assert unwrap_envelope(reply) == (text, kind)


# --------------------------------------------------------------------------- tokens


def test_token_counts_are_estimates_never_api_usage():
    imported = read_mastif_log(PARTIAL)
    table = imported.runs_table()
    assert table.schema == RUN_SCHEMA
    rows = {(r["model"], r["framework"], r["task_id"]): r for r in table.to_pylist()}
    crew = rows[(MISTRAL, "crewai", "task-000")]
    assert (crew["est_reasoning_tokens"], crew["est_output_tokens"]) == (40, 12)
    for row in rows.values():
        assert row["tokens_estimated"] is True
        assert row["prompt_tokens"] is None and row["completion_tokens"] is None
    no_tokens = rows[(QWEN, "langgraph", "task-001")]
    assert no_tokens["est_reasoning_tokens"] is None  # the log had none: null, not 0


def test_metrics_and_tables_do_not_present_estimates_as_usage():
    runs = pl.from_arrow(read_mastif_log(PARTIAL).runs_table())
    keys = runs.select("run_id", "model", "protocol", "framework", "task_id")
    judged = keys.with_columns(
        judge_status=pl.lit("ok"), TU=pl.lit(1.0), TA=pl.lit(0.7), TCR=pl.lit(0.7)
    )
    values = keys.with_columns(
        IVS=pl.lit(1.0), IVS_prompt_output=pl.lit(1.0), IVS_reasoning=pl.lit(None, pl.Float64)
    )
    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    per_run = run_metrics(runs, judged, values, prices={MISTRAL: price, QWEN: price})
    assert per_run["V"].null_count() == per_run.height  # no API usage, no verbosity
    assert per_run["cost_usd"].null_count() == per_run.height
    assert per_run["model_s"].null_count() == per_run.height  # LLM calls not recorded
    crew = per_run.filter(pl.col("framework") == "crewai", pl.col("task_id") == "task-000")
    assert crew.select("CT", "n_tool_calls", "n_tool_ok", "TUSR").row(0) == (7.25, 2, 2, 1.0)
    mcp = per_run.filter(pl.col("protocol") == "mcp")
    assert mcp.select("n_tool_calls", "n_tool_ok", "TUSR").row(0) == (2, 1, 0.5)  # tool_log
    stacks = stack_metrics(per_run)
    assert stacks["V_mean"].null_count() == stacks.height
    assert not stacks["pareto_optimal"].any()  # E needs V
    stats = factor_tests(per_run)
    v_tests = stats["tests"].filter(pl.col("metric") == "V")
    assert set(v_tests["test"]) == {"skipped"}
    table3 = paper_tables(stacks, stats["tests"], stats["groups"])["table3_efficiency"]
    assert table3["V"].null_count() == table3.height


# --------------------------------------------------------------------------- errors and tasks


def test_failed_runs_get_a_status_and_a_classified_error():
    imported = read_mastif_log(PARTIAL)
    framework = run_of(imported, MISTRAL, "standard", "crewai", "task-001")
    assert (framework.status, framework.error_class) == ("error", "framework_error")
    assert framework.error_message.startswith("'Kernel' object has no attribute")
    assert framework.final_answer == ""  # response null
    timeout = run_of(imported, QWEN, "a2a", "langgraph", "task-000")
    assert (timeout.status, timeout.error_class) == ("timeout", "timeout")
    assert classify_error("Inference Error: 402 Client Error: Payment Required for url: x") == (
        "error",
        "provider_bad_request",
    )
    assert classify_error("503 Server Error: Service Unavailable") == ("error", "provider_error")
    assert classify_error("Connection refused") == ("error", "provider_unreachable")


def test_an_error_repeated_as_the_response_is_no_answer(tmp_path):
    log = fixture_log()
    log["results"] = log["results"][1:2]  # the 402 failure alone
    run = read_mastif_log(write_log(tmp_path, log)).runs[0]
    assert (run.status, run.error_class) == ("error", "provider_bad_request")
    assert run.final_answer == ""
    assert run.raw_final_answer == run.error_message  # the response, verbatim


def test_tasks_table():
    imported = read_mastif_log(PARTIAL)
    frame = imported.tasks_frame()
    assert dict(frame.schema) == TASK_SCHEMA
    assert frame["task_id"].to_list() == ["task-000", "task-001"]
    row = frame.row(1, named=True)
    assert row["confirmed_task"] == "Find a hotel in Lisbon for two nights under 120 euros"
    assert (row["website"], row["domain"], row["subdomain"]) == ("stayfinder", "Travel", None)
    assert row["reference_steps"] == [] and row["level"] is None
    assert imported.unknown_levels == 2
    assert [t.task_id for t in tasks_from_frame(frame)] == ["task-000", "task-001"]


def test_a_mind2web_task_record_gives_id_steps_and_level(tmp_path):
    log = fixture_log()
    log["results"] = [dict(log["results"][0], task={
        "annotation_id": "ab12-cd34", "confirmed_task": "Find a red backpack",
        "website": "shopsphere", "domain": "Shopping", "subdomain": "Bags",
        "action_reprs": ["[link] Bags -> CLICK", "[button] Red -> CLICK"],
    })]  # fmt: skip
    imported = read_mastif_log(write_log(tmp_path, log))
    (task,) = imported.tasks
    assert (task.task_id, task.subdomain, task.level, task.n_steps) == (
        "ab12-cd34", "Bags", "easy", 2,
    )  # fmt: skip
    assert json.loads(imported.runs[0].import_meta)["level_source"] == "steps"


def test_the_older_export_format():
    imported = read_mastif_log(EXPORT)
    assert imported.experiment == "export-old"  # no metadata: the file's name
    assert imported.stacks() == [
        Stack("gpt-4o-mini", "acp", "llamaindex"),
        Stack("gpt-4o-mini", "mcp", "smolagents"),
    ]
    assert imported.envelopes == {"content": 1, "jsonrpc": 1}
    (task,) = imported.tasks  # no task_index: the id hashes the task text
    assert task.task_id.startswith("task-") and len(task.task_id) == len("task-") + 12
    assert task.website == "unknown" and task.domain is None
    smol = [r for r in imported.runs if r.framework == "smolagents"][0]
    assert smol.final_answer.startswith("Brazil publishes open research data")
    assert smol.tool_calls == [] and smol.tool_log_calls is None  # no tool log: unknown


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json {", "not JSON"),
        ("[1, 2]", "log: <top level>: expected an object, got list"),
        ('{"benchmark": "Mind2Web"}', "log: results: missing"),
        ('{"results": []}', "log: results: empty"),
    ],
)
def test_a_file_that_is_no_log_is_refused(tmp_path, content: str, message: str):
    with pytest.raises(MastifLogError, match=message):
        read_mastif_log(write_log(tmp_path, content))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("model_name"), r"results\[2\]: model_name: missing \(required\)"),
        (lambda r: r.pop("latency"), r"results\[2\]: latency: missing"),
        (lambda r: r.update(success="yes"), r"results\[2\]: success: expected bool, got str"),
        (lambda r: r.update(latency="7"), r"results\[2\]: latency: expected int or float"),
        (lambda r: r.update(task_index=True), r"results\[2\]: task_index: expected int, got bool"),
        (lambda r: r.update(task="   "), r"results\[2\]: task: empty"),
        (lambda r: r.update(reasoning_steps=["x"]), r"results\[2\]: reasoning_steps\[0\]"),
        (
            lambda r: r.update(task="Website: a\nDomain: b\nGoal: another task"),
            r"results\[2\]: task: task id 'task-000' is a different task in results\[0\]",
        ),
    ],
)
def test_a_bad_run_is_named_by_index_and_field(tmp_path, change, message: str):
    log = fixture_log()
    change(log["results"][2])
    with pytest.raises(MastifLogError, match=message):
        read_mastif_log(write_log(tmp_path, log))


# --------------------------------------------------------------------------- CLI


def test_cli_imports_a_log(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["import-mastif", str(PARTIAL), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "6 result(s) read, 1 duplicate(s) dropped" in printed
    assert "2 answer(s) unwrapped" in printed and "4 stack(s)" in printed
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == sorted(["tasks.parquet", *(f"runs/{s.path}.parquet" for s in FIXTURE_STACKS)])
    table = pq.read_table(out / "runs" / f"{FIXTURE_STACKS[1].path}.parquet")
    assert table.schema == RUN_SCHEMA and table.num_rows == 2
    assert pl.read_parquet(out / "tasks.parquet").height == 2
    # the table is what the library gives
    assert write_imported(read_mastif_log(PARTIAL), tmp_path / "again")[0].name == "tasks.parquet"


def test_cli_writes_nothing_for_a_bad_log(tmp_path, capsys):
    log = fixture_log()
    del log["results"][4]["framework"]
    out = tmp_path / "out"
    assert main(["import-mastif", str(write_log(tmp_path, log)), "--out", str(out)]) == 2
    assert "results[4]: framework: missing" in capsys.readouterr().err
    assert not out.exists()


# --------------------------------------------------------------------------- config, workflow


def test_import_mode_config(base_config, tmp_path):
    base_config["models"]["remote"] = {
        "provider": "openai_compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "REMOTE_KEY",
    }  # fmt: skip
    base_config["agent_models"] = ["remote"]
    assert parse_config(base_config).required_envvars() == ["REMOTE_KEY"]
    base_config["import"] = {"mastif_log": str(PARTIAL)}
    cfg = parse_config(base_config)
    assert cfg.importing and cfg.import_.mastif_log == str(PARTIAL)
    assert cfg.required_envvars() == []  # the agent model is not called
    base_config["import"] = {"mastif_log": str(tmp_path / "missing.json")}
    with pytest.raises(ConfigError, match="import.mastif_log: file not found"):
        parse_config(base_config)
    base_config["import"] = {"mastif_logs": "x"}
    with pytest.raises(ConfigError, match="import"):
        parse_config(base_config)


@pytest.mark.slow
def test_dry_run_in_import_mode_plans_import_and_evaluation_only(pipeline_copy):
    shutil.copy2(PARTIAL, pipeline_copy / "mastif_log.json")
    (pipeline_copy / "override.yaml").write_text(
        yaml.safe_dump({"import": {"mastif_log": "mastif_log.json"}})
    )
    proc = snakemake("-n", "--configfile", "override.yaml", cwd=pipeline_copy, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    jobs = {
        line.split()[0]: int(line.split()[1])
        for line in out.split("Job stats:")[1].splitlines()[3:]
        if len(line.split()) == 2 and line.split()[1].isdigit()
    }
    assert jobs["import_mastif_log"] == 1
    for rule in ("judge_runs", "tag_values"):
        assert jobs[rule] == len(FIXTURE_STACKS)
    assert jobs["aggregate_metrics"] == 1 and jobs["test_factors"] == 1
    assert jobs["blocked_tests"] == 1
    assert "execute_stack" not in jobs and "sample_tasks" not in jobs and "gather_runs" not in jobs
    for stack in FIXTURE_STACKS:
        assert f"results/runs/{stack.path}.parquet" in out
    assert "tasks_allocation" not in out
    # one top-values figure per model of the log's stacks, not per config agent model
    assert f"results/plots/top_values_{MISTRAL}.png" in out
    assert "results/plots/top_values_smollm2.png" not in out


@pytest.mark.slow
def test_import_mode_runs_judge_values_metrics_stats_and_tables(pipeline_copy):
    """The whole evaluation half of the DAG on an imported log: a scripted judge endpoint,
    the real sentence-embedding model, metrics, statistics, plots and tables."""
    from tests.support.fakes import ScriptedChatServer

    verdict = {
        f"{c}_{part}": (0.7 if part == "score" else f"{c} looks adequate here.")
        for c in ("TU", "TA", "TCR")
        for part in ("rationale", "score")
    }
    shutil.copy2(PARTIAL, pipeline_copy / "mastif_log.json")
    with ScriptedChatServer(lambda p: {"content": json.dumps(verdict)}) as judge:
        override = {
            "import": {"mastif_log": "mastif_log.json"},
            "models": {"scripted": {"provider": "openai_compatible", "model": "judge",
                                    "base_url": judge.base_url}},
            "judge": {"model": "scripted"},
        }  # fmt: skip
        (pipeline_copy / "override.yaml").write_text(yaml.safe_dump(override))
        proc = snakemake(
            "--cores", "2", "--configfile", "override.yaml", cwd=pipeline_copy, timeout=900
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    imported = read_mastif_log(PARTIAL)
    assert len(judge.requests) == len(imported.runs)  # one judge call per imported run
    runs = pl.read_parquet(pipeline_copy / "results" / "metrics" / "runs.parquet")
    assert runs.height == len(imported.runs)
    assert (runs["TCR"] == 0.7).all() and runs["V"].is_null().all()  # estimates are not V
    # IVS is null exactly where a run has no pair of value sets with a value in either
    values = pl.concat(
        [
            pl.read_parquet(p)
            for p in sorted((pipeline_copy / "results" / "values").rglob("*.parquet"))
        ]
    )
    pairs = runs.join(values.select("run_id", "n_ivs_pairs"), on="run_id")
    assert pairs.height == runs.height and pairs["IVS"].is_not_null().any()
    assert (pairs["IVS"].is_null() == (pairs["n_ivs_pairs"] == 0)).all()
    for table in ("table2_task_completion", "table3_efficiency", "table4_tool_use"):
        assert (pipeline_copy / "results" / "tables" / f"{table}.md").is_file()
    assert (pipeline_copy / "results" / "plots" / f"top_values_{QWEN}.png").is_file()

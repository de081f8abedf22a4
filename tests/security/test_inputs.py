"""Issue 18 items 9-11: hostile or broken inputs (MASTIF logs, configs, task files) fail
with a sentence naming the file, record and field, never a traceback or half-written output.

Each test names what it failed with before the fix.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from mastif.cli import main
from mastif.core.config import ConfigError
from mastif.execution.experiment import load_config, parse_config
from mastif.importers import MastifLogError, read_mastif_log, write_imported
from mastif.tasks.loaders import TaskLoadError, _read_table, load_task_files
from tests.support.paths import REPO

PARTIAL = REPO / "tests" / "fixtures" / "mastif_logs" / "partial-fixture.json"


def fixture_log() -> dict[str, Any]:
    return json.loads(PARTIAL.read_text())


def write_log(tmp_path: Path, log: dict[str, Any]) -> Path:
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))  # json.dumps writes NaN/Infinity as Python does
    return path


# --------------------------------------------------------------------------- item 9: logs


def test_a_table_that_cannot_be_built_leaves_no_file(tmp_path):
    # before: tasks.parquet was written, then OverflowError building a runs table
    imported = read_mastif_log(PARTIAL)
    run = imported.runs[-1]
    imported.runs[-1] = dataclasses.replace(run, est_output_tokens=2**70)
    out = tmp_path / "out"
    with pytest.raises(MastifLogError, match="cannot be stored as tables"):
        write_imported(imported, out)
    assert not out.exists() or not any(out.rglob("*.parquet"))


def test_an_int64_overflowing_count_is_named_and_nothing_is_written(tmp_path, capsys):
    # before: OverflowError traceback from the CLI after tasks.parquet was written
    log = fixture_log()
    log["results"][1]["output_tokens"] = 2**70
    out = tmp_path / "out"
    assert main(["import-mastif", str(write_log(tmp_path, log)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "results[1]: output_tokens: out of range" in err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("stamp", [math.nan, math.inf, 1e300, -5.0])
def test_a_bad_step_timestamp_is_named(tmp_path, capsys, stamp: float):
    # before: ValueError/OverflowError traceback from datetime.fromtimestamp (NaN, 1e300)
    log = fixture_log()
    log["results"][0]["reasoning_steps"][0]["timestamp"] = stamp
    path = write_log(tmp_path, log)
    with pytest.raises(MastifLogError, match=r"results\[0\]: reasoning_steps\[0\]\.timestamp"):
        read_mastif_log(path)
    assert main(["import-mastif", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "timestamp" in capsys.readouterr().err


@pytest.mark.parametrize("latency", [math.nan, math.inf, 1e300])
def test_a_non_finite_or_absurd_latency_is_rejected(tmp_path, latency: float):
    # before: imported silently (NaN < 0 is false) as wall_seconds NaN/inf
    log = fixture_log()
    log["results"][2]["latency"] = latency
    with pytest.raises(MastifLogError, match=r"results\[2\]: latency: (not a finite|out of range)"):
        read_mastif_log(write_log(tmp_path, log))


@pytest.mark.parametrize("calls", ["many", 2.5, -1, 2**70])
def test_a_non_integer_tool_count_is_named(tmp_path, capsys, calls: Any):
    # before: ValueError traceback from int("many"); 2.5 truncated silently
    log = fixture_log()
    log["results"][0]["metadata"] = {
        "tool_log": {"per_tool": {"web_search": {"calls": calls, "failures": 0}}}
    }
    path = write_log(tmp_path, log)
    with pytest.raises(MastifLogError, match=r"tool_log\.per_tool\.web_search\.calls"):
        read_mastif_log(path)
    assert main(["import-mastif", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "Traceback" not in capsys.readouterr().err


# --------------------------------------------------------------------------- item 10: config


def test_an_empty_rubric_is_named(base_config, tmp_path):
    # before: valid; the judge scored against an empty rubric
    rubric = tmp_path / "rubric.md"
    rubric.write_text("  \n")
    base_config["judge"]["rubric"] = str(rubric)
    with pytest.raises(ConfigError, match=r"judge\.rubric: .*rubric\.md is empty"):
        parse_config(base_config)


def test_a_non_utf8_rubric_is_named(base_config, tmp_path):
    # before: valid; UnicodeDecodeError only when the judge ran
    rubric = tmp_path / "rubric.md"
    rubric.write_bytes(b"\xff\xfe\x00binary")
    base_config["judge"]["rubric"] = str(rubric)
    with pytest.raises(ConfigError, match=r"judge\.rubric: .*rubric\.md is not UTF-8"):
        parse_config(base_config)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("temperature", math.nan, "generation.temperature: nan is not a finite number"),
        ("timeout_s", math.inf, "generation.timeout_s: inf is not a finite number"),
        ("timeout_s", 1e12, "generation.timeout_s: .* is greater than the maximum of 86400"),
        ("max_tokens", 2**80, "generation.max_tokens: .* out of range"),
    ],
)
def test_non_finite_and_absurd_numbers_fail(base_config, key: str, value: Any, message: str):
    # before: NaN/inf passed minimum/maximum (NaN compares false); 1e12 s was a valid timeout
    base_config["generation"][key] = value
    with pytest.raises(ConfigError, match=message):
        parse_config(base_config)


def test_yaml_nan_in_a_file_fails(tmp_path, base_config):
    # before: `.nan` loaded as a valid temperature
    base_config["generation"]["temperature"] = "NAN_HERE"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(base_config).replace("NAN_HERE", ".nan"))
    with pytest.raises(ConfigError, match="not a finite number"):
        load_config(path)


def test_yaml_syntax_error_and_missing_file_are_one_line(tmp_path, capsys):
    # before: yaml.ScannerError / FileNotFoundError tracebacks from `mastif validate`
    bad = tmp_path / "bad.yaml"
    bad.write_text("generation:\n  temperature: [1, 2\n")
    assert main(["validate", str(bad), "--base", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{bad}: invalid YAML:") and "line" in err and "\n" not in err
    missing = tmp_path / "missing.yaml"
    assert main(["validate", str(missing), "--base", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"{missing}: config file not found"


def test_a_key_over_plain_http_to_another_host_is_warned(base_config, tmp_path, capsys):
    # before: no warning (ImportError: plaintext_key_warnings did not exist)
    from mastif.execution.experiment import plaintext_key_warnings

    base_config["models"]["remote"] = {
        "provider": "openai_compatible", "model": "m",
        "base_url": "http://10.1.2.3:8000/v1", "api_key_env": "REMOTE_KEY",
    }  # fmt: skip
    base_config["models"]["local"] = {
        "provider": "openai_compatible", "model": "m",
        "base_url": "http://127.0.0.1:8000/v1", "api_key_env": "LOCAL_KEY",
    }  # fmt: skip
    warnings = plaintext_key_warnings(parse_config(base_config).model_dump())
    assert len(warnings) == 1 and "models.remote" in warnings[0] and "unencrypted" in warnings[0]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(base_config))
    assert main(["validate", str(path), "--base", str(path)]) == 0
    err = capsys.readouterr().err
    assert "warning: models.remote: the API key in $REMOTE_KEY is sent unencrypted" in err
    assert "models.local" not in err


# --------------------------------------------------------------------------- item 11: tasks


def test_a_non_utf8_task_file_is_named(tmp_path):
    # before: UnicodeDecodeError traceback (only OSError was caught)
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"task_id": "t\xff"}\n')
    with pytest.raises(TaskLoadError, match=r"tasks\.jsonl: task file is not UTF-8"):
        load_task_files([path])
    csv = tmp_path / "tasks.csv"
    csv.write_bytes(b"task_id,confirmed_task,website\nt1,caf\xe9,w\n")
    with pytest.raises(TaskLoadError, match=r"tasks\.csv: task file is not UTF-8"):
        _read_table(csv, "file", None, {})


@pytest.mark.parametrize("length", ["1e300", "NaN", "-3", "2.5", "3.0", "100000"])
def test_a_bad_reference_length_is_named_with_its_task(tmp_path, length: str):
    # before: 1e300, -3, 3.0 and 100000 loaded (1e300 as a 300-digit int that overflows the
    # Int64 task column later); NaN and 2.5 failed without naming the task
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        '{"task_id": "t-big", "confirmed_task": "x", "website": "w", "level": "easy", '
        f'"reference_length": {length}}}\n'
    )
    with pytest.raises(TaskLoadError, match=r"task 't-big'.*reference_length"):
        load_task_files([path])
    if length == "3.0":
        return  # a spreadsheet's 3.0 in a CSV cell is the count 3 (mastif.tasks.records)
    csv = tmp_path / "tasks.csv"
    csv.write_text(f"task_id,confirmed_task,website,reference_length\nt-csv,x,w,{length}\n")
    with pytest.raises(TaskLoadError, match=r"(task 't-csv'.*)?reference_length"):
        _read_table(csv, "file", None, {})

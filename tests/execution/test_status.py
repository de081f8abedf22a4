"""``mastif status`` (issue 21, item 2): counts from the files a running workflow writes."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest

from mastif.cli import main
from mastif.core.trace import RunTrace, runs_to_table
from mastif.execution.budget import Cost, Ledger, judgement_entry
from mastif.execution.experiment import parse_config
from mastif.execution.status import experiment_status, format_status

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}


def _config(base_config: dict[str, Any], **execution: Any) -> dict[str, Any]:
    """Three stacks (one model, three protocols), two repeats, concurrency 2."""
    cfg = copy.deepcopy(base_config)
    cfg["models"]["paid"] = {"provider": "openai_compatible", "model": "p",
                             "base_url": "http://127.0.0.1:9/v1", "price": PRICE}  # fmt: skip
    cfg["agent_models"] = ["paid"]
    cfg["protocols"] = ["standard", "mcp", "a2a"]
    cfg["frameworks"] = ["langgraph"]
    cfg["repeats"] = 2
    cfg["execution"] = {"concurrency": 2, **execution}
    return cfg


def _trace(task: str, repeat: int, status: str = "ok", wall: float = 10.0) -> RunTrace:
    return RunTrace(
        run_id=f"{task}-{repeat}", experiment="x", model="paid", protocol="p", framework="f",
        task_id=task, task_text="t", website="w", domain=None, level=None, status=status,  # type: ignore[arg-type]
        error_class=None, error_message=None, final_answer="", prompt_tokens=1000,
        completion_tokens=500, wall_seconds=wall, repeat=repeat,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip


def _write_tasks(results: Path, task_ids: list[str]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"task_id": task_ids}).write_parquet(results / "tasks.parquet")


def test_status_of_a_complete_a_running_and_a_missing_stack(tmp_path: Path, base_config) -> None:
    cfg = parse_config(_config(base_config))
    results = tmp_path / "results"
    _write_tasks(results, ["t1", "t2"])  # x 2 repeats: 4 runs per stack
    # standard: gathered, complete; one run failed
    runs = results / "runs" / "paid" / "standard" / "langgraph.parquet"
    runs.parent.mkdir(parents=True)
    pq.write_table(runs_to_table([_trace("t1", 0), _trace("t2", 0, "timeout"), _trace("t1", 1),
                                  _trace("t2", 1)]), runs)  # fmt: skip
    # mcp: shard 1 of 2 written, shard 2 running: its checkpoint has a run, a half-written
    # line, and a run of a task no longer in the sample
    shards = results / "shards" / "paid" / "mcp" / "langgraph"
    shards.mkdir(parents=True)
    pq.write_table(runs_to_table([_trace("t1", 0, wall=20.0)]), shards / "1-of-2.parquet")
    ckpt = results / "checkpoints" / "paid" / "mcp" / "langgraph" / "2-of-2.jsonl"
    ckpt.parent.mkdir(parents=True)
    half = _trace("t2", 1).to_json()
    ckpt.write_text(
        _trace("t2", 0, wall=40.0).to_json() + "\n" + _trace("old", 0).to_json() + "\n"
        + half[: len(half) // 2]
    )  # fmt: skip
    # a2a: nothing yet

    status = experiment_status(cfg, tmp_path)
    std, mcp, a2a = status.stacks
    assert (std.planned, std.done, std.failed, std.remaining) == (4, 4, 1, 0)
    assert std.tokens == 4 * 1500 and std.usd == pytest.approx(4 * (1000 * 1 + 500 * 2) / 1e6)
    assert (mcp.done, mcp.failed, mcp.remaining) == (2, 0, 2)
    assert mcp.mean_wall_s == pytest.approx(30.0)
    # ETA: remaining x mean run time / runs in flight (concurrency 2)
    assert mcp.eta_s(status.mean_wall_s) == pytest.approx(2 * 30.0 / 2)
    assert (a2a.done, a2a.remaining, a2a.tokens, a2a.usd) == (0, 4, 0, 0.0)
    # a stack without runs is timed by all finished runs: (4 x 10 + 20 + 40) / 6
    assert status.mean_wall_s == pytest.approx(100 / 6)
    assert a2a.eta_s(status.mean_wall_s) == pytest.approx(4 * (100 / 6) / 2)
    assert status.total_eta_s == pytest.approx(0 + 30 + 4 * (100 / 6) / 2)
    assert any("1 unreadable line(s) skipped" in n for n in status.notes)
    assert any("1 run(s) of another sample" in n for n in status.notes)
    assert [c.shard for c in mcp.checkpoints] == ["2-of-2"] and mcp.checkpoints[0].runs == 2

    text = format_status(status, "config.yaml")
    assert "planned: 2 task(s) sampled in" in text and "x 2 repeat(s) = 4 runs per stack" in text
    lines = {line.split()[0]: line.split() for line in text.splitlines() if line.strip()}
    assert lines["paid/standard/langgraph"][1:4] == ["4/4", "1", "0"]
    assert lines["total"][1:5] == ["6/12", "1", "6", f"{6 * 1500:,}"]
    assert "ETA = " in text and "paid/mcp/langgraph 2-of-2: 2 run(s)" in text
    assert "budget: none" in text


def test_unknown_price_and_usage_are_unknown_not_zero(tmp_path: Path, base_config) -> None:
    raw = _config(base_config)
    del raw["models"]["paid"]["price"]
    cfg = parse_config(raw)
    ckpt = tmp_path / "results" / "checkpoints" / "paid" / "a2a" / "langgraph" / "1-of-1.jsonl"
    ckpt.parent.mkdir(parents=True)
    imported = _trace("t1", 0)
    imported.prompt_tokens = imported.completion_tokens = None
    ckpt.write_text(imported.to_json() + "\n")
    status = experiment_status(cfg, tmp_path)
    std, _, a2a = status.stacks
    assert std.usd is None and a2a.tokens is None and a2a.usd is None
    text = format_status(status)
    total = next(line.split() for line in text.splitlines() if line.startswith("total"))
    assert total[4:6] == ["unknown", "unknown"]
    # no sample yet: planned from the config
    assert (
        "tasks not sampled yet: " in text and f"x 2 repeat(s) = {cfg.tasks.sample_size * 2}" in text
    )
    assert std.eta_s(status.mean_wall_s) == pytest.approx(cfg.tasks.sample_size * 2 * 10.0 / 2)


def test_status_shows_the_budget_and_its_ledger(tmp_path: Path, base_config) -> None:
    raw = _config(base_config, budget={"usd": 0.5})
    raw["models"]["gemma3"]["price"] = {"input_per_mtok": 0, "output_per_mtok": 0}  # the judge
    cfg = parse_config(raw)
    ledger = Ledger(tmp_path / "results" / "checkpoints" / "budget.jsonl")
    ledger.settle("r", Cost(1500, 0.25))
    text = format_status(experiment_status(cfg, tmp_path))
    assert "budget: usd 0.50" in text and "1 run(s), 1,500 tokens, US$ 0.25" in text
    # the judge's calls are in the same ledger, counted apart
    ledger.settle(judgement_entry("gemma3", "r", 0), Cost(500, 0.05))
    text = format_status(experiment_status(cfg, tmp_path))
    assert "1 run(s) and 1 judgement(s), 2,000 tokens, US$ 0.30" in text


def test_mastif_status_command(tmp_path: Path, base_config, monkeypatch, capsys) -> None:
    import yaml

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(_config(base_config)))
    _write_tasks(tmp_path / "results", ["t1"])
    monkeypatch.chdir(tmp_path)
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert ["paid/standard/langgraph", "0/2", "0", "2"] in [r[:4] for r in rows]
    (tmp_path / "config" / "config.yaml").write_text("experiment: [")
    assert main(["status"]) == 2
    assert "invalid YAML" in capsys.readouterr().err

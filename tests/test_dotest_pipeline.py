"""The .test smoke run: the whole DAG and the report on a scripted model (fast tier).

Runs exactly the command `.test/config.yaml` documents, in a temp copy of the workflow: one
stack (scripted model x standard x langgraph) on two sandbox tasks, the scripted model's
server started and stopped by the jobs themselves, the real embedding model for values.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

#: the smoke test's command line after `snakemake` (as in .test/config.yaml)
DOTEST_ARGS = ["--cores", "2", "--directory", ".test", "--configfile", ".test/config.yaml"]
REPORT_ARGS = ["--report-after-run", "--report", "results/report.html"]


def snakemake(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "snakemake"), *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def summary(cwd: Path) -> list[dict[str, str]]:
    """`snakemake --summary`: one row per output file with its rule, log file(s) and status."""
    proc = snakemake(*DOTEST_ARGS, "--summary", cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout[proc.stdout.index("output_file") :]
    return list(csv.DictReader(io.StringIO(lines), delimiter="\t"))


def test_dotest_runs_the_whole_dag_and_the_report(pipeline_copy: Path) -> None:
    # .test as in the repository (its links to config/ and resources/ kept), without the
    # results of a run there
    shutil.copytree(
        REPO / ".test",
        pipeline_copy / ".test",
        symlinks=True,
        ignore=shutil.ignore_patterns("results", "logs", ".snakemake"),
    )
    proc = snakemake(*DOTEST_ARGS, *REPORT_ARGS, cwd=pipeline_copy)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    work = pipeline_copy / ".test"
    # nothing outside .test/: the repository's results/ and logs/ are untouched
    assert not (pipeline_copy / "results").exists() and not (pipeline_copy / "logs").exists()

    rows = summary(pipeline_copy)
    rules = {r["rule"] for r in rows}
    for rule in (
        "sample_tasks", "execute_stack", "gather_runs", "judge_runs", "tag_values",
        "aggregate_metrics", "test_factors", "blocked_tests", "plot_violins", "plot_pareto",
        "plot_top_values", "write_tables", "judge_agreement", "build_viewer",
    ):  # fmt: skip
        assert rule in rules, rule
    for row in rows:
        output = work / row["output_file"]
        if output.is_dir():  # the trace viewer's site
            assert (output / "index.html").is_file(), row["output_file"]
        else:
            assert output.is_file() and output.stat().st_size > 0, row["output_file"]
        assert row["status"] == "ok", row
        # every rule has a log, and its script really wrote it (mastif.logsetup)
        logs = [p for p in row["log-file(s)"].split(",") if p and p != "-"]
        assert logs, f"rule {row['rule']} has no log"
        for log in logs:
            text = (work / log).read_text()
            assert text.strip(), f"empty log {log}"
            assert "uncaught exception" not in text and "Traceback" not in text, log
    assert (work / "results/report.html").stat().st_size > 10_000
    # the trace viewer: the grid index and one page per run
    viewer = work / "results/viewer"
    assert 'window.__mastif_load("grid"' in (viewer / "data/grid.js").read_text()
    assert sorted(p.name for p in (viewer / "data/runs/0").iterdir()) == ["0.js", "1.js"]
    again = snakemake(*DOTEST_ARGS, "-n", cwd=pipeline_copy)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout + again.stderr

    runs = pl.read_parquet(work / "results/runs/scripted/standard/langgraph.parquet")
    assert runs.height == 2
    assert runs["status"].to_list() == ["ok", "ok"], runs["error_message"].to_list()
    assert (runs["prompt_tokens"] > 0).all() and (runs["completion_tokens"] > 0).all()
    for run in runs.iter_rows(named=True):
        assert [c["name"] for c in run["tool_calls"]] == ["web_search"]
        assert [n["node"] for n in run["node_outputs"]] == [
            "navigate", "observe", "interact", "report",
        ]  # fmt: skip
        assert run["final_answer"].startswith("I could not find")
    judged = pl.read_parquet(work / "results/judged/scripted/standard/langgraph.parquet")
    assert judged["TU"].to_list() == [0.7, 0.7] and judged["TCR"].to_list() == [0.3, 0.3]
    assert judged["judge_status"].to_list() == ["ok", "ok"]
    # the scripted server logged each of its requests: 5 per run, 1 per judgement
    server_logs = (work / "logs").rglob("*.server.log")
    requests = sum(t.count(" node=") for t in (p.read_text() for p in server_logs))
    assert requests == 2 * 5 + 2

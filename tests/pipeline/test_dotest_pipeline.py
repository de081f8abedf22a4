"""The .test smoke run: the whole DAG and the report on a scripted model (fast tier).

Runs exactly the command `.test/config.yaml` documents, in a temp copy of the workflow: one
stack (scripted model x standard x langgraph) on two sandbox tasks, the scripted model's
server started and stopped by the jobs themselves, the real embedding model for values.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
from pathlib import Path

import polars as pl

from tests.support.paths import REPO
from tests.support.pipeline import snakemake

#: the smoke test's command line after `snakemake` (as in .test/config.yaml)
DOTEST_ARGS = ["--cores", "2", "--directory", ".test", "--configfile", ".test/config.yaml"]
REPORT_ARGS = ["--report-after-run", "--report", "results/report.html"]


def summary(cwd: Path) -> list[dict[str, str]]:
    """`snakemake --summary`: one row per output file with its rule, log file(s) and status."""
    proc = snakemake(*DOTEST_ARGS, "--summary", cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout[proc.stdout.index("output_file") :]
    return list(csv.DictReader(io.StringIO(lines), delimiter="\t"))


def report_front_page(report: str) -> tuple[str, str]:
    """(HTML, text) of report.html's front page: Snakemake embeds workflow.rst, rendered to
    HTML, as a JSON string (``var workflow_desc = "...";``) in the report's script."""
    match = re.search(r"var workflow_desc = (\".*?\");\n", report)
    assert match, "no workflow_desc in the report"
    front = json.loads(match.group(1))
    text = html.unescape(re.sub(r"<[^>]+>", " ", front))
    return front, " ".join(text.split())


#: what a 2-task front page must not claim (issue 38): a p-value (p = 0.03, p < 0.001), a
#: star, a best level named ("best: x", "best level x"), a confidence interval; the sentence
#: saying why none is shown may name them
NO_CLAIMS = re.compile(
    r"\bp(-value)?\s*[=<≤]\s*\d|\*|\bbest( level| stack)?\s*[:=]|\d+\s*% CI|\bCI\b\s*[\[(]",
    re.IGNORECASE,
)


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
        "plot_top_values", "write_tables", "judge_agreement", "build_viewer", "judge_gate",
    ):  # fmt: skip
        assert rule in rules, rule
    for row in rows:
        output = work / row["output_file"]
        if output.is_dir():  # the trace viewer's site
            assert (output / "index.html").is_file(), row["output_file"]
        else:
            assert output.is_file() and output.stat().st_size > 0, row["output_file"]
        assert row["status"] == "ok", row
        # every rule has a log, and its script really wrote it (mastif.core.logsetup)
        logs = [p for p in row["log-file(s)"].split(",") if p and p != "-"]
        assert logs, f"rule {row['rule']} has no log"
        for log in logs:
            text = (work / log).read_text()
            assert text.strip(), f"empty log {log}"
            assert "uncaught exception" not in text and "Traceback" not in text, log
    assert (work / "results/report.html").stat().st_size > 10_000
    # the judge gate's verdict leads the report's front page, in bold: both runs failed their
    # check (one class: κ 0 or undefined by arithmetic) on 2 tasks (< judge.gate_min_tasks),
    # so the judge is not assessable, never validated and never "κ 0.00 < 0.4"
    gate = pl.read_csv(work / "results/tables/judge_gate.csv").row(0, named=True)
    assert gate["validated"] is False and gate["status"] == "not assessable"
    assert gate["verdict"].startswith("judge not assessable: the checks have one class (all 2")
    assert "2 checked tasks < judge.gate_min_tasks 15" in gate["verdict"]
    # and inside every judge-based table (a column, a line) and figure
    tcr = pl.read_csv(work / "results/tables/table2_task_completion.csv")
    assert set(tcr["judge_gate"]) == {"not assessable: the checks have one class"}
    md = (work / "results/tables/table8_ground_truth.md").read_text(encoding="utf-8")
    assert md.startswith(f"**Judge gate: {gate['verdict']}.**")
    for figure in ("violin_TCR", "pareto", "effects"):
        assert 'id="judge_gate"' in (work / f"results/plots/{figure}.svg").read_text(), figure
    assert 'id="judge_gate"' not in (work / "results/plots/violin_CT.svg").read_text()
    front, text = report_front_page((work / "results/report.html").read_text())
    bold = [
        " ".join(html.unescape(b).split())
        for b in re.findall(r"<strong>(.*?)</strong>", front, re.DOTALL)
    ]
    # the front page leads with the joint tests: their table and figure, then the gate
    assert text.startswith("Does a factor matter? The joint tests"), text[:300]
    assert bold[0].startswith("No joint test: 2 independent tasks < stats.min_n = 5"), bold
    assert "<th" in front and "adjusted p" in text and "why no test" in text
    assert '<img alt="each factor' in front and 'src="data:image/png;base64,' in front
    assert text.index("why no test") < text.index("The judge gate")
    assert bold[1] == f"Judge gate: {gate['verdict']}", bold
    # two tasks: no p-value, star, "best" or CI on the front page, and it says why, from the
    # tasks counted in the runs
    assert not NO_CLAIMS.search(text), NO_CLAIMS.search(text)
    assert bold[2].startswith("Small sample: 2 tasks counted < stats.min_n = 5"), bold
    assert bold[3].startswith("Intervals: 2 tasks counted < 15"), bold
    # one stack: no other to compare its answers with, said so
    assert bold[4].startswith("Identical outputs: 1 stack: no other stack"), bold
    # the violins' caption: no star legend when no star can be drawn (2 tasks < min_n)
    report_html = (work / "results/report.html").read_text()
    assert "No bracket and no star: fewer than 5 independent tasks" in report_html
    assert "Brackets mark pairs that Dunn" not in report_html
    for claim in ("p = 0.03", "p < 0.001", "***", "best: langgraph", "95% CI", "CI [0.1"):
        assert NO_CLAIMS.search(claim), claim  # the check would see a claim
    # the trace viewer: the grid index and one page per run
    viewer = work / "results/viewer"
    assert 'window.__mastif_load("grid"' in (viewer / "data/grid.js").read_text()
    assert sorted(p.name for p in (viewer / "data/runs/0").iterdir()) == ["0.js", "1.js"]
    assert (
        f'"judge_gate":{{"validated":false,"text":{json.dumps(gate["verdict"], ensure_ascii=False)}}}'
        in (viewer / "data/grid.js").read_text(encoding="utf-8")
    )
    stacks = pl.read_parquet(work / "results/metrics/stacks.parquet")
    # the scripted model answers both tasks alike: 1 distinct answer; no other stack to share
    # them with, so in no group
    answers = pl.read_parquet(work / "results/runs/scripted/standard/langgraph.parquet")
    assert answers["final_answer"].n_unique() == 1
    assert stacks.select("n_distinct_answers", "answer_group").rows() == [(1, None)]
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

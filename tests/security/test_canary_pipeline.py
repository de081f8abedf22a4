"""Issue 37: a canary key in the environment of a whole pipeline run reaches no output.

The run is the ``.test`` smoke run's shape (scripted model, one stack, the sandbox) with
all 15 tools, and a scripted model whose interact turn calls every tool with hostile
arguments: the sympy payload that read ``OPENAI_API_KEY`` before the fix, Python that
reaches for ``os.environ``, URLs to the metadata service, loopback in disguise and
``file:``, path traversal in names. The canary is in the environment of Snakemake and so
of every job. Afterwards no file under ``results/`` or ``logs/`` may hold it: Parquet is
read column by column (its pages are compressed, so a byte search would miss it), every
other file byte by byte. Before the fix the sympy call's result, and so the canary, was
in ``results/runs/*.parquet`` and the viewer's ``results/viewer/data/runs/*/*.js``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.security.payloads import read_key
from tests.support.pipeline import snakemake

pytestmark = pytest.mark.slow  # the whole DAG, Chromium included

CANARY = "sk-canary-" + secrets.token_hex(12)
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "MASTIF_TEST_SECRET")

#: every tool, each called with arguments meant to reach a key, a file or a private address
HOSTILE_CALLS: list[tuple[str, dict[str, object]]] = [
    ("sympy", {"expression": read_key("OPENAI_API_KEY")}),
    ("sympy", {"expression": read_key("OPENAI_API_KEY"), "operation": "evaluate"}),
    ("python_repl", {"code": "import os\nprint(os.environ)"}),
    ("python_repl", {"code": "print(().__class__.__base__.__subclasses__())"}),
    ("python_repl", {"code": "print(open('/proc/self/environ').read())"}),
    ("datetime", {"timezone": "../../../../proc/self/environ"}),
    ("json_parser", {"json_string": '{"a": 1}', "query": "__class__.__init__.__globals__"}),
    ("web_search", {"query": "${OPENAI_API_KEY} {{ env }} %(OPENAI_API_KEY)s", "max_results": 3}),
    ("web_browser", {"url": "file:///proc/self/environ"}),
    ("web_interaction", {"action": "fill", "target": "input", "value": "${OPENAI_API_KEY}"}),
    ("keyboard_interaction", {"keys": "Control+Shift+J", "text": "process.env"}),
    ("requests_get", {"url": "http://169.254.169.254/latest/meta-data/iam/"}),
    ("beautifulsoup_scraper", {"url": "http://[::ffff:0:7f00:1]/", "selector": "*"}),
    ("pdf_reader", {"url": "http://192.88.99.1/secret.pdf"}),
    ("wikipedia", {"query": "../../../../etc/passwd"}),
    ("arxiv", {"query": "all:* OR 1=1", "max_results": 2}),
    ("pubmed", {"query": "x%0d%0aX-Injected: 1", "max_results": 2}),
    ("youtube_transcript", {"video": "../../../../proc/self/environ"}),
]

TOOLS = sorted({name for name, _ in HOSTILE_CALLS})

CONFIG = {
    "experiment": "hostile",
    "models": {
        "scripted": {
            "provider": "scripted",
            "model": "scripted_model.yaml",
            "price": {"input_per_mtok": 0.1, "output_per_mtok": 0.4},
        }
    },
    "agent_models": ["scripted"],
    "judge": {"model": "scripted"},
    "protocols": ["standard"],
    "frameworks": ["langgraph"],
    "tasks": {"source": "sandbox", "sample_size": 1, "strata": ["domain"]},
    "generation": {"max_steps": 1, "max_tool_rounds": 1, "timeout_s": 120},
    "tools": TOOLS,
}

SCRIPT = {
    "rules": [
        {
            "when": {"node": "judge", "json": True},
            "reply": {
                "content": {
                    "TU_rationale": "Every tool was called; each refused or failed.",
                    "TU_score": 0.3,
                    "TA_rationale": "The calls had nothing to do with the task.",
                    "TA_score": 0.0,
                    "TCR_rationale": "The task was not done.",
                    "TCR_score": 0.0,
                }
            },
        },
        {"when": {"node": "navigate"}, "reply": {"content": "I will try every tool."}},
        {"when": {"node": "observe"}, "reply": {"content": "Nothing yet.\nCONTINUE"}},
        {
            "when": {"node": "interact", "tool_result": False},
            "reply": {"tool_calls": [{"name": n, "arguments": a} for n, a in HOSTILE_CALLS]},
        },
        {
            "when": {"node": "interact", "tool_result": True},
            "reply": {"content": "The tools answered."},
        },
        {"when": {"node": "report"}, "reply": {"content": "I could not do the task."}},
    ]
}


def _files_holding(root: Path, needle: str) -> list[str]:
    """Files under ``root`` whose content holds ``needle`` (Parquet read as data)."""
    found: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix == ".parquet":
            frame = pl.read_parquet(path)
            text = json.dumps(frame.to_dicts(), default=str)
        else:
            text = path.read_bytes().decode("utf-8", "replace")
        if needle in text:
            found.append(str(path.relative_to(root)))
    return found


def test_a_canary_key_reaches_no_result_or_log(pipeline_copy: Path) -> None:
    work = pipeline_copy / ".hostile"
    work.mkdir()
    (work / "config").symlink_to(pipeline_copy / "config")
    (work / "resources").symlink_to(pipeline_copy / "resources")
    (work / "config.yaml").write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    (work / "scripted_model.yaml").write_text(yaml.safe_dump(SCRIPT, sort_keys=False))
    env = {**os.environ, **dict.fromkeys(KEY_VARIABLES, CANARY)}
    proc = snakemake(
        "--cores", "2", "--directory", ".hostile", "--configfile", ".hostile/config.yaml",
        "--report-after-run", "--report", "results/report.html",
        cwd=pipeline_copy, env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    leaked = _files_holding(work / "results", CANARY) + _files_holding(work / "logs", CANARY)
    assert leaked == [], f"the canary key is in {leaked}"
    runs = pl.read_parquet(work / "results/runs/scripted/standard/langgraph.parquet")
    assert runs.height == 1
    calls = runs["tool_calls"][0].to_list()
    # every hostile call was made and came back as the tool's own failure, not a crash
    assert sorted(c["name"] for c in calls) == sorted(n for n, _ in HOSTILE_CALLS)
    sympy_calls = [c for c in calls if c["name"] == "sympy"]
    assert all(not c["ok"] for c in sympy_calls), sympy_calls
    repl_calls = [c for c in calls if c["name"] == "python_repl"]
    assert all(not c["ok"] for c in repl_calls), repl_calls

    # the scan is real: the key is found where it is planted
    (work / "results" / "planted.txt").write_text(CANARY)
    assert _files_holding(work / "results", CANARY) == ["planted.txt"]
    shutil.rmtree(work / ".snakemake", ignore_errors=True)

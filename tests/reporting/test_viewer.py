"""The trace viewer (mastif.reporting.viewer): the export on small frames, the site it writes, the
loopback server, and the page itself in real headless Chromium (Playwright)."""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from mastif.analysis.inference import gate_verdict
from mastif.cli import main as cli_main
from mastif.reporting.viewer import build_site
from mastif.reporting.viewer.export import grid_index, judge_gate, round_float, run_detail
from mastif.reporting.viewer.serve import LOOPBACK, viewer_server
from mastif.reporting.viewer.site import run_file
from tests.support.servers import Served
from tests.support.viewer_results import SyntheticTree, write_synthetic_results

CHROMIUM = "/usr/bin/chromium"


def read_jsonp(path: Path) -> tuple[str, Any]:
    """(key, data) of a data file ``window.__mastif_load(key,data);``."""
    text = path.read_text(encoding="utf-8").strip()
    assert text.startswith("window.__mastif_load(") and text.endswith(");")
    key, data = json.loads("[" + text[len("window.__mastif_load(") : -2] + "]")
    return key, data


# ---- export -------------------------------------------------------------------------------


def metrics_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "model": ["m1", "m1", "m2"],
            "protocol": ["standard"] * 3,
            "framework": ["langgraph"] * 3,
            "task_id": ["t2", "t1", "t9"],
            "repeat": [0, 0, 0],
            "status": ["ok", "timeout", "error"],
            "judge_status": ["ok", "judge_failed", None],
            "TCR": [0.7, None, None],
            "success": [True, None, False],
            "CT": [12.345678, float("nan"), 3.0],
            "V": [100, None, 0],
            "task_text": ["two", "one", "only in the runs"],
        }
    )


def test_grid_index_keeps_unknowns_null_and_points_runs_at_stacks_and_tasks() -> None:
    tasks = pl.DataFrame({"task_id": ["t1", "t2"], "confirmed_task": ["Task one", "Task two"]})
    grid = grid_index(metrics_frame(), tasks, title="exp")
    assert grid["n_runs"] == 3 and grid["title"] == "exp"
    assert grid["stacks"] == [
        {"model": "m1", "protocol": "standard", "framework": "langgraph"},
        {"model": "m2", "protocol": "standard", "framework": "langgraph"},
    ]
    # the task table's order first, a task it lacks after, labelled by the run's text
    assert [t["id"] for t in grid["tasks"]] == ["t1", "t2", "t9"]
    assert [t["text"] for t in grid["tasks"]] == ["Task one", "Task two", "only in the runs"]
    runs = grid["runs"]
    assert runs["stack"] == [0, 0, 1] and runs["task"] == [1, 0, 2]
    assert runs["TCR"] == [0.7, None, None]
    assert runs["success"] == [True, None, False]
    # NaN is unknown (null), 0 stays 0, floats are shortened to 4 significant digits
    assert runs["CT"] == [12.35, None, 3.0] and runs["V"] == [100.0, None, 0.0]
    # a metric the table lacks (an older table) is unknown for every run
    assert runs["cost_usd"] == [None, None, None]
    assert runs["judge_status"] == ["ok", "judge_failed", None]
    json.dumps(grid, allow_nan=False)  # valid JSON: no NaN anywhere


def test_judge_gate_is_the_gates_verdict_or_not_validated() -> None:
    # every check failed: κ 0 by arithmetic, the gate not assessable (never "κ 0.00 < 0.4")
    validity = pl.DataFrame(
        {"scope": ["pooled"], "n": [40], "n_tasks": [20], "n_check_success": [0],
         "n_check_failure": [40], "n_judge_success": [5], "n_judge_failure": [35],
         "kappa": [None], "min_kappa": [0.4]},
        schema_overrides={"kappa": pl.Float64},
    )  # fmt: skip
    gate = judge_gate(validity)
    assert gate == {"validated": False, "text": gate_verdict(validity).text}
    assert gate["text"].startswith("judge not assessable: the checks have one class (all 40")
    assert judge_gate(None)["validated"] is False
    assert "no judge-validity result" in judge_gate(None)["text"]


def test_round_float() -> None:
    assert round_float(0.000123456) == 0.0001235
    assert round_float(98765.4) == 98770.0
    assert round_float(0.0) == 0.0
    assert round_float(None) is None and round_float(math.inf) is None


def test_run_detail_gives_each_step_its_values_and_parses_the_sandbox_state() -> None:
    run = {
        "run_id": "a", "task_id": "t1", "task_text": "Buy tea", "status": "ok",
        "final_answer": "Done", "prompt_tokens": None,
        "node_outputs": [
            {"node": "observe", "step": 0, "output_key": "obs", "text": "I see tea"},
            {"node": "act", "step": 1, "output_key": "act", "text": "I add tea"},
            {"node": "report", "step": 2, "output_key": "final_answer", "text": "Done"},
        ],
        "tool_calls": [{"name": "shop_add_to_cart", "arguments": '{"sku": 1}', "ok": None,
                        "duration_s": float("nan")}],
        "llm_calls": [], "web_state": '{"cart": ["tea"]}', "success": None,
        "protocol_seconds": None,
    }  # fmt: skip
    values = {"step_values": [["care"], []], "output_values": ["honesty"], "IVS": None}
    task = {"confirmed_task": "Buy a tea", "check": '{"cart_contains": "tea"}', "start_url": "/"}
    detail = run_detail(run, None, values, task)
    assert [o["values"] for o in detail["node_outputs"]] == [["care"], [], None]
    assert [o["is_answer"] for o in detail["node_outputs"]] == [False, False, True]
    assert detail["check"]["web_state"] == {"cart": ["tea"]}
    assert detail["check"]["success"] is None  # no check: unknown, not failed
    assert detail["task"]["text"] == "Buy a tea"
    assert detail["task"]["check"] == {"cart_contains": "tea"}
    assert detail["judge"] is None  # not judged
    # the tool call as recorded: arguments verbatim, unknown outcome and NaN time null
    assert detail["tool_calls"] == [
        {"name": "shop_add_to_cart", "arguments": '{"sku": 1}', "ok": None, "duration_s": None}
    ]
    assert detail["run"]["prompt_tokens"] is None and detail["values"]["IVS"] is None
    json.dumps(detail, allow_nan=False)


def test_run_detail_without_values_marks_no_node_output_as_the_answer() -> None:
    run = {"run_id": "a", "node_outputs": [{"node": "n", "step": 0, "text": "x"}]}
    detail = run_detail(run, {"judge_status": "judge_failed", "TCR": None}, None, None)
    assert detail["node_outputs"][0]["values"] is None
    assert detail["node_outputs"][0]["is_answer"] is False
    assert detail["values"] is None and detail["judge"]["TCR"] is None
    assert detail["task"]["text"] is None  # neither the table nor the run has it


# ---- the site -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> SyntheticTree:
    """2 models x 2 protocols x 2 frameworks on 6 tasks, 2 repeats: 96 runs."""
    root = tmp_path_factory.mktemp("viewer")
    return write_synthetic_results(root, ["m1", "m2"], ["standard", "mcp"],
                                   ["langgraph", "crewai"], n_tasks=6, repeats=2)  # fmt: skip


@pytest.fixture(scope="module")
def site(tree: SyntheticTree) -> Path:
    out = tree.root / "results" / "viewer"
    summary = build_site(out, metrics_runs=tree.metrics_runs, tasks=tree.tasks, runs=tree.runs,
                         judged=tree.judged, values=tree.values, title="synthetic",
                         judge_validity=tree.judge_validity)  # fmt: skip
    assert summary.n_runs == summary.n_run_files == 96 and summary.n_without_detail == 0
    return out


def run_number(site: Path, **where: Any) -> tuple[int, dict]:
    """The number and grid entry of the first run matching ``where`` (grid columns)."""
    _, grid = read_jsonp(site / "data/grid.js")
    runs = grid["runs"]
    for n in range(grid["n_runs"]):
        if all(runs[k][n] == v for k, v in where.items()):
            return n, {k: runs[k][n] for k in runs}
    raise AssertionError(f"no run with {where}")


def test_site_has_the_page_a_grid_and_one_small_file_per_run(site: Path, tree) -> None:
    for name in ("index.html", "viewer.js", "grid-page.js", "run.js", "viewer.css"):
        assert (site / name).is_file()
    key, grid = read_jsonp(site / "data/grid.js")
    assert key == "grid" and grid["n_runs"] == 96 and len(grid["stacks"]) == 8
    assert len(grid["tasks"]) == 6 and grid["runs_per_dir"] > 0
    # the judge gate's verdict of the experiment's judge_validity.parquet
    verdict = gate_verdict(pl.read_parquet(tree.judge_validity))
    assert grid["judge_gate"] == {"validated": verdict.validated, "text": verdict.text}
    runs = pl.concat([pl.read_parquet(p) for p in tree.runs])
    # the grid's run n is the metrics table's row n; its page holds that run as recorded
    run_ids = pl.read_parquet(tree.metrics_runs)["run_id"].to_list()
    assert "run_id" not in grid["runs"]  # the index stays small: ids are on the run pages
    for n, run_id in enumerate(run_ids):
        key, detail = read_jsonp(site / run_file(n))
        assert key == f"run:{n}" and detail["run"]["run_id"] == run_id
        row = runs.row(by_predicate=pl.col("run_id") == run_id, named=True)
        assert [c["arguments"] for c in detail["tool_calls"]] == [
            c["arguments"] for c in row["tool_calls"]
        ]
        assert len(detail["llm_calls"]) == len(row["llm_calls"])
    # a rebuild leaves no stale file behind
    stale = site / "data/runs/0/99999.js"
    stale.write_text("stale")
    build_site(site, metrics_runs=tree.metrics_runs, tasks=tree.tasks, runs=tree.runs,
               judged=tree.judged, values=tree.values, title="synthetic",
               judge_validity=tree.judge_validity)  # fmt: skip
    assert not stale.exists()


def test_view_serves_the_site_on_loopback_only(site: Path) -> None:
    server = viewer_server(site, port=0)
    host, port = server.server_address[:2]
    assert host == LOOPBACK
    with Served(server):
        with urllib.request.urlopen(f"http://{host}:{port}/data/grid.js", timeout=5) as resp:
            assert resp.read().startswith(b"window.__mastif_load(")


def test_mastif_view_refuses_a_directory_without_a_site(tmp_path: Path, capsys) -> None:
    assert cli_main(["view", str(tmp_path), "--port", "0"]) == 2
    assert "build the viewer first" in capsys.readouterr().err


# ---- in Chromium --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def page(site: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page
        browser.close()
    assert not errors, errors


def open_grid(page: Any, site: Path) -> None:
    """A fresh grid page: a test must not start on the state another test left behind."""
    # from the same document, going to "#/" is only a hash change: the router redraws later
    # and the filters of the test before remain
    page.goto("about:blank")
    page.goto((site / "index.html").as_uri() + "#/")
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)


def drawn(page: Any) -> int:
    """Run squares the grid's canvas shows (filtered-out runs are outlines, not counted)."""
    if page.locator("#cells").count() == 0:
        return 0
    return int(page.get_attribute("#cells", "data-drawn"))


def click_run(page: Any, n: int) -> None:
    """Click run n's square on the canvas, as a user would."""
    point = page.evaluate(f"mastif.runSquare({n})")
    assert point is not None, f"run {n} is not in the grid"
    page.mouse.click(point["x"], point["y"])


@pytest.mark.browser
def test_grid_renders_every_run_from_disk(page: Any, site: Path) -> None:
    open_grid(page, site)
    assert drawn(page) == 96
    assert page.get_attribute("#counts", "data-runs") == "96"
    assert page.locator("#grid .row").count() == 6
    # the counts bar shows the unjudged and failed runs, not only the good ones
    _, grid = read_jsonp(site / "data/grid.js")
    n_failed = grid["runs"]["judge_status"].count("judge_failed")
    chip = page.locator(".counts .chip", has_text="judge failed")
    assert chip.locator("b").inner_text() == str(n_failed)


@pytest.mark.browser
def test_a_filter_narrows_the_grid(page: Any, site: Path) -> None:
    open_grid(page, site)
    page.uncheck("input[data-facet='model'][value='m2']")
    assert drawn(page) == 48
    assert page.get_attribute("#counts", "data-runs") == "48"
    page.uncheck("input[data-facet='status'][value='ok']")
    _, grid = read_jsonp(site / "data/grid.js")
    runs = grid["runs"]
    expected = sum(
        1
        for s, status in zip(runs["stack"], runs["status"], strict=True)
        if grid["stacks"][s]["model"] == "m1" and status != "ok"
    )
    assert 0 < expected < 48
    assert drawn(page) == expected
    page.fill("#search", "no such task")
    assert drawn(page) == 0 and page.locator("#grid .empty").is_visible()
    page.click("#reset")
    assert drawn(page) == 96
    page.fill("#search", "task-0003")
    assert page.locator("#grid .row").count() == 1
    assert drawn(page) == 8 * 2  # every stack, both repeats
    page.click("#reset")
    assert drawn(page) == 96


@pytest.mark.browser
def test_a_run_page_shows_the_runs_tool_calls_and_unknown_tokens(page: Any, site: Path) -> None:
    # a run of repeat 1 (whose second LLM call lacks its prompt tokens) with tool calls and a
    # check
    _, grid = read_jsonp(site / "data/grid.js")
    for n in range(grid["n_runs"]):
        _, detail = read_jsonp(site / run_file(n))
        checked = detail["check"]["success"] is not None
        if grid["runs"]["repeat"][n] == 1 and detail["tool_calls"] and checked:
            break
    else:
        raise AssertionError("no run of repeat 1 with tool calls and a check")
    open_grid(page, site)
    click_run(page, n)
    page.wait_for_selector(f"article.run-page[data-run-id='{detail['run']['run_id']}']")
    # the headline's check is the run's check
    check = {True: "yes", False: "no"}[detail["check"]["success"]]
    assert page.locator(".headline .chip", has_text="check").locator("b").inner_text() == check
    names = page.locator(".tool .toolname").all_inner_texts()
    assert names == [c["name"] for c in detail["tool_calls"]]
    first_args = json.loads(detail["tool_calls"][0]["arguments"])["query"]
    assert first_args in page.locator(".tool pre.args").first.inner_text()
    # repeat 1's second LLM call has no prompt token count: shown as unknown, not 0
    assert detail["llm_calls"][1]["prompt_tokens"] is None
    card = page.locator("section.card", has=page.locator("h2", has_text="LLM calls"))
    assert card.locator("tbody tr").nth(1).locator("td").nth(4).inner_text() == "—"


@pytest.mark.browser
def test_two_stacks_side_by_side_on_the_same_task(page: Any, site: Path) -> None:
    a, entry = run_number(site, stack=0, repeat=0)
    b, _ = run_number(site, stack=5, task=entry["task"], repeat=0)
    open_grid(page, site)
    page.goto((site / "index.html").as_uri() + f"#/run/{a}")
    page.select_option("#compare-with", str(b))
    page.wait_for_selector(".compare article.run-page >> nth=1")
    ids = page.locator(".compare article.run-page").evaluate_all(
        "els => els.map(e => e.dataset.runId)"
    )
    assert ids == [read_jsonp(site / run_file(n))[1]["run"]["run_id"] for n in (a, b)]


@pytest.mark.browser
def test_sorting_by_a_metric_puts_the_best_task_first(page: Any, site: Path) -> None:
    _, grid = read_jsonp(site / "data/grid.js")
    runs = grid["runs"]
    scores: dict[int, list[float]] = {}
    for t, tcr in zip(runs["task"], runs["TCR"], strict=True):
        if tcr is not None:  # unknown is left out of the mean, not counted as 0
            scores.setdefault(t, []).append(tcr)
    means = {t: sum(v) / len(v) for t, v in scores.items()}
    order = sorted(means, key=lambda t: (-means[t], t))
    open_grid(page, site)
    from playwright.sync_api import expect

    first_label = page.locator("#grid .labels .row b").first
    page.select_option("#sort", "TCR")
    # the grid redraws on the next frame: wait for it (a loaded machine lags), then compare
    expect(first_label).to_have_text(grid["tasks"][order[0]]["id"])
    page.uncheck("#desc")  # lowest first
    lowest = min(means, key=lambda t: (means[t], t))  # ties: task order, as descending
    expect(first_label).to_have_text(grid["tasks"][lowest]["id"])


@pytest.mark.browser
def test_the_served_viewer_loads_its_data_too(page: Any, site: Path) -> None:
    server = viewer_server(site, port=0)
    host, port = server.server_address[:2]
    with Served(server):
        page.goto(f"http://{host}:{port}/index.html#/")
        page.wait_for_selector("body[data-ready='1']", timeout=10_000)
        assert drawn(page) == 96
        click_run(page, 3)
        page.wait_for_selector("article.run-page")


@pytest.mark.browser
def test_the_judge_gates_verdict_is_on_the_grid_and_every_run_page(
    page: Any, site: Path, tree: SyntheticTree
) -> None:
    _, grid = read_jsonp(site / "data/grid.js")
    text = grid["judge_gate"]["text"]
    # 5 checked tasks, below judge.gate_min_tasks: not assessable, whatever κ
    assert text.startswith("judge not assessable: 5 checked tasks < judge.gate_min_tasks")
    open_grid(page, site)
    banner = page.locator("#gate")
    assert banner.is_visible() and banner.inner_text() == text
    assert banner.get_attribute("data-validated") == "0"
    # a run page (judged) shows it above the run and in its judge card
    n, _ = run_number(site, judge_status="ok")
    click_run(page, n)
    page.wait_for_selector("article.run-page")
    assert page.locator("#gate").is_visible() and page.locator("#gate").inner_text() == text
    assert page.locator(".gate-note").inner_text() == "judge gate: " + text
    # a viewer built without a validity table says not validated, never nothing
    bare = tree.root / "results" / "viewer-bare"
    build_site(bare, metrics_runs=tree.metrics_runs, tasks=tree.tasks, runs=tree.runs,
               judged=tree.judged, values=tree.values)  # fmt: skip
    open_grid(page, bare)
    assert "judge not assessable: no judge-validity result" in page.locator("#gate").inner_text()

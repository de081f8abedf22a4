"""The trace viewer at the paper's scale: how long the grid takes to open and a filter to act.

Writes a synthetic results tree of 3 models x 3 protocols x 4 frameworks x 300 tasks (10,800
runs; tests/support/viewer_results.py: the workflow's schemas, metrics by mastif's run_metrics),
builds the viewer (mastif.reporting.viewer.build_site), opens it from disk (file://) in headless
Chromium (Playwright, Debian's /usr/bin/chromium) and prints, as the median of ``--loads``
fresh page loads:

- open: from navigation start to the grid drawn (every cell in the DOM, after the next
  paint), by the page's own clock (performance.now(), 0 at navigation start);
- each filter, colour and sort change: from the click to the next paint (two animation
  frames), in the page;
- a run page: from the click on a cell to its page drawn (its one data file loaded).

Targets (issue 21): open < 2 s, a filter < 200 ms. With ``--screenshots DIR`` it also saves
DIR/viewer-grid.png and DIR/viewer-run.png (the docs' pictures).

    PYTHONPATH=src:. .venv/bin/python bench/viewer_scale.py [--tasks 300] [--loads 3]
        [--screenshots docs] [--keep DIR | --site DIR/results/viewer]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _paths import REPO  # puts the checkout on sys.path: tests.support

sys.path.insert(0, str(REPO / "src"))

from tests.support.viewer_results import write_synthetic_results  # noqa: E402

from mastif.reporting.viewer import build_site  # noqa: E402

MODELS = ["gpt-4o", "claude-3.5", "llama-3.1-70b"]
PROTOCOLS = ["standard", "mcp", "a2a"]
FRAMEWORKS = ["langgraph", "crewai", "semantic_kernel", "llamaindex"]
CHROMIUM = "/usr/bin/chromium"

#: in the page: act, then wait for the paint after it; the milliseconds between
TIMED_ACTION = """async (action) => {
  const t0 = performance.now();
  action.kind === "click" ? document.querySelector(action.selector).click()
    : (() => { const el = document.querySelector(action.selector); el.value = action.value;
               el.dispatchEvent(new Event(action.kind, {bubbles: true})); })();
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0;
}"""

ACTIONS = [
    ("filter: hide a model", {"kind": "click", "selector": "input[data-facet='model']"}),
    ("filter: hide status ok", {"kind": "click", "selector": "input[data-facet='status'][value='ok']"}),
    ("filter: show everything", {"kind": "click", "selector": "#reset"}),
    ("colour by judge TCR", {"kind": "change", "selector": "#colour", "value": "TCR"}),
    ("sort by mean wall seconds", {"kind": "change", "selector": "#sort", "value": "CT"}),
    ("filter: task search", {"kind": "input", "selector": "#search", "value": "task-01"}),
]  # fmt: skip


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(site: Path, loads: int, screenshots: Path | None) -> None:
    from playwright.sync_api import sync_playwright

    url = (site / "index.html").as_uri()
    opens: list[float] = []
    actions: dict[str, list[float]] = {name: [] for name, _ in ACTIONS}
    run_pages: list[float] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        for _ in range(loads):
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            page.goto(url + "#/")
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            opened = page.evaluate(
                "new Promise(r => requestAnimationFrame(() => requestAnimationFrame("
                "() => r(performance.now()))))"
            )
            opens.append(opened)
            n_cells = int(page.get_attribute("#cells", "data-drawn"))
            for name, action in ACTIONS:
                actions[name].append(page.evaluate(TIMED_ACTION, action))
            page.evaluate("document.querySelector('#reset').click()")
            point = page.evaluate("mastif.runSquare(40)")
            started = page.evaluate("performance.now()")
            page.mouse.click(point["x"], point["y"])
            page.wait_for_selector("article.run-page")
            run_pages.append(page.evaluate("performance.now()") - started)
            page.close()
        if screenshots is not None:
            shoot(browser, url, screenshots)
        browser.close()
    print(f"grid cells drawn: {n_cells:,}")
    print(f"open (navigation start -> grid painted), median of {loads}: "
          f"{statistics.median(opens):.0f} ms  (all: {', '.join(f'{v:.0f}' for v in opens)})")  # fmt: skip
    for name, values in actions.items():
        print(f"{name:32s} median {statistics.median(values):6.1f} ms  max {max(values):6.1f} ms")
    print(f"run page (click -> drawn), median: {statistics.median(run_pages):.0f} ms")


def shoot(browser, url: str, out: Path) -> None:  # type: ignore[no-untyped-def]
    """The docs' pictures: the grid coloured by TCR, and a run page."""
    out.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1500, "height": 950})
    page.goto(url + "#/")
    page.wait_for_selector("body[data-ready='1']", timeout=60_000)
    page.select_option("#colour", "TCR")
    page.screenshot(path=str(out / "viewer-grid.png"))
    # a completed run with a few tool calls shows the most
    n = page.evaluate(
        "mastif.grid.runs.n_tool_calls.findIndex((v, i) => v >= 3 && mastif.grid.runs.status[i] === 'ok')"
    )
    point = page.evaluate(f"mastif.runSquare({n})")
    page.mouse.click(point["x"], point["y"])
    page.wait_for_selector("article.run-page")
    page.set_viewport_size({"width": 1500, "height": 2200})
    page.screenshot(path=str(out / "viewer-run.png"), full_page=False)
    page.close()
    print(f"screenshots: {out / 'viewer-grid.png'}, {out / 'viewer-run.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--screenshots", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="write the tree here, keep it")
    parser.add_argument("--site", type=Path, default=None,
                        help="measure this built site only (e.g. DIR/results/viewer of --keep DIR)")  # fmt: skip
    args = parser.parse_args()
    if args.site is not None:
        measure(args.site, args.loads, args.screenshots)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        t0 = time.perf_counter()
        tree = write_synthetic_results(root, MODELS, PROTOCOLS, FRAMEWORKS, args.tasks,
                                       repeats=args.repeats)  # fmt: skip
        t1 = time.perf_counter()
        site = root / "results" / "viewer"
        summary = build_site(site, metrics_runs=tree.metrics_runs, tasks=tree.tasks,
                             runs=tree.runs, judged=tree.judged, values=tree.values,
                             title="synthetic paper-scale experiment")  # fmt: skip
        t2 = time.perf_counter()
        grid_kib = (site / "data/grid.js").stat().st_size / 1024
        run_files = list((site / "data/runs").rglob("*.js"))
        sizes = sorted(p.stat().st_size for p in run_files)
        print(f"runs: {summary.n_runs:,} ({len(MODELS)} models x {len(PROTOCOLS)} protocols x "
              f"{len(FRAMEWORKS)} frameworks x {args.tasks} tasks x {args.repeats} repeat(s))")  # fmt: skip
        print(f"synthetic results written in {t1 - t0:.1f} s; site built in {t2 - t1:.1f} s "
              f"({du(site) / 2**20:.1f} MiB)")  # fmt: skip
        print(f"grid index: {grid_kib:.0f} KiB; run files: {len(run_files):,}, median "
              f"{sizes[len(sizes) // 2] / 1024:.1f} KiB, largest {sizes[-1] / 1024:.1f} KiB")  # fmt: skip
        measure(site, args.loads, args.screenshots)


if __name__ == "__main__":
    main()

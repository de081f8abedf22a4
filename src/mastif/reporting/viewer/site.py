"""Write the trace viewer's static site: the page, its script and style, and the data.

Layout of ``out_dir``::

    index.html, viewer.js, grid-page.js,  the page (this package's assets)
    run.js, viewer.css
    data/grid.js                          the grid index (export.grid_index)
    data/runs/{n // RUNS_PER_DIR}/{n}.js  run n's detail (export.run_detail)

Data files are JavaScript, each one call ``window.__mastif_load(key, data)``, not JSON:
a page opened from disk (file://) may not ``fetch()`` in Chromium, but it may load a
script, so the page injects a ``<script>`` per file it needs and works from disk and served
alike. A run page loads its one small file, so the site stays fast at any number of runs.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from mastif.reporting.viewer.export import grid_index, judge_gate, run_detail

log = logging.getLogger(__name__)

ASSETS = ("index.html", "viewer.js", "grid-page.js", "run.js", "viewer.css")
#: run files per directory (a directory of 10,800 files is slow to list on some systems)
RUNS_PER_DIR = 500
GRID_FILE = "data/grid.js"


@dataclass(frozen=True)
class SiteSummary:
    """What :func:`build_site` wrote."""

    out_dir: Path
    n_runs: int
    n_run_files: int
    n_without_detail: int  # runs of the metrics table missing from every runs table


def run_file(n: int) -> str:
    """The path of run number ``n``'s detail file, relative to the site (viewer.js agrees)."""
    return f"data/runs/{n // RUNS_PER_DIR}/{n}.js"


def jsonp(key: str, data: Any) -> str:
    """A data file's text: one call of the page's loader with ``key`` and ``data``."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return f"window.__mastif_load({json.dumps(key)},{payload});\n"


def copy_assets(out_dir: Path) -> None:
    """The page, script and style from this package into ``out_dir``."""
    assets = resources.files("mastif.reporting.viewer") / "assets"
    for name in ASSETS:
        (out_dir / name).write_bytes((assets / name).read_bytes())


def rows_by_run_id(paths: Sequence[Path | str]) -> dict[str, dict[str, Any]]:
    """Every row of the Parquet files at ``paths`` (judged or values tables), by run id."""
    rows: dict[str, dict[str, Any]] = {}
    for path in paths:
        for row in pl.read_parquet(path).iter_rows(named=True):
            rows[row["run_id"]] = row
    return rows


def build_site(
    out_dir: Path | str,
    *,
    metrics_runs: Path | str,
    tasks: Path | str,
    runs: Sequence[Path | str],
    judged: Sequence[Path | str],
    values: Sequence[Path | str],
    title: str | None = None,
    judge_validity: Path | str | None = None,
) -> SiteSummary:
    """Write the viewer of an experiment's results into ``out_dir`` (see the module doc).

    ``metrics_runs`` (results/metrics/runs.parquet) gives the grid; ``runs``, ``judged``
    and ``values`` are every stack's tables, read one runs file at a time so memory holds
    one stack's traces. Data files from an earlier build are removed first.
    ``judge_validity`` (results/stats/judge_validity.parquet) gives the judge gate's verdict
    the page shows above the grid and every run (``grid["judge_gate"]``); without it the
    verdict is "not assessable: no judge-validity result" (never validated).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "data", ignore_errors=True)
    (out / "data" / "runs").mkdir(parents=True)
    copy_assets(out)

    metrics = pl.read_parquet(metrics_runs)
    task_table = pl.read_parquet(tasks)
    # the runs' own task texts label a task missing from the task table
    texts = [pl.read_parquet(p, columns=["task_id", "task_text"]) for p in runs]
    texts_by_task = pl.concat(texts).unique("task_id") if texts else None
    if texts_by_task is not None:
        metrics = metrics.join(texts_by_task, on="task_id", how="left")
    grid = grid_index(metrics, task_table, title=title)
    grid["runs_per_dir"] = RUNS_PER_DIR
    validity = pl.read_parquet(judge_validity) if judge_validity is not None else None
    grid["judge_gate"] = judge_gate(validity)
    (out / GRID_FILE).write_text(jsonp("grid", grid), encoding="utf-8")

    # the grid's run n is metrics row n
    number = {run_id: n for n, run_id in enumerate(metrics["run_id"].to_list())}
    judged_rows = rows_by_run_id(judged)
    values_rows = rows_by_run_id(values)
    task_rows = {r["task_id"]: r for r in task_table.to_dicts()}
    written = 0
    for path in runs:
        for run in pl.read_parquet(path).iter_rows(named=True):
            n = number.get(run["run_id"])
            if n is None:  # not in the metrics table: the grid cannot reach it
                log.warning("run %s is not in %s; no page written", run["run_id"], metrics_runs)
                continue
            detail = run_detail(
                run,
                judged_rows.get(run["run_id"]),
                values_rows.get(run["run_id"]),
                task_rows.get(run["task_id"]),
            )
            target = out / run_file(n)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(jsonp(f"run:{n}", detail), encoding="utf-8")
            written += 1
    summary = SiteSummary(out, len(number), written, len(number) - written)
    log.info("viewer: %d runs, %d run pages in %s", summary.n_runs, written, out)
    return summary

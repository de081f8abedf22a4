"""The report's front page: what the report leads with, as reStructuredText.

``results/report/front_page.rst`` (:data:`mastif.core.results.FRONT_PAGE`), included at the
top of ``workflow/report/workflow.rst``. In this order:

1. the joint test of each factor and interaction per metric (``mixed_joint``: Hotelling's
   T² on the tasks' contrasts, the one test valid for the crossed, task-blocked design), as
   a table;
2. the figure of its effect sizes (:func:`mastif.reporting.plots_joint.plot_joint_effects`),
   embedded as a data URI so the single-file report carries it;
3. the judge gate's verdict (:func:`mastif.analysis.inference.gate_verdict`);
4. the sample: the independent tasks the runs hold (counted, not the configured sample
   size), and what that rules out: no p-value, star or best level below ``stats.min_n``,
   no interval below :data:`mastif.analysis.inference.MIN_TASKS_FOR_CI`.
"""

from __future__ import annotations

import base64
from pathlib import Path

import polars as pl

from mastif.analysis.inference import MIN_TASKS_FOR_CI, small_sample_reason
from mastif.reporting.report_inference import fmt_num, fmt_p, fmt_p_adjusted, mixed_joint_table


def _escape(text: str) -> str:
    """Text safe inside an RST table cell: no markup characters with a meaning there."""
    out = str(text).replace("\\", "\\\\")
    for ch in "*`|_":
        out = out.replace(ch, "\\" + ch)
    return out.replace("\n", " ")


def _list_table(header: list[str], rows: list[list[str]]) -> str:
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append("   * - " + _escape(row[0]))
        lines.extend("     - " + _escape(cell) for cell in row[1:])
    return "\n".join(lines) + "\n"


def _why(row: dict, small_sample: str | None) -> str:
    """Why a joint test has no p: the small sample for a term's row, else the row's note."""
    if row["p_value"] is not None:
        return ""
    if small_sample is not None and row["term"] is not None:
        return small_sample
    return (row["note"] or "").split(";")[0]


def joint_rows(joint: pl.DataFrame, alpha: float, small_sample: str | None) -> list[list[str]]:
    """metric, term, F(df1, df2), p, adjusted p, D, why no test — one row per joint test;
    ``small_sample`` is the why of every row when the experiment has too few tasks."""
    rows = []
    for r in joint.iter_rows(named=True):
        df, n = r["df"], r["n_tasks"]
        f = (
            f"F({df}, {n - df}) = {fmt_num(r['statistic'], 2)}"
            if r["statistic"] is not None and df is not None and n is not None
            else "—"
        )
        rows.append(
            [
                r["metric"] or "—",
                r["term"] or "—",
                f,
                fmt_p(r["p_value"]),
                fmt_p_adjusted(r["p_adjusted"], alpha),
                fmt_num(r["effect"], 2),
                _why(r, small_sample),
            ]
        )
    return rows


def front_page(
    joint: pl.DataFrame,
    figure_png: Path | None,
    gate_text: str,
    n_tasks: int,
    *,
    min_n: int,
    alpha: float,
    family_adjust: str,
) -> str:
    """The front page's reStructuredText (see the module docstring)."""
    table = mixed_joint_table(joint, n_tasks=n_tasks, min_n=min_n)
    parts: list[str] = [
        "Does a factor matter? The joint tests",
        "=====================================",
        "",
        "One test per factor and interaction and per metric: Hotelling's T² on the tasks' "
        "contrasts of the stacks' cell means (F with its df; the task is the unit, so the "
        "test holds its false-positive rate with a task × factor interaction, "
        "docs/data.md). p adjusted within each metric by "
        f"{family_adjust}; (n.s.) = adjusted p not below α = {alpha:g}. D is the effect "
        "size: the Mahalanobis length of the mean contrast (Cohen's d_z for one df). Table 6 "
        "names a best level only where its factor is significant here and the level differs "
        "from every other after adjustment.",
        "",
    ]
    reason = small_sample_reason(n_tasks, min_n)
    short = None if reason is None else f"{n_tasks} tasks < stats.min_n {min_n}"
    if reason is not None:
        parts += [
            f"**No joint test: {n_tasks} independent task{'' if n_tasks == 1 else 's'} < "
            f"stats.min_n = {min_n} (repeats of a task and the stacks' runs of it are not "
            "independent).**",
            "",
        ]
    header = ["metric", "term", "F", "p", "adjusted p", "D", "why no test"]
    parts += [_list_table(header, joint_rows(table, alpha, short)), ""]
    if figure_png is not None and Path(figure_png).is_file():
        data = base64.b64encode(Path(figure_png).read_bytes()).decode("ascii")
        # the URI over lines of 76 (docutils joins them; a line may not exceed 10,000)
        lines = [data[i : i + 76] for i in range(0, len(data), 76)]
        parts += [
            ".. image:: data:image/png;base64,",
            *(f"   {line}" for line in lines),
            "   :alt: each factor's levels per metric, with the factor's joint test",
            "   :width: 100%",
            "",
        ]
    parts += [
        "The judge gate",
        "==============",
        "",
        f"**Judge gate: {_escape(gate_text)}**",
        "",
        "The sample",
        "==========",
        "",
        f"The runs hold {n_tasks} independent task{'' if n_tasks == 1 else 's'} "
        "(counted in the runs; repeats of a task and the stacks' runs of it are not "
        "independent).",
        "",
    ]
    if reason is not None:
        parts += [
            f"**Small sample: {n_tasks} tasks counted < stats.min_n = {min_n}. No p-value, "
            "significance star or best level is shown in this report.**",
            "",
        ]
    if n_tasks < MIN_TASKS_FOR_CI:
        parts += [
            f"**Intervals: {n_tasks} tasks counted < {MIN_TASKS_FOR_CI}, too few for an interval over "
            "the tasks to cover what it claims (bench/ci_coverage.py): means are shown "
            "without one (mastif.analysis.inference.MIN_TASKS_FOR_CI).**",
            "",
        ]
    return "\n".join(parts)


def write_front_page(text: str, path: Path) -> None:
    """Write ``text`` to ``path`` whole or not at all (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)

"""The paper's Tables 2–6 (plus a table of the per-section test sentences, and mastif's own
Table 7 of protocol cost, not in the seed paper) from the metrics and stats Parquet of
``docs/data.md``.

:func:`paper_tables` builds each table as a DataFrame of raw numbers (what the CSV holds);
:func:`write_tables` renders the same frames to Markdown with the paper's number formats. The
rendering is driven by column names, so every table shares one formatter:

- a column ``X`` with a companion ``X_std`` becomes one cell ``"mean (σ)"`` (:func:`fmt_mean_sd`);
- CT/V columns and the protocol cost counts, KiB and model seconds get 1 decimal, mean ranks
  2, other floats 3 (scores; the protocol's seconds and share, which are often small);
- ``p_value`` is written as ``< 0.001`` or with 3 decimals, ``p_adjusted`` likewise with
  "(n.s.)" when it is not below ``stats.alpha``; nulls as an em dash.

The tables that draw inferences (Table 6, the tests, the mixed models' joint tests; their
p-value and small-sample rules) are built in :mod:`mastif.reporting.report_inference`.

This module only reads the metrics and stats tables; of their writers it imports only the
joint tests' schema (through :mod:`mastif.reporting.report_inference`).
The versions table (:func:`versions_table`) is read from the runs files' provenance columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from mastif.analysis.mixed_joint import (
    JOINT_LEVELS_SCHEMA,
    JOINT_PAIRS_SCHEMA,
    MIXED_JOINT_SCHEMA,
)
from mastif.core.provenance import PACKAGES, PROVENANCE_COLUMNS, version_column
from mastif.reporting.report_inference import (
    ALPHA,
    BEST_METRICS,
    DASH,
    FACTORS,
    METRIC_ORDER,
    TEST_NAMES,
    _missing,
    _reason,
    best_stacks,
    fmt_num,
    fmt_p,
    fmt_p_adjusted,
    kruskal_summary,
    mixed_joint_table,
)
from mastif.reporting.report_inference import CAPTIONS as INFERENCE_CAPTIONS

__all__ = [
    "ALPHA",
    "BEST_METRICS",
    "METRIC_ORDER",
    "TEST_NAMES",
    "best_stacks",
    "fmt_p",
    "fmt_p_adjusted",
    "kruskal_summary",
    "mixed_joint_table",
    "paper_tables",
    "power_table",
    "run_versions",
    "to_markdown",
    "versions_table",
    "write_tables",
]

#: the most other stacks an ``identical_answers`` cell names; more are counted
MAX_NAMED_IDENTICAL = 3
#: the sentence Tables 2 and 3 end with, on their ``identical_answers`` column
IDENTICAL_ANSWERS_CAPTION = (
    "identical answers = ≡k and the other stacks of answer group k (named up to "
    f"{MAX_NAMED_IDENTICAL}, else counted), whose final answers were "
    "byte-identical to this stack's on every task and repeat "
    "(results/metrics/identical_answers.csv): differences between them come from time, "
    f"tokens or the judge, not from their answers; {DASH} when no other stack's are."
)

CAPTIONS: dict[str, str] = {
    "table2_task_completion": (
        "Table 2. Mean task understanding (TU), task adherence (TA) and task completion rate "
        "(TCR, σ in parentheses) per technology stack, scored by the judge model with the "
        "rubric; a failed judgement is an unknown score, so a stack with one has no mean "
        "(a dash), and its failures are counted in n judge failed. "
        "Runs of every status are judged and averaged (a timed-out or errored run is scored "
        "on what it delivered); timed out / errored = share of the stack's runs that hit the "
        "run's time limit / ended in an error. " + IDENTICAL_ANSWERS_CAPTION
    ),
    "table3_efficiency": (
        "Table 3. Mean convergence time CT per task in seconds and mean verbosity V per task in "
        "tokens (σ in parentheses) per technology stack, over completed runs only (n CT, n V "
        "runs; V also leaves out runs whose API usage is unknown, n usage missing, counted "
        "over all runs): a timed-out or errored run is cut short, so it is counted in timed "
        "out / errored (shares of all runs) instead of averaged. CT KM median = Kaplan-Meier "
        "median time to completion over all runs, timed-out runs right-censored at their wall "
        f"time and errored runs never completing; {DASH} when fewer than half of the runs "
        "completed. Pareto-optimal = efficiency profile E = (TCR, CT, V) not dominated by "
        "another stack, among stacks all of whose runs completed: a stack with a timed-out or "
        "errored run is never Pareto-optimal and dominates no other stack; "
        f"{DASH} for every stack below stats.min_n independent tasks (no stack is called "
        "Pareto-optimal from so few tasks). " + IDENTICAL_ANSWERS_CAPTION
    ),
    "table4_tool_use": (
        "Table 4. Tool use success rate TUSR (pooled over the stack's tool calls; σ of the "
        "per-run rate in parentheses) per technology stack. Stacks that made no tool call are "
        f"listed with {DASH} (the paper omitted them; they are kept so nothing is hidden). "
        "Tool calls of runs of every status count; timed out / errored = share of the "
        "stack's runs that hit the run's time limit / ended in an error."
    ),
    "table5_social_values": (
        "Table 5. Social value stability between prompt and final answer (SVS_P,o), across "
        "reasoning steps (SVS_reasoning), and over all steps from prompt to final answer "
        "(SVS, σ in parentheses) per technology stack; the higher the better. Means over the "
        "runs with a final answer (n without answer: timed-out or errored runs, left out); "
        "a pair of value sets that are both empty is left out of the Jaccard mean, and a run "
        "without a pair that has a value has no IVS (IVS null share, of the answered runs). "
        "empty value sets: share of all value sets (prompt, each step, answer) with no value. "
        "SVS at t: the same SVS with the tagging threshold t instead of the configured one."
    ),
    "table7_protocol_cost": (
        "Table 7. Protocol cost per stack: messages, tool calls or agent messages over the "
        "protocol, KiB on the wire, protocol overhead vs time in the model, and the overhead's "
        "share of the run's wall time (mean overhead / mean wall seconds, over the same runs). "
        "Protocol overhead has one definition for MCP and A2A: the time the protocol clients "
        "(the frameworks' MCP clients; the A2A orchestrator) waited on the run's exchanges, "
        "from sending a request to closing its response (connection set-up, client SDK, "
        "transport and server handling), minus the peer's own work in them (the tool's run, "
        "the agent's node), timed by the server; MCP's open notification stream is excluded. "
        "Means per run over all runs, failed ones included; the overhead over the runs where "
        "it is known: a run in which the peer worked longer than its clients were timed "
        "waiting (an exchange abandoned at a timeout) has it unknown, counted in n unknown. "
        "All zero for protocol standard. mastif's addition, not in the seed paper."
    ),
    "table8_ground_truth": (
        "Table 8. Ground truth beside the judge: runs whose task has a programmatic check "
        "(n checked), the share of them the check passed (success rate), and the judge's "
        "agreement with the check when the judge's verdict is TCR >= 0.7: accuracy and "
        f"Cohen's κ ({DASH} when undefined: no checked run, or the checks or the judge's "
        "verdicts of one class, where κ is 0 by arithmetic whatever the judge does). "
        "mastif's addition, not in the seed paper."
    ),
    "versions": (
        "Versions. The software that produced the runs: per package, each version the runs "
        "recorded and the stacks (model, protocol, framework) whose runs it produced; mastif's "
        "commit with (dirty) when tracked files differed from it; the model server is unknown "
        "behind a remote endpoint; a package a stack does not use is not listed for it. A "
        "package with two versions, or a stack in two rows of one package, means runs made "
        "with different software. not recorded: runs imported from a log. mastif's addition."
    ),
    "repeats": (
        "Per stack, over the repeats of each task: pass@k (at least one of k repeats "
        "succeeds, unbiased estimator) and pass^k (all k succeed), the share of tasks whose "
        "success flips between repeats, and the intraclass correlation (ICC(1)) of success "
        "and TCR across repeats. Empty with one repeat. mastif's, not in the paper."
    ),
    "judge_validity": (
        "The judge against the tasks' programmatic checks, pooled over every checked run and "
        "per stack: accuracy and Cohen's κ with bootstrap CIs over tasks (from 15 checked "
        "tasks on, mastif.analysis.inference.MIN_TASKS_FOR_CI; none below) and their n; gate "
        "= the judge gate's verdict on the row (mastif.analysis.inference.assess_gate): "
        "validated when κ ≥ judge.min_kappa with at least judge.gate_min_tasks checked tasks "
        "and judge.gate_min_per_class runs whose check succeeded and as many whose check "
        "failed; not assessable below them or when the checks or the judge's verdicts have "
        "one class. The pooled row's is the experiment's gate. mastif's, not in the paper."
    ),
    "judge_panel": (
        "The judge panel (judge.models, judge.repeats): Krippendorff's α (ordinal) across "
        "judges and, per judge, across its repeats of the same runs (test-retest); each "
        "judge's κ and accuracy against the tasks' checks with bootstrap CIs over tasks. A "
        "null value says why in note (one judge, one repeat, too few tasks). mastif's, not "
        "in the paper."
    ),
    "power": (
        "Power before paying (mastif's, not in the paper): the smallest difference in success "
        "rate between two stacks that this sample of tasks detects with the exact McNemar "
        "test (paired: both stacks run the same tasks) at the configured alpha with 80% "
        "power, simulated for a weaker stack succeeding on half the tasks and a correlation "
        "of 0.3 between two stacks' outcomes on a task (`mastif power` for other "
        "assumptions). Repeats add no tasks. Empty difference: no difference is detectable."
    ),
} | INFERENCE_CAPTIONS

HEADERS: dict[str, str] = {
    "SVS_prompt_output": "SVS_P,o",
    "SVS_reasoning": "SVS_reasoning",
    "n_no_final_answer": "n without answer",
    "IVS_null_share": "IVS null share",
    "empty_value_set_share": "empty value sets",
    "pareto_optimal": "Pareto-optimal",
    "p_value": "p-value",
    "p_adjusted": "adjusted p",
    "effect": "D (effect size)",
    "protocol_s": "protocol overhead",
    "n_protocol_s_unknown": "n unknown",
    "model_s": "model time",
    "n_checked": "n checked",
    "success_rate": "success rate",
    "judge_accuracy": "judge accuracy",
    "judge_kappa": "Cohen's κ",
    "timeout_share": "timed out",
    "error_share": "errored",
    "CT_km_median": "CT KM median",
    "identical_answers": "identical answers",
}
UNITS: dict[str, str] = {
    "CT": "s",
    "CT_km_median": "s",
    "V": "tokens",
    "protocol_s": "s",
    "model_s": "s",
}
ONE_DECIMAL: frozenset[str] = frozenset(
    {"CT", "CT_km_median", "V", "messages", "calls", "KiB", "model_s"}
)
#: beside every mean of a stack table: the shares of its runs that timed out / errored
FAILURE_SHARES: dict[str, str] = {"timeout_share": "timeout_share", "error_share": "error_share"}


# ---------------------------------------------------------------------------------------------
# Formatting (shared by every table)


def fmt_mean_sd(mean: Any, sd: Any, decimals: int = 3) -> str:
    """The paper's ``mean (σ)`` cell, e.g. ``0.667 (0.186)``; σ is a dash when undefined."""
    if _missing(mean):
        return DASH
    return f"{fmt_num(mean, decimals)} ({fmt_num(sd, decimals)})"


def _decimals(column: str) -> int:
    if column.endswith("mean_rank"):
        return 2
    return 1 if column.removesuffix("_std") in ONE_DECIMAL else 3


def _cell(column: str, value: Any, alpha: float = ALPHA) -> str:
    if column == "p_value":
        return fmt_p(value)
    if column == "p_adjusted":
        return fmt_p_adjusted(value, alpha)
    if _missing(value):
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return fmt_num(value, _decimals(column))
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(df: pl.DataFrame, caption: str, alpha: float = ALPHA) -> str:
    """A one-line caption, a blank line, then a GitHub pipe table of ``df``; ``alpha``: the
    level at which an adjusted p is marked (n.s.)."""
    shown = [c for c in df.columns if not (c.endswith("_std") and c[:-4] in df.columns)]
    headers = []
    for c in shown:
        header = HEADERS.get(c, c.replace("_", " "))
        if f"{c}_std" in df.columns:
            header += " (σ)"
        if c in UNITS:
            header += f" [{UNITS[c]}]"
        headers.append(header)
    lines = [caption, "", "| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    for row in df.iter_rows(named=True):
        cells = [
            fmt_mean_sd(row[c], row[f"{c}_std"], _decimals(c))
            if f"{c}_std" in df.columns
            else _cell(c, row[c], alpha)
            for c in shown
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Tables


def _stack_table(stacks: pl.DataFrame, columns: dict[str, str]) -> pl.DataFrame:
    """Stack label plus ``columns`` (source → table name), in the paper's row order
    (model, then framework, then protocol)."""
    return stacks.sort(["model", "framework", "protocol"]).select(
        pl.concat_str([pl.col(c).cast(pl.String) for c in FACTORS], separator=", ").alias("Stack"),
        *[pl.col(src).alias(dst) for src, dst in columns.items()],
    )


def beside_tables_2_3(
    stacks: pl.DataFrame, n_tasks: int | None = None, min_n: int | None = None
) -> pl.DataFrame:
    """The stacks table as Tables 2 and 3 show it (issue 51): an ``identical_answers``
    column ("≡k: " and the other stacks of the stack's ``answer_group``, whose final answers
    are byte-identical to its own on every task and repeat — named up to
    :data:`MAX_NAMED_IDENTICAL`, else counted, or "every other stack"; null when none are or
    the table has no groups), and ``pareto_optimal`` null for every stack below ``min_n`` independent
    tasks (``n_tasks``; no stack is called Pareto-optimal from so few tasks)."""
    labels = [", ".join(str(v) for v in row) for row in stacks.select(FACTORS).iter_rows()]
    groups = (
        stacks["answer_group"].to_list()
        if "answer_group" in stacks.columns
        else [None] * stacks.height
    )
    members: dict[int, list[str]] = {}
    for label, group in zip(labels, groups, strict=True):
        if group is not None:
            members.setdefault(group, []).append(label)

    def flag(label: str, group: int | None) -> str | None:
        if group is None:
            return None
        others = sorted(m for m in members[group] if m != label)
        if len(others) == stacks.height - 1:
            return f"≡{group}: every other stack"
        if len(others) > MAX_NAMED_IDENTICAL:
            return f"≡{group}: {len(others)} other stacks (identical_answers.csv)"
        return f"≡{group}: " + "; ".join(others)

    flags = [flag(label, group) for label, group in zip(labels, groups, strict=True)]
    out = stacks.with_columns(pl.Series("identical_answers", flags, dtype=pl.String))
    if _reason(n_tasks, min_n) is not None and "pareto_optimal" in out.columns:
        out = out.with_columns(pl.lit(None, dtype=pl.Boolean).alias("pareto_optimal"))
    return out


SENSITIVITY_PREFIX = "SVS_at_"


def _social_values_table(stacks: pl.DataFrame) -> pl.DataFrame:
    """Table 5: the SVS columns, the counts and shares behind them, and SVS at each
    sensitivity threshold (``SVS_sensitivity`` pivoted to one ``SVS_at_<t>`` column per
    threshold; a stack without a value at t gets null)."""
    thresholds: list[float] = []
    wide = stacks
    if "SVS_sensitivity" in stacks.columns:
        entries = [e or [] for e in stacks["SVS_sensitivity"].to_list()]
        thresholds = sorted({e["threshold"] for row in entries for e in row})
        wide = stacks.with_columns(
            pl.Series(
                f"{SENSITIVITY_PREFIX}{t:g}",
                [next((e["SVS"] for e in row if e["threshold"] == t), None) for row in entries],
                dtype=pl.Float64,
            )
            for t in thresholds
        )
    columns = {
        "SVS_prompt_output": "SVS_prompt_output",
        "SVS_reasoning": "SVS_reasoning",
        "SVS": "SVS",
        "SVS_std": "SVS_std",
        "n_no_final_answer": "n_no_final_answer",
        "IVS_null_share": "IVS_null_share",
        "empty_value_set_share": "empty_value_set_share",
    }
    columns |= {f"{SENSITIVITY_PREFIX}{t:g}": f"{SENSITIVITY_PREFIX}{t:g}" for t in thresholds}
    return _stack_table(wide, columns)


def paper_tables(
    stacks: pl.DataFrame,
    stats_tests: pl.DataFrame,
    alpha: float = ALPHA,
    n_tasks: int | None = None,
    min_n: int | None = None,
    *,
    joint: pl.DataFrame | None = None,
    joint_levels: pl.DataFrame | None = None,
    joint_pairs: pl.DataFrame | None = None,
) -> dict[str, pl.DataFrame]:
    """All tables as raw-number DataFrames, keyed by output file stem; ``alpha``: the level
    below which Table 6 calls a factor's adjusted p significant; ``n_tasks`` independent
    tasks below ``min_n``: no p-value and no best level (:mod:`mastif.reporting.report_inference`)
    and no Pareto-optimal stack in Table 3 (:func:`beside_tables_2_3`). Table 6 reads the
    joint tests and, within a factor, its levels and pairwise contrasts
    (``results/stats/{mixed_joint,joint_levels,joint_pairs}.parquet``); without them it
    names no best level ("not tested")."""
    joint = joint if joint is not None else pl.DataFrame(schema=MIXED_JOINT_SCHEMA)
    joint_levels = (
        joint_levels if joint_levels is not None else pl.DataFrame(schema=JOINT_LEVELS_SCHEMA)
    )
    joint_pairs = (
        joint_pairs if joint_pairs is not None else pl.DataFrame(schema=JOINT_PAIRS_SCHEMA)
    )
    beside = beside_tables_2_3(stacks, n_tasks, min_n)
    return {
        "table2_task_completion": _stack_table(
            beside,
            {
                "TU_mean": "TU",
                "TA_mean": "TA",
                "TCR_mean": "TCR",
                "TCR_std": "TCR_std",
                "n_judged": "n_judged",
                "n_judge_failed": "n_judge_failed",
                **FAILURE_SHARES,
                "identical_answers": "identical_answers",
            },
        ),
        "table3_efficiency": _stack_table(
            beside,
            {
                "CT_mean": "CT",
                "CT_std": "CT_std",
                "n_CT": "n_CT",
                "CT_km_median": "CT_km_median",
                "V_mean": "V",
                "V_std": "V_std",
                "n_V": "n_V",
                "n_usage_missing": "n_usage_missing",
                **FAILURE_SHARES,
                "pareto_optimal": "pareto_optimal",
                "identical_answers": "identical_answers",
            },
        ),
        "table4_tool_use": _stack_table(
            stacks,
            {
                "TUSR": "TUSR",
                "TUSR_std": "TUSR_std",
                "n_tool_calls": "n_tool_calls",
                **FAILURE_SHARES,
            },
        ),
        "table5_social_values": _social_values_table(stacks),
        "table6_best_stacks": best_stacks(
            joint, joint_levels, joint_pairs, stacks, alpha, n_tasks=n_tasks, min_n=min_n
        ),
        "table7_protocol_cost": _stack_table(
            stacks,
            {
                "protocol_messages": "messages",
                "protocol_calls": "calls",
                "protocol_kib": "KiB",
                "protocol_s": "protocol_s",
                "n_protocol_s_unknown": "n_protocol_s_unknown",
                "model_s": "model_s",
                "protocol_share": "protocol_share",
            },
        ),
        "table8_ground_truth": _stack_table(
            stacks,
            {
                "n_checked": "n_checked",
                "success_rate": "success_rate",
                "judge_accuracy": "judge_accuracy",
                "judge_kappa": "judge_kappa",
            },
        ),
        "kruskal_summary": kruskal_summary(stats_tests, n_tasks=n_tasks, min_n=min_n),
    }


# ---------------------------------------------------------------------------------------------
# Versions (from the runs files)

NOT_RECORDED = "not recorded"
UNKNOWN = "unknown"
VERSIONS_SCHEMA: dict[str, Any] = {
    "package": pl.String,
    "version": pl.String,
    "n_stacks": pl.Int64,
    "runs": pl.Int64,
    "stacks": pl.String,
}


def run_versions(paths: Sequence[str | Path]) -> pl.DataFrame:
    """The stack and provenance columns of runs files (null where a file has no such column:
    written before mastif recorded versions)."""
    import pyarrow.parquet as pq

    wanted = [*FACTORS, *PROVENANCE_COLUMNS]
    frames = []
    for path in paths:
        present = set(pq.read_schema(path).names)
        df = pl.read_parquet(path, columns=[c for c in wanted if c in present])
        frames.append(df.with_columns(pl.lit(None).alias(c) for c in wanted if c not in present))
    if not frames:
        return pl.DataFrame(schema={c: pl.String for c in wanted} | {"mastif_dirty": pl.Boolean})
    return pl.concat([f.select(wanted) for f in frames], how="vertical_relaxed")


def _run_packages(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(package, version) of one run, as the versions table lists them."""
    if all(row.get(c) is None for c in PROVENANCE_COLUMNS):
        return [("all packages", NOT_RECORDED)]
    commit = row.get("mastif_commit")
    if commit is not None and row.get("mastif_dirty"):
        commit += " (dirty)"
    server = row.get("model_server")
    server_version = row.get("model_server_version")
    listed = [
        ("mastif", row.get("mastif_version") or UNKNOWN),
        ("mastif commit", commit or UNKNOWN),
        ("python", row.get("python_version") or UNKNOWN),
        ("model server", f"{server} {server_version or UNKNOWN}" if server else UNKNOWN),
    ]
    for package in PACKAGES:
        version = row.get(version_column(package))
        if version is not None:
            listed.append((package, version))
    for entry in (row.get("other_packages") or "").split(", "):
        if entry:
            package, _, version = entry.partition("==")
            listed.append((package, version))
    return listed


def versions_table(runs: pl.DataFrame) -> pl.DataFrame:
    """One row per (package, version) the runs recorded, with the stacks and runs behind it:
    ``all N stacks`` when every stack of the table used it."""
    order = ["all packages", "mastif", "mastif commit", "python", "model server", *PACKAGES]
    seen: dict[tuple[str, str], tuple[set[tuple[str, str, str]], int]] = {}
    all_stacks: set[tuple[str, str, str]] = set()
    for row in runs.iter_rows(named=True):
        stack = (str(row["model"]), str(row["framework"]), str(row["protocol"]))  # paper order
        all_stacks.add(stack)
        for key in _run_packages(row):
            stacks, n = seen.get(key, (set(), 0))
            seen[key] = (stacks | {stack}, n + 1)
    rows = []
    for (package, version), (stacks, n) in sorted(
        # a plugin's packages (other_packages) after the known ones, by name
        seen.items(),
        key=lambda kv: (
            order.index(kv[0][0]) if kv[0][0] in order else len(order),
            kv[0][0],
            kv[0][1],
        ),
    ):
        listed = (
            f"all {len(stacks)} stacks"
            if stacks == all_stacks and len(stacks) > 1
            else "; ".join(f"{m}, {p}, {f}" for m, f, p in sorted(stacks))
        )
        rows.append((package, version, len(stacks), n, listed))
    return pl.DataFrame(rows, schema=VERSIONS_SCHEMA, orient="row")


def power_table(n_tasks: int, alpha: float = ALPHA) -> pl.DataFrame:
    """The power line of the report: :func:`mastif.analysis.power.min_detectable_difference` for this
    experiment's number of tasks per stack, at the default assumptions."""
    from mastif.analysis.power import PowerResult, format_power, min_detectable_difference

    if n_tasks < 1:  # no runs: nothing to size
        result = PowerResult(0, 0.5, 0.3, alpha, 0.8, None, None, 0)
    else:
        result = min_detectable_difference(n_tasks, alpha=alpha)
    return pl.DataFrame(
        {
            "n_tasks": [result.n_tasks],
            "baseline_success": [result.baseline],
            "rho": [result.rho],
            "alpha": [result.alpha],
            "power": [result.power],
            "min_detectable_difference": [result.min_detectable_difference],
            "achieved_power": [result.achieved_power],
            "sentence": [format_power(result)],
        },
        schema_overrides={"min_detectable_difference": pl.Float64, "achieved_power": pl.Float64},
    )


def write_tables(
    tables: dict[str, pl.DataFrame],
    out_dir: Path,
    warnings: Mapping[str, str | Sequence[str]] | None = None,
    alpha: float = ALPHA,
) -> list[Path]:
    """Write each table as ``{name}.md`` (formatted, captioned) and ``{name}.csv`` (raw);
    ``warnings``: the line(s) put in bold before a table's caption (e.g. an unvalidated
    judge, too few tasks for a p-value); ``alpha``: the significance level captions name."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for name, df in tables.items():
        md, csv = out_dir / f"{name}.md", out_dir / f"{name}.csv"
        caption = CAPTIONS.get(name, name).replace("{alpha}", f"{alpha:g}")
        lines = (warnings or {}).get(name) or []
        for line in reversed([lines] if isinstance(lines, str) else list(lines)):
            caption = f"**{line}**\n\n{caption}"
        md.write_text(to_markdown(df, caption, alpha), encoding="utf-8")
        df.write_csv(csv)
        paths += [md, csv]
    return paths

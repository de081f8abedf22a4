"""One vocabulary of metrics: each metric's name, words, unit, direction, scale and which runs
count for it, defined once.

The statistics (:mod:`mastif.analysis`), the tables, figures and viewer
(:mod:`mastif.reporting`), which runs count for a mean (:func:`mastif.evaluation.measures.
counted`), the judge's criteria (:mod:`mastif.evaluation.judge`) and the workflow's rules
(``workflow/rules/common.smk``) read a metric here; none spells its label, unit, direction or
scale itself (tests/core/test_metric_registry.py looks for literal lists of metric names
elsewhere in the package).

The metrics are the seed paper's (TCR Eq. 1, CT Eq. 2, V Eq. 3, TUSR Eq. 5, IVS/SVS Eq. 8,
the judge's TU and TA) and the tasks' programmatic check (``success``), which mastif adds.
E (Eq. 4) is a stack's Pareto front over TCR, CT and V, not a metric of its own here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Counts(StrEnum):
    """Which runs a metric's mean, tests and figures count."""

    #: every run with a value
    ALL = "all"
    #: the judged runs: a failed judgement has no score (and makes a stack's mean unknown)
    JUDGED = "judged"
    #: the completed runs: a timed-out or errored run's time and tokens were cut short
    COMPLETED = "completed"
    #: the completed runs with a final answer (S_{m+1} of Eq. 8)
    ANSWERED = "answered"


class Scale(StrEnum):
    """What a metric's numbers are."""

    #: the judge's ordinal score, one of :data:`SCORE_ANCHORS` per run
    SCORE = "score"
    #: a share in [0, 1] (a run's successful tool calls)
    RATE = "rate"
    #: 0/1 per run (a check passed or not), a rate over runs
    BINARY = "binary"
    #: a social-value score in [0, 1]
    VALUE = "value"
    #: seconds, > 0, right-skewed: compared on the log scale
    SECONDS = "seconds"
    #: tokens, > 0, right-skewed: compared on the log scale
    TOKENS = "tokens"


#: the judge's five anchors (the rubric's 1-5 mapped to 0-1): the ordinal scale of TU, TA, TCR
SCORE_ANCHORS: tuple[float, ...] = (1.0, 0.7, 0.5, 0.3, 0.0)


@dataclass(frozen=True)
class Metric:
    """One metric, as every table, figure, test and rule names it."""

    #: the column in ``results/metrics/runs.parquet`` and the name everywhere
    name: str
    #: the row label of the paper's Table 6, e.g. "Task completion (TCR)"
    label: str
    #: the paper's figure title, e.g. "Task completion scores"
    title: str
    #: an axis label with the unit, e.g. "CT (seconds)"
    axis: str
    #: the unit a table header carries ("s", "tokens"), None for a 0-1 number
    unit: str | None
    #: True when a higher value is better, False for a cost (CT, V)
    higher_is_better: bool
    scale: Scale
    counts: Counts
    #: the seed paper's equation, or None (success is mastif's)
    equation: str | None
    #: the seed paper's research question it answers, or None
    research_question: str | None

    @property
    def ordinal(self) -> bool:
        """The judge's ordinal score: rank tests, no normality gate, ordinal models."""
        return self.scale is Scale.SCORE

    @property
    def bounded(self) -> bool:
        """A number in [0, 1]: axes stop there."""
        return self.scale in (Scale.SCORE, Scale.RATE, Scale.BINARY, Scale.VALUE)

    @property
    def log_scale(self) -> bool:
        """Compared on the log scale (a positive, right-skewed amount)."""
        return self.scale in (Scale.SECONDS, Scale.TOKENS)


def _metric(name: str, label: str, title: str, axis: str, unit: str | None, higher: bool,
            scale: Scale, counts: Counts, equation: str | None, rq: str | None) -> Metric:  # fmt: skip
    return Metric(name, label, title, axis, unit, higher, scale, counts, equation, rq)


#: every metric, in the order of the paper's tables (Table 2: TU, TA, TCR)
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        _metric("TU", "Task understanding (TU)", "Task understanding scores",
                "TU (score, 0–1)", None, True, Scale.SCORE, Counts.JUDGED, None, "RQ1"),
        _metric("TA", "Task adherence (TA)", "Task adherence scores",
                "TA (score, 0–1)", None, True, Scale.SCORE, Counts.JUDGED, None, "RQ1"),
        _metric("TCR", "Task completion (TCR)", "Task completion scores",
                "TCR (score, 0–1)", None, True, Scale.SCORE, Counts.JUDGED, "Eq. 1", "RQ1"),
        _metric("CT", "Convergence time (CT)", "Convergence time in seconds",
                "CT (seconds)", "s", False, Scale.SECONDS, Counts.COMPLETED, "Eq. 2", "RQ2"),
        _metric("V", "Verbosity (V)", "Verbosity in tokens",
                "V (tokens)", "tokens", False, Scale.TOKENS, Counts.COMPLETED, "Eq. 3", "RQ2"),
        _metric("TUSR", "Tool use success (TUSR)", "Tool use success rate",
                "TUSR (rate, 0–1)", None, True, Scale.RATE, Counts.ALL, "Eq. 5", "RQ3"),
        _metric("IVS", "Social value stability (IVS)", "Social value score (IVS)",
                "IVS (score, 0–1)", None, True, Scale.VALUE, Counts.ANSWERED, "Eq. 8", "RQ4"),
        _metric("SVS", "Social value stability of a stack (SVS)", "Social value score (SVS)",
                "SVS (score, 0–1)", None, True, Scale.VALUE, Counts.ANSWERED, "Eq. 8", "RQ4"),
        _metric("success", "Success by the tasks' checks", "Success by the tasks' checks",
                "success (rate, 0–1)", None, True, Scale.BINARY, Counts.ALL, None, None),
    )
}  # fmt: skip

#: the paper's per-run metrics, tested per factor and drawn as violins, in its order
PER_RUN: tuple[str, ...] = ("TCR", "TU", "TA", "CT", "V", "TUSR", "IVS")
#: the judge's criteria: the metrics it scores, in the rubric's order
JUDGE_SCORES: tuple[str, ...] = tuple(n for n, m in METRICS.items() if m.counts is Counts.JUDGED)
#: the metrics of the completed runs only
COMPLETED_ONLY: frozenset[str] = frozenset(
    n for n, m in METRICS.items() if m.counts is Counts.COMPLETED
)
#: the metrics of the answered runs only
ANSWERED_ONLY: frozenset[str] = frozenset(
    n for n, m in METRICS.items() if m.counts is Counts.ANSWERED
)
#: the metrics per run the statistics test: the paper's, then the tasks' checks
TESTED: tuple[str, ...] = (*PER_RUN, "success")
#: the order the joint tests, their figure and the viewer's grid list metrics: the tasks'
#: checks first (they need no judge), then the paper's
CHECK_FIRST: tuple[str, ...] = ("success", *PER_RUN)
#: Table 6's metrics: the paper's best level per factor for each research question
BEST_LEVEL_METRICS: tuple[str, ...] = ("TCR", "CT", "V", "TUSR", "IVS")
#: the objectives of E (Eq. 4): a stack's Pareto front over completion, time and tokens
PARETO_OBJECTIVES: tuple[str, ...] = ("TCR", "CT", "V")
#: the per-stack means with intervals over tasks (results/stats/effects.parquet)
EFFECT_METRICS: tuple[str, ...] = ("TCR", "success", "CT", "V", "TUSR", "SVS")


def metric(name: str) -> Metric:
    """The metric called ``name``; a KeyError naming the known ones otherwise."""
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}") from None


def higher_is_better(name: str) -> bool:
    return metric(name).higher_is_better

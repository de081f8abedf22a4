"""One vocabulary of metrics (mastif.core.metric_registry): every stage reads it, none spells
a metric's list, label, direction or scale itself."""

from __future__ import annotations

import ast

import pytest

from mastif.analysis import stats
from mastif.core import metric_registry as registry
from mastif.evaluation import judge, measures
from mastif.reporting import plots, plots_effects, report_inference
from tests.support.paths import REPO

NAMES = frozenset(registry.METRICS)


def _is_dtype(node: ast.expr) -> bool:
    """A Polars dtype (``pl.Float64``, ``pl.List(...)``): a column schema, not vocabulary."""
    func = node.func if isinstance(node, ast.Call) else node
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "pl"
    )


def spelled_lists(source: str) -> list[tuple[int, list[str]]]:
    """(line, names) of every literal that spells metrics: a tuple, list or set of two or more
    metric names and nothing else, or a dict keyed by three or more metric names whose values
    are not Polars dtypes (a Parquet schema names its columns, which may be metrics)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if (
                len(values) == len(node.elts)
                and len(set(values)) >= 2
                and all(isinstance(v, str) and v in NAMES for v in values)
            ):
                found.append((node.lineno, values))
        elif isinstance(node, ast.Dict):
            keyed = [
                (k.value, v)
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and k.value in NAMES
            ]
            if len(keyed) >= 3 and not all(_is_dtype(v) for _, v in keyed):
                found.append((node.lineno, [k for k, _ in keyed]))
    return found


def test_no_module_spells_a_list_of_metrics() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {names}"
        for path in sorted((REPO / "src" / "mastif").rglob("*.py"))
        if path.name != "metric_registry.py"
        for line, names in spelled_lists(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "spell these through mastif.core.metric_registry:\n" + "\n".join(
        offenders
    )


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ('M = ("TCR", "TU", "TA")', True),
        ('M = ["CT", "V"]', True),
        ('M = {"TCR": True, "CT": False, "V": False}', True),
        ('S = {"TCR": pl.Float64, "CT": pl.Float64(), "V": pl.List(pl.String)}', False),
        ('M = ("TCR",)', False),
        ('M = ("TCR", "run_id")', False),
        ("M = registry.PER_RUN", False),
    ],
)
def test_the_scan_catches_a_spelled_list(source: str, caught: bool) -> None:
    assert bool(spelled_lists(source)) is caught


def test_the_stages_read_the_registry() -> None:
    assert stats.METRICS == registry.PER_RUN
    assert stats.HIGHER_IS_BETTER == {
        m: registry.METRICS[m].higher_is_better for m in stats.METRICS
    }
    assert stats.ORDINAL == frozenset({"TU", "TA", "TCR"})
    assert measures.JUDGE_SCORES == frozenset(registry.JUDGE_SCORES)
    assert measures.COMPLETED_ONLY == {"CT", "V"} and measures.ANSWERED_ONLY == {"IVS", "SVS"}
    assert judge.CRITERIA == ("TU", "TA", "TCR") == registry.JUDGE_SCORES
    assert judge.SCORE_ANCHORS == registry.SCORE_ANCHORS
    assert list(report_inference.BEST_METRICS) == list(registry.BEST_LEVEL_METRICS)
    assert report_inference.BEST_METRICS["CT"] == ("Convergence time (CT)", "RQ2", False)
    assert plots.METRICS["CT"].axis == registry.METRICS["CT"].axis == "CT (seconds)"
    assert plots_effects.AXES["success"] == ("success (rate, 0–1)", True)


def test_the_rules_read_the_registry() -> None:
    common = (REPO / "workflow" / "rules" / "common.smk").read_text()
    assert "METRICS = list(metric_registry.PER_RUN)" in common
    assert "JUDGE_METRICS = metric_registry.JUDGE_SCORES" in common
    # no rule file or bridge script spells a metric's name in quotes
    quoted = [f'"{name}"' for name in NAMES if len(name) > 1]
    for path in [*(REPO / "workflow" / "rules").glob("*.smk"),
                 *(REPO / "workflow" / "scripts").glob("*.py")]:  # fmt: skip
        text = path.read_text()
        assert not [q for q in quoted if q in text], path.name


def test_a_metric_is_found_by_name_or_named_in_the_error() -> None:
    assert registry.metric("V").unit == "tokens" and registry.metric("V").log_scale
    assert registry.metric("TCR").ordinal and registry.metric("TCR").bounded
    with pytest.raises(KeyError, match="unknown metric 'TCRR'; known: TU, TA, TCR"):
        registry.metric("TCRR")

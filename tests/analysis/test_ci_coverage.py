"""bench/ci_coverage.py, the simulation behind mastif.analysis.inference.MIN_TASKS_FOR_CI."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.support.paths import REPO

BENCH = REPO / "bench" / "ci_coverage.py"


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("ci_coverage", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_tasks_cover_far_below_nominal_thirty_near_it(bench) -> None:  # type: ignore[no-untyped-def]
    truth = bench.true_values(4, 1.5, np.random.default_rng(0), draws=200_000)
    kw = {"experiments": 150, "resamples": 300, "confidence": 0.95, "n_stacks": 4,
          "repeats": 1, "task_sd": 1.5, "truth": truth, "seed": 1}  # fmt: skip
    two, thirty = bench.coverage(2, **kw), bench.coverage(30, **kw)
    for metric in bench.METRICS:
        assert two[metric][0] < 0.65  # issue 38: "about 50%"
        assert thirty[metric][0] > 0.88


def test_the_criterion_is_the_first_size_from_which_all_larger_ones_pass(bench) -> None:  # type: ignore[no-untyped-def]
    def res(*cov: float) -> dict[str, tuple[float, float, float]]:
        return {m: (c, 0.0, 0.0) for m, c in zip(bench.METRICS, cov, strict=True)}

    results = {2: res(0.5, 0.5), 5: res(0.93, 0.93), 8: res(0.89, 0.95), 10: res(0.93, 0.92),
               20: res(0.94, 0.94)}  # fmt: skip
    assert bench.min_tasks(results, 0.95, 0.03) == 10  # 5 passes, but 8 after it does not
    assert bench.min_tasks({2: res(0.5, 0.5)}, 0.95, 0.03) is None

"""`mastif power`: the minimum detectable difference in success rate between two stacks."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar

from mastif.analysis.power import mcnemar_exact_p, min_detectable_difference, simulated_power
from mastif.cli import main
from mastif.reporting.report import power_table


@pytest.mark.parametrize(("b", "c"), [(0, 0), (3, 9), (9, 3), (1, 15), (7, 7), (0, 6)])
def test_exact_mcnemar_p_equals_statsmodels(b: int, c: int) -> None:
    ref = mcnemar([[10, b], [c, 5]], exact=True).pvalue
    assert mcnemar_exact_p(np.array([b]), np.array([c]))[0] == pytest.approx(ref)


def test_no_difference_rejects_at_most_alpha_and_a_large_one_almost_always() -> None:
    null = simulated_power(60, 0.5, 0.0, rho=0.3, alpha=0.05, n_sim=4000, seed=1)
    assert null is not None and null <= 0.06  # exact McNemar is conservative
    big = simulated_power(60, 0.3, 0.4, rho=0.3, alpha=0.05, n_sim=2000, seed=1)
    assert big is not None and big > 0.95


def test_impossible_marginals_and_correlation_have_no_power() -> None:
    # P(A) 0.1, P(B) 0.9 cannot correlate at 0.9
    assert simulated_power(50, 0.1, 0.8, rho=0.9) is None


def test_the_detectable_difference_shrinks_with_more_tasks_and_matches_a_hand_check() -> None:
    small = min_detectable_difference(50, n_sim=2000)
    large = min_detectable_difference(300, n_sim=2000)
    assert small.min_detectable_difference is not None
    assert large.min_detectable_difference is not None
    assert large.min_detectable_difference < small.min_detectable_difference
    # by hand (normal approximation to the binomial test on the discordant tasks): 300
    # tasks, p 0.5 vs 0.6, phi 0.3 -> ~106 discordant, 64% towards B -> power ~0.8
    assert 0.08 <= large.min_detectable_difference <= 0.12
    assert large.achieved_power is not None and large.achieved_power >= 0.8


def test_one_task_detects_nothing_and_the_table_says_so() -> None:
    assert min_detectable_difference(1, n_sim=500).min_detectable_difference is None
    row = power_table(1).row(0, named=True)
    assert row["min_detectable_difference"] is None and "add tasks" in row["sentence"]
    assert power_table(0).row(0, named=True)["n_tasks"] == 0


def test_cli_reads_the_configs_sample_size(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "--tasks", "200", "--simulations", "1000"]) == 0
    assert "200 task(s)" in capsys.readouterr().out
    assert main(["power", "--baseline", "1.5"]) == 2
    assert "baseline" in capsys.readouterr().err

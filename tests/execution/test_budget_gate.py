"""A model job's budget gate from the config's raw values, and the budget's stop as one
sentence without a traceback (mastif.execution.budget_gate)."""

from __future__ import annotations

import logging

import pytest

from mastif.core.config import ModelPrice, Stack
from mastif.execution.budget import RESERVATION_GRACE_S, BudgetReached
from mastif.execution.budget_gate import model_job_gate, model_price, stop_at_budget

STACK = Stack("m", "mcp", "langgraph")
PRICE = {"input_per_mtok": 0.1, "output_per_mtok": 0.4}


def test_a_price_is_validated_and_none_stays_unpriced():
    assert model_price(None) is None
    assert model_price(PRICE) == ModelPrice.model_validate(PRICE)


def test_no_gate_without_a_cap_and_a_gate_with_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert model_job_gate(None, PRICE, STACK, longest_s=60) is None
    assert model_job_gate({"usd": None, "tokens": None}, PRICE, STACK, longest_s=60) is None
    gate = model_job_gate({"usd": 1.0}, PRICE, STACK, longest_s=60)
    assert gate is not None and gate.limit.usd == 1.0
    assert gate.price == ModelPrice.model_validate(PRICE) and gate.stack == STACK
    assert gate.expires_in_s == 60 + RESERVATION_GRACE_S


def test_the_budgets_stop_is_one_sentence_in_the_log_and_the_exit(caplog):
    with caplog.at_level(logging.ERROR, logger="mastif.job"):
        with pytest.raises(SystemExit) as stopped:
            with stop_at_budget("judging m/mcp/langgraph"):
                raise BudgetReached("budget execution.budget.usd = 1 reached")
    assert str(stopped.value) == "judging m/mcp/langgraph: budget execution.budget.usd = 1 reached"
    assert caplog.messages == ["judging m/mcp/langgraph: budget execution.budget.usd = 1 reached"]


def test_other_errors_pass_through():
    with pytest.raises(ValueError), stop_at_budget("m/mcp/langgraph"):
        raise ValueError("not the budget")

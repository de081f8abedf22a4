"""A Snakemake model job's side of ``execution.budget``: its gate on the experiment's ledger,
built from the config's raw values, and the budget's stop as the job's expected end (one
sentence, no traceback). The bridges of the stack and judging jobs
(``workflow/scripts/execute_stack.py``, ``judge_runs.py``) use both; the ledger and the
gate themselves are :mod:`mastif.execution.budget`'s.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from mastif.core.config import ModelPrice, Stack
from mastif.execution.budget import RESERVATION_GRACE_S, BudgetGate, BudgetReached, job_gate


def model_price(raw: Mapping[str, Any] | None) -> ModelPrice | None:
    """A model's config ``price``; ``None``: unpriced (the budget counts its tokens only)."""
    return None if raw is None else ModelPrice.model_validate(raw)


def model_job_gate(
    raw_budget: Mapping[str, Any] | None,
    raw_price: Mapping[str, Any] | None,
    stack: Stack,
    longest_s: float,
) -> BudgetGate | None:
    """The job's gate for config ``execution.budget`` (``raw_budget``) at the config price
    ``raw_price`` (``None`` where each unit of work brings its own), or ``None`` when the
    budget caps nothing. ``longest_s``: the longest one unit of the job's work (a run, a
    judgement) may take; a reservation outlives it by :data:`RESERVATION_GRACE_S`, which
    only matters if the job was killed outright."""
    return job_gate(
        raw_budget,
        model_price(raw_price),
        stack,
        expires_in_s=longest_s + RESERVATION_GRACE_S,
    )


@contextmanager
def stop_at_budget(what: str) -> Iterator[None]:
    """Turn :class:`BudgetReached` in the block into the job's expected stop, not a crash:
    "``what``: reason" in the job's log and on stderr (SystemExit), no traceback. The job
    writes no output then; its checkpoint keeps the finished work for the rerun."""
    try:
        yield
    except BudgetReached as exc:
        logging.getLogger("mastif.job").error("%s: %s", what, exc)
        sys.exit(f"{what}: {exc}")

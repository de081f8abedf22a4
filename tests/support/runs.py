"""Runs tables built by hand for the evaluation and analysis tests: one row per run, of one
stack (:data:`ONE_STACK`) unless the row names another, in the columns of docs/data.md."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

#: what a hand-built run is unless its row says otherwise: one stack, repeat 0, completed
ONE_STACK: dict[str, Any] = {
    "model": "m",
    "protocol": "standard",
    "framework": "langgraph",
    "repeat": 0,
    "status": "ok",
}


def runs_table(rows: Iterable[Mapping[str, Any]], **frame: Any) -> pl.DataFrame:
    """One run per row, each over :data:`ONE_STACK`; ``frame``: polars' ``schema`` (only
    its columns are kept) or ``schema_overrides``."""
    return pl.DataFrame([{**ONE_STACK, **row} for row in rows], **frame)

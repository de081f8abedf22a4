"""What tokens cost in US dollars: the one formula, tokens x price per million tokens.

A model's ``price`` in the config (:class:`mastif.core.config.ModelPrice`) is US dollars per
million input (prompt) and per million output (completion) tokens. :func:`usd` applies it to
numbers and to polars expressions alike (the metrics price whole columns, the estimate and
the budget single counts); :func:`usd_of` at a model's price, unknown for a model without one.
"""

from __future__ import annotations

from typing import Any

from mastif.core.config import ModelPrice

#: how many tokens a price is for
TOKENS_PER_PRICE = 1e6


def usd(prompt: Any, completion: Any, input_per_mtok: Any, output_per_mtok: Any) -> Any:
    """US dollars of ``prompt`` and ``completion`` tokens at these prices per million tokens:
    numbers give a number, polars expressions an expression (null where a price is)."""
    return (prompt * input_per_mtok + completion * output_per_mtok) / TOKENS_PER_PRICE


def usd_of(prompt: float, completion: float, price: ModelPrice | None) -> float | None:
    """US dollars of ``prompt`` and ``completion`` tokens at ``price``; ``None`` unpriced,
    never 0."""
    if price is None:
        return None
    return usd(prompt, completion, price.input_per_mtok, price.output_per_mtok)

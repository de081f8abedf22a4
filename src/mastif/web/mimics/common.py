"""What the four API mimics share: loading their corpus, reading parameters, matching.

Search is deliberately simple (every non-stopword query term must occur; title hits rank
higher): enough for tasks written against the corpus, and deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.requests import Request

_WORD = re.compile(r"[0-9a-z]+")
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from how in into is it its of on or that "
    "the their this to was were what when where which who why with".split()
)


def _stem(token: str) -> str:
    """Fold simple plurals so 'lakes' finds 'lake' (real engines stem much more)."""
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def stemmed_tokens(text: str) -> list[str]:
    """Every word of ``text``, lower-cased and with plurals folded."""
    return [_stem(t) for t in _WORD.findall(text.lower())]


def query_terms(text: str) -> list[str]:
    """The words of a query that must match: :func:`stemmed_tokens` without stopwords."""
    return [_stem(t) for t in _WORD.findall(text.lower()) if t not in _STOPWORDS]


def match_score(terms: Sequence[str], fields: Sequence[tuple[str, int]]) -> int:
    """Weighted hit count, or 0 if any term is missing: the big engines AND their terms."""
    if not terms:
        return 0
    token_sets = [(set(stemmed_tokens(text)), weight) for text, weight in fields]
    total = 0
    for term in terms:
        hit = sum(weight for tokens, weight in token_sets if term in tokens)
        if not hit:
            return 0
        total += hit
    return total


async def all_params(request: Request) -> dict[str, str]:
    """Query string merged with a urlencoded POST body: these APIs accept both."""
    params = dict(request.query_params)
    if request.method == "POST":
        ctype = request.headers.get("content-type", "")
        if ctype.startswith("application/x-www-form-urlencoded"):
            form = await request.form()
            params.update({k: str(v) for k, v in form.items()})
    return params


def load_corpus(path: Path) -> dict[str, Any]:
    """One mimic's corpus file (``knowledge/<name>.json``)."""
    try:
        with path.open(encoding="utf-8") as fh:
            data: dict[str, Any] = json.load(fh)
    except FileNotFoundError:
        raise FileNotFoundError(f"knowledge mimic corpus missing: {path}") from None
    return data


def int_param(params: Mapping[str, str], name: str, default: int) -> int:
    """An integer parameter, ``default`` when absent or empty (``ValueError`` if not a number)."""
    raw = params.get(name)
    return default if raw in (None, "") else int(raw)

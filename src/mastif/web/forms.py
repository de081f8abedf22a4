"""Reading the sites' form and query fields, and the 400/404 answers to bad ones.

Every handler parses its input through these helpers, so a malformed field is always a
400 page whose message says which field and what was wrong, and an unknown item a 404.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import NoReturn

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException

EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")


def bad_request(message: str) -> NoReturn:
    """Reject malformed input with a 400 page that says what to fix."""
    raise HTTPException(status_code=400, detail=message)


def not_found(message: str) -> NoReturn:
    raise HTTPException(status_code=404, detail=message)


def parse_int(raw: str | None, name: str, lo: int, hi: int, default: int | None = None) -> int:
    """An integer form/query field in ``[lo, hi]``; ``default`` when empty (else 400)."""
    if raw is None or not raw.strip():
        if default is not None:
            return default
        bad_request(f"'{name}' is required.")
    try:
        value = int(raw.strip())
    except ValueError:
        bad_request(f"'{name}' must be a whole number, got {raw!r}.")
    if not lo <= value <= hi:
        bad_request(f"'{name}' must be between {lo} and {hi}, got {value}.")
    return value


def parse_float(raw: str | None, name: str, lo: float, hi: float) -> float | None:
    """An optional decimal field in ``[lo, hi]`` (``$`` and ``,`` allowed); ``None`` if empty."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip().lstrip("$").replace(",", "")
    try:
        value = float(text)
    except ValueError:
        bad_request(f"'{name}' must be a number, got {raw!r}.")
    if not (lo <= value <= hi):
        bad_request(f"'{name}' must be between {lo:g} and {hi:g}, got {raw!r}.")
    return value


def parse_date(raw: str | None, name: str) -> dt.date | None:
    """An optional ``YYYY-MM-DD`` date (the value an ``<input type=date>`` submits)."""
    if raw is None or not raw.strip():
        return None
    try:
        return dt.date.fromisoformat(raw.strip())
    except ValueError:
        bad_request(f"'{name}' must be a date in YYYY-MM-DD format, got {raw!r}.")


def field_text(form: FormData, name: str) -> str:
    """A text form field, stripped; ``""`` when absent (uploads are not text)."""
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def require_text(form: FormData, name: str, label: str) -> str:
    value = field_text(form, name)
    if not value:
        bad_request(f"{label} is required.")
    return value


def parse_email(raw: str) -> str:
    if not EMAIL_RE.match(raw):
        bad_request(f"{raw!r} is not a valid email address.")
    return raw

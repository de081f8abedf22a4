"""Programmatic success checks for sandbox tasks.

The LLM judge scores how well an agent did; these checks are the objective ground truth
beside it: they look only at the agent's final answer text and at the server-side state
of the run's sandbox session (:mod:`mastif.web.store`), so "did the right item end up
in the cart" never depends on a model's opinion.

Grammar (a check is a small JSON object)::

    {"kind": "answer", "any": [...], "all": [...], "none": [...]}
        "any" and/or "all" is required (non-empty lists of strings or numbers); "any"
        passes when at least one pattern occurs in the answer, "all" when every one does,
        "none" (optional) fails the check when any of its patterns occurs, which guards
        against hedged answers that list every candidate.
    {"kind": "state", "expect": {...}}
        "expect" is matched against the session snapshot (see below).
    {"kind": "all", "checks": [check, ...]}
        every sub-check must pass.

Answer normalisation. Both the answer and each pattern are turned into token sequences;
a pattern matches when its tokens occur as a contiguous run in the answer's tokens, so
matches always fall on word and number boundaries (``"cat"`` never matches ``"catalog"``).

* text is Unicode-normalised (NFKD), accents are dropped and letters lower-cased;
* a token is a run of letters or a number; everything else (spaces, punctuation,
  currency signs, ``%``, ``/``, ``:``, ``-``) only separates tokens, so ``"4.5/5"`` holds
  the tokens ``4.5`` and ``5`` and ``"19:30"`` holds ``19`` and ``30``;
* numbers are compared by value: thousands separators (``1,299``) and trailing decimal
  zeros are removed and leading zeros dropped, so ``"$1,299.00"``, ``"1299"`` and
  ``"1299.0"`` are all the token ``1299``; ``"45"`` and ``"4.5"`` stay different;
* words get a light plural fold (``hours`` -> ``hour``; words of at most 3 letters and
  words ending in ``ss`` are kept), applied to both sides.

State matching (``expected`` against the snapshot, recursively):

* dicts: every expected key must exist and match; extra keys in the state are ignored;
* lists: same length, and the elements match as an unordered multiset (each expected
  element pairs with a distinct actual element it matches), so "exactly these items";
* strings: equal after trimming, collapsing whitespace and case-folding (people type
  ``save10`` and ``Ana@Example.com``); ids and ISO dates (``2025-07-10``) are compared the
  same way, which for them means exactly;
* numbers: equal within 0.005 (money is rounded to cents); ``true``/``false`` are not
  numbers; ``null`` matches only ``null``.

``validate_check`` also rejects ``state`` checks whose top-level keys or section keys are
not in the snapshot schema, so a misspelt key cannot make a check that never passes.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from mastif.web.store import empty_state

KINDS = ("answer", "state", "all")
NUMBER_TOLERANCE = 0.005

_TOKEN_RE = re.compile(
    r"(?P<num>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?)|(?P<word>[^\W\d_]+)"
)


@dataclass(frozen=True)
class CheckResult:
    """Outcome of a check: ``detail`` says what matched or what was missing."""

    success: bool
    detail: str


def _canonical_number(text: str) -> str:
    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the regex only yields valid numbers
        return text
    return format(value.normalize(), "f")


def _fold_word(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def answer_tokens(text: str) -> list[str]:
    """The normalised tokens of ``text`` (see the module docstring for the rules)."""
    decomposed = unicodedata.normalize("NFKD", text)
    folded = "".join(c for c in decomposed if not unicodedata.combining(c)).lower()
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(folded):
        if match.group("num") is not None:
            tokens.append(_canonical_number(match.group("num")))
        else:
            tokens.append(_fold_word(match.group("word")))
    return tokens


def contains_pattern(answer: str, pattern: str | int | float) -> bool:
    """Whether ``pattern``'s tokens occur contiguously in ``answer``'s tokens."""
    needle = answer_tokens(str(pattern))
    hay = answer_tokens(answer)
    if not needle:
        return False
    n = len(needle)
    return any(hay[i : i + n] == needle for i in range(len(hay) - n + 1))


# --------------------------------------------------------------------------- validation


def validate_check(check: Any) -> None:
    """Raise ``ValueError`` with a precise message if ``check`` is not a well-formed check."""
    _validate(check, "check")


def _validate(check: Any, where: str) -> None:
    if not isinstance(check, dict):
        raise ValueError(f"{where}: a check must be an object, got {type(check).__name__}")
    kind = check.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{where}: 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    allowed = {
        "answer": {"kind", "any", "all", "none"},
        "state": {"kind", "expect"},
        "all": {"kind", "checks"},
    }[kind]
    extra = sorted(set(check) - allowed)
    if extra:
        raise ValueError(f"{where}: unknown key(s) for kind {kind!r}: {', '.join(extra)}")
    if kind == "answer":
        if "any" not in check and "all" not in check:
            raise ValueError(f"{where}: an answer check needs 'any' and/or 'all'")
        for key in ("any", "all", "none"):
            if key in check:
                _validate_patterns(check[key], f"{where}.{key}")
    elif kind == "state":
        _validate_expect(check.get("expect"), f"{where}.expect")
    else:
        subs = check.get("checks")
        if not isinstance(subs, list) or not subs:
            raise ValueError(f"{where}: 'checks' must be a non-empty list of checks")
        for i, sub in enumerate(subs):
            _validate(sub, f"{where}.checks[{i}]")


def _validate_patterns(patterns: Any, where: str) -> None:
    if not isinstance(patterns, list) or not patterns:
        raise ValueError(f"{where}: must be a non-empty list of strings or numbers")
    for i, pattern in enumerate(patterns):
        if isinstance(pattern, bool) or not isinstance(pattern, str | int | float):
            raise ValueError(f"{where}[{i}]: must be a string or number, got {pattern!r}")
        if not answer_tokens(str(pattern)):
            raise ValueError(f"{where}[{i}]: {pattern!r} has no words or numbers to match")


def _validate_expect(expect: Any, where: str) -> None:
    if not isinstance(expect, dict) or not expect:
        raise ValueError(f"{where}: must be a non-empty object")
    schema = empty_state()
    for section, value in expect.items():
        if section not in schema:
            raise ValueError(
                f"{where}: unknown state section {section!r}; expected one of {', '.join(schema)}"
            )
        if not isinstance(value, dict):
            raise ValueError(f"{where}.{section}: must be an object")
        for key in value:
            if key not in schema[section]:
                raise ValueError(
                    f"{where}.{section}: unknown key {key!r}; expected one of "
                    f"{', '.join(schema[section])}"
                )
        _validate_json(value, f"{where}.{section}")


def _validate_json(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: keys must be strings, got {key!r}")
            _validate_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _validate_json(item, f"{where}[{i}]")
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(f"{where}: {type(value).__name__} is not a JSON value")


# --------------------------------------------------------------------------- evaluation


def evaluate_check(
    check: dict[str, Any], final_answer: str | None, state: dict[str, Any]
) -> CheckResult:
    """Evaluate ``check`` on the run's final answer and session snapshot.

    Raises ``ValueError`` for a malformed check (a task-set bug, not an agent failure).
    """
    validate_check(check)
    return _evaluate(check, final_answer or "", state)


def _evaluate(check: dict[str, Any], answer: str, state: dict[str, Any]) -> CheckResult:
    kind = check["kind"]
    if kind == "answer":
        return _evaluate_answer(check, answer)
    if kind == "state":
        problem = _match(check["expect"], state, "state")
        if problem is None:
            return CheckResult(True, "state matches the expectation")
        return CheckResult(False, problem)
    results = [_evaluate(sub, answer, state) for sub in check["checks"]]
    detail = "; ".join(("ok: " if r.success else "FAILED: ") + r.detail for r in results)
    return CheckResult(all(r.success for r in results), detail)


def _evaluate_answer(check: dict[str, Any], answer: str) -> CheckResult:
    notes: list[str] = []
    ok = True
    if "any" in check:
        found = [p for p in check["any"] if contains_pattern(answer, p)]
        if found:
            notes.append(f"answer contains {found[0]!r}")
        else:
            ok = False
            notes.append(f"answer contains none of {_show(check['any'])}")
    if "all" in check:
        missing = [p for p in check["all"] if not contains_pattern(answer, p)]
        if missing:
            ok = False
            notes.append(f"answer is missing {_show(missing)}")
        else:
            notes.append(f"answer contains all of {_show(check['all'])}")
    forbidden = [p for p in check.get("none", []) if contains_pattern(answer, p)]
    if forbidden:
        ok = False
        notes.append(f"answer contains forbidden {_show(forbidden)}")
    return CheckResult(ok, "; ".join(notes))


def _show(patterns: Sequence[Any]) -> str:
    return "[" + ", ".join(repr(p) for p in patterns) + "]"


def _norm_str(value: str) -> str:
    return " ".join(value.split()).casefold()


def _match(expected: Any, actual: Any, path: str) -> str | None:
    """``None`` when ``actual`` matches ``expected``, else a reason naming the path."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, found {actual!r}"
        for key, sub in expected.items():
            if key not in actual:
                return f"{path}: missing key {key!r}"
            problem = _match(sub, actual[key], f"{path}.{key}")
            if problem is not None:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected a list, found {actual!r}"
        if len(expected) != len(actual):
            return (
                f"{path}: expected {len(expected)} item(s), found {len(actual)}: {_brief(actual)}"
            )
        unmatched = _unmatched(expected, actual, path)
        if unmatched is not None:
            return (
                f"{path}: no distinct item matches {_brief(expected[unmatched])}; "
                f"found {_brief(actual)}"
            )
        return None
    if isinstance(expected, bool) or expected is None:
        if actual is expected:
            return None
        return f"{path}: expected {expected!r}, found {actual!r}"
    if isinstance(expected, int | float):
        if (
            isinstance(actual, int | float)
            and not isinstance(actual, bool)
            and abs(float(actual) - float(expected)) <= NUMBER_TOLERANCE
        ):
            return None
        return f"{path}: expected {expected!r}, found {actual!r}"
    if isinstance(expected, str):
        if isinstance(actual, str) and _norm_str(actual) == _norm_str(expected):
            return None
        return f"{path}: expected {expected!r}, found {actual!r}"
    return f"{path}: unsupported expected value {expected!r}"  # pragma: no cover


def _unmatched(expected: list[Any], actual: list[Any], path: str) -> int | None:
    """Index of an expected element left without a partner in a maximum matching.

    Kuhn's augmenting-path bipartite matching: greedy pairing would wrongly fail when a
    loose expectation grabs the only element a stricter one could match.
    """
    fits = [
        [j for j, act in enumerate(actual) if _match(exp, act, f"{path}[{j}]") is None]
        for exp in expected
    ]
    partner: dict[int, int] = {}  # actual index -> expected index

    def augment(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in partner or augment(partner[j], seen):
                partner[j] = i
                return True
        return False

    for i in range(len(expected)):
        if not augment(i, set()):
            return i
    return None


def _brief(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

"""Cutting text to a length between words, never inside one.

A prompt shows clipped tool results and node outputs (``workflow.format_history``) and
tools cap what they return (:func:`clip_text`). A cut inside a word can split the
sandbox's ``127.0.0.1:PORT`` — different in every stack job, and replaced by a stand-in
for the response cache's key only when whole (``providers.gateway.Gateway._neutralise``) —
into ``127.0.0.1:4``: the same run's prompt then differs between two jobs and misses the
cache (found as a flaky ``tests/execution/test_execution.py::test_cached_rerun_...``). It can also
leave half a number (``$129.9``) for the model to copy. Cutting between words keeps each
URL and number whole or drops it whole.

:func:`clip_text` is the one cap on what a page, a tool or a failure hands on: every tool
result's output *and* error (:class:`mastif.tools.base.ToolResult`), every error text a
run's trace stores (:mod:`mastif.core.trace`: a tool call's, an LLM call's, the run's own),
so what reaches a prompt, a Parquet file and the viewer (issue 49: a page-controlled URL
put a 2,000,134-character error into the next prompt and the run's Parquet).
"""

from __future__ import annotations


def head_at_word(text: str, limit: int) -> str:
    """The start of ``text`` of at most ``limit`` characters, ending between two words.

    ``text`` itself if it fits. Otherwise the cut is at the last whitespace at or before
    ``limit`` (trailing whitespace dropped); only a word longer than half of ``limit``
    (no whitespace in the second half) is cut inside, at ``limit``.
    """
    if len(text) <= limit:
        return text
    for i in range(limit, limit // 2, -1):
        if text[i].isspace():
            return text[:i].rstrip()
    return text[:limit]


#: The longest text a tool hands back to an agent, output or error, and the longest error
#: text a trace stores: tiny models have tiny context windows, and an API model bills by
#: the token.
MAX_TEXT_CHARS = 8000


def clip_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, the note saying how many were dropped
    included, so the model knows it is partial.

    The cut falls between words (:func:`head_at_word`): a page listing cut inside the
    sandbox's ``127.0.0.1:PORT`` would differ between stack jobs past the response cache's
    stand-in for it. A text it returns is returned unchanged by a second cut at the same
    limit (a tool's own cut and :class:`~mastif.tools.base.ToolResult`'s do not stack)."""
    if len(text) <= limit:
        return text
    # room for the note with the largest count it can carry (every character dropped)
    room = len(f"\n... [truncated {len(text)} characters]")
    if limit <= 2 * room:  # too small for a note to be worth its room: a bare cut
        return text[:limit]
    head = head_at_word(text, limit - room)
    return f"{head}\n... [truncated {len(text) - len(head)} characters]"


def clip_optional(text: str | None, limit: int = MAX_TEXT_CHARS) -> str | None:
    """:func:`clip_text` of ``text``; ``None`` (no error) stays ``None``."""
    return None if text is None else clip_text(text, limit)

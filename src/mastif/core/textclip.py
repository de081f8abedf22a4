"""Cutting text to a length between words, never inside one.

A prompt shows clipped tool results and node outputs (``workflow.format_history``) and
tools cap their output (``tools.builtin._truncate``). A cut inside a word can split the
sandbox's ``127.0.0.1:PORT`` — different in every stack job, and replaced by a stand-in
for the response cache's key only when whole (``providers.gateway.Gateway._neutralise``) —
into ``127.0.0.1:4``: the same run's prompt then differs between two jobs and misses the
cache (found as a flaky ``tests/execution/test_execution.py::test_cached_rerun_...``). It can also
leave half a number (``$129.9``) for the model to copy. Cutting between words keeps each
URL and number whole or drops it whole.
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

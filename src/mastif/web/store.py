"""Per-session state of the offline web sandbox.

Every benchmark run talks to the sandbox with its own session cookie, so one run's cart,
orders or price alerts can never leak into another run's success check. The state is
kept in memory only: the sandbox lives for one benchmark process, and a fresh server
must start from an empty world to keep runs reproducible.

Snapshot shape (what :meth:`SessionStore.snapshot` returns and what ``state`` checks in
:mod:`mastif.tasks.checks` are matched against; every value is plain JSON)::

    {
      "shop": {
        "cart": [{"sku": "AUD-101", "qty": 2}],          # in the order items were added
        "coupon": "SAVE10" | None,                       # canonical upper-case code
        "orders": [{
          "order_id": "SS-1001",
          "items": [{"sku": "AUD-101", "qty": 2, "unit_price": 129.99}],
          "coupon": "SAVE10" | None,
          "subtotal": 259.98, "discount": 26.0,
          "shipping_method": "standard" | "express", "shipping_cost": 0.0,
          "total": 233.98,
          "name": "...", "email": "...", "address": "..."
        }]
      },
      "travel": {
        "alerts": [{
          "alert_id": 1,
          "hotel": "alfama-terrace" | None,              # hotel id, None = any hotel in city
          "city": "lisbon",                              # city id
          "checkin": "2025-07-10", "checkout": "2025-07-13",
          "guests": 2, "max_price": 180.0,               # max nightly price in USD
          "email": "..."
        }]
      },
      "events": {
        "watchlist": [{"kind": "movie" | "match", "id": "little-comet"}],
        "bookings": [{
          "booking_id": "CP-501", "movie": "little-comet", "cinema": "orpheum",
          "time": "13:30", "seats": 3, "total": 40.5
        }]
      }
    }

Transient UI data (one-shot "flash" messages shown after a redirect) is kept beside the
state, never inside it, so snapshots hold only what a task could be judged on.
"""

from __future__ import annotations

import copy
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Sessions kept at once (least recently used dropped first); runs use one or a few each.
DEFAULT_MAX_SESSIONS = 1000

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
"""Accepted session ids: long enough not to collide by accident, safe in a cookie."""


def empty_state() -> dict[str, Any]:
    """The state of a session that has done nothing yet (a new dict every call)."""
    return {
        "shop": {"cart": [], "coupon": None, "orders": []},
        "travel": {"alerts": []},
        "events": {"watchlist": [], "bookings": []},
    }


def is_valid_session_id(value: str) -> bool:
    """Whether ``value`` may be used as a session id (cookie-safe and not trivially short)."""
    return bool(SESSION_ID_RE.match(value))


class SessionStore:
    """Thread-safe map from session id to state.

    The server's event loop mutates state while the benchmark (another thread) reads
    snapshots, so every access goes through one lock; :meth:`edit` holds it for the whole
    read-modify-write of a request so two concurrent requests of one session cannot
    interleave half-applied changes.

    At most ``max_sessions`` sessions are kept: registering one more drops the least
    recently used (with its queued messages), so a flood of cookie-less requests cannot
    grow the store without bound. A run's own session is used on every request it makes
    and so stays among the most recent.
    """

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self.max_sessions = max_sessions
        self._lock = threading.RLock()
        self._states: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._flash: dict[str, list[tuple[str, str]]] = {}
        self._counters: dict[str, int] = {}

    def new_session(self) -> str:
        """Register and return a fresh random session id."""
        with self._lock:
            while True:
                sid = secrets.token_urlsafe(18)
                if sid not in self._states:
                    self._put(sid, empty_state())
                    return sid

    def _put(self, session: str, state: dict[str, Any]) -> None:
        """Store ``state`` as the most recent session; drop the oldest beyond the bound."""
        self._states[session] = state
        self._states.move_to_end(session)
        while len(self._states) > self.max_sessions:
            old, _ = self._states.popitem(last=False)
            self._flash.pop(old, None)

    def ensure(self, session: str) -> None:
        """Register ``session`` with an empty state if it is new (ids chosen by a client)."""
        if not is_valid_session_id(session):
            raise ValueError(f"invalid session id {session!r}")
        with self._lock:
            self._put(session, self._states.get(session) or empty_state())

    def __contains__(self, session: object) -> bool:
        with self._lock:
            return session in self._states

    def sessions(self) -> list[str]:
        """Ids of all registered sessions (for debugging and tests)."""
        with self._lock:
            return list(self._states)

    def snapshot(self, session: str) -> dict[str, Any]:
        """A deep copy of the session's state; the empty state for an unknown session.

        Unknown sessions are not registered: reading must not create state, otherwise a
        typo in a runner would silently look like "a run that did nothing".
        """
        with self._lock:
            state = self._states.get(session)
            return copy.deepcopy(state) if state is not None else empty_state()

    @contextmanager
    def edit(self, session: str) -> Iterator[dict[str, Any]]:
        """Hold the lock and yield a working copy of the state; commit it on normal exit.

        An exception inside the block (a rejected form, say) discards the copy, so a
        request that fails half-way never leaves half-applied changes behind.
        """
        with self._lock:
            working = copy.deepcopy(self._states.get(session) or empty_state())
            yield working
            self._put(session, working)

    def next_number(self, name: str, start: int) -> int:
        """A process-wide increasing counter (order and booking numbers are unique)."""
        with self._lock:
            value = self._counters.get(name, start - 1) + 1
            self._counters[name] = value
            return value

    def flash(self, session: str, message: str, level: str = "info") -> None:
        """Queue a message to show on the session's next page (after a redirect)."""
        with self._lock:
            if session not in self._states:  # flashes live only as long as their session
                self._put(session, empty_state())
            self._flash.setdefault(session, []).append((level, message))

    def pop_flashes(self, session: str) -> list[tuple[str, str]]:
        """Take and clear the session's queued messages as ``(level, text)`` pairs."""
        with self._lock:
            return self._flash.pop(session, [])

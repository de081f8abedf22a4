"""Fixtures shared by the sandbox's tests: a running :class:`SandboxServer` per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mastif.web.server import SandboxServer


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer() as srv:
        yield srv

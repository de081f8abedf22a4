"""The checkout's paths for the bench scripts (run as ``python bench/<script>.py``, so their
own folder, not the checkout, is on ``sys.path``): puts the checkout on ``sys.path`` and
re-exports :data:`tests.support.paths.REPO`, the one definition of where it is."""

from __future__ import annotations

import sys
from pathlib import Path

# a bench script's sys.path[0] is bench/; tests.support lives one folder up
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.paths import REPO  # noqa: E402

__all__ = ["REPO"]

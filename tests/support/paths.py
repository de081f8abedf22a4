"""Where the checkout is, for tests and bench scripts: one definition of each path."""

from __future__ import annotations

import sys
from pathlib import Path

#: the repository's root (tests/support/paths.py is two folders below it)
REPO = Path(__file__).resolve().parents[2]
#: the tests' own folder (fixtures, plugins, the Node interop clients)
TESTS = REPO / "tests"
#: the environment's scripts (snakemake, mastif, snakefmt), beside its python
BIN = Path(sys.executable).parent

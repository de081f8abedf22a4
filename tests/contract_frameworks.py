"""The frameworks the contract tests run on: mastif's own, or the ones named in
``MASTIF_TEST_FRAMEWORKS`` (comma-separated), so a plugin's author runs the same contract
on an installed plugin: ``MASTIF_TEST_FRAMEWORKS=myframework pytest tests/test_workflow.py``."""

from __future__ import annotations

import os

from mastif.frameworks import FRAMEWORKS

CONTRACT_FRAMEWORKS: tuple[str, ...] = (
    tuple(n.strip() for n in os.environ.get("MASTIF_TEST_FRAMEWORKS", "").split(",") if n.strip())
    or FRAMEWORKS
)

"""An offline Hugging Face hub cache holding Mind2Web, built from the task fixtures
(written for this project, in Mind2Web's format), for the task-source and paper tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.paths import TESTS

FIXTURES = TESTS / "fixtures" / "tasks"
TRAIN_FILES = ["mind2web_train_0.json", "mind2web_train_1.json"]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO_ID = "osunlp/Mind2Web"


def make_hub_cache(root: Path, *, test_zip: Path | None = None) -> Path:
    """A hub cache holding osunlp/Mind2Web at COMMIT, with ``main`` pointing at it."""
    repo = root / "datasets--osunlp--Mind2Web"
    snapshot = repo / "snapshots" / COMMIT
    (snapshot / "data" / "train").mkdir(parents=True)
    # the hub names them train_0 .. train_10; 10 must sort after 2 (natural order)
    shutil.copy(FIXTURES / TRAIN_FILES[0], snapshot / "data" / "train" / "train_2.json")
    shutil.copy(FIXTURES / TRAIN_FILES[1], snapshot / "data" / "train" / "train_10.json")
    if test_zip is not None:
        shutil.copy(test_zip, snapshot / "test.zip")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return root

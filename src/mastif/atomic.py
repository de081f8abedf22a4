"""Write a file so that readers see either the old file or the whole new one.

The response cache, the Mind2Web extract cache and the log importer all write files that a
concurrent reader (another job) or a later run trusts as complete: each is written beside
its target and renamed over it, so a killed writer leaves no half file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write`` on a temporary path in ``path``'s directory, then rename it to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)

"""Write a file so that readers see either the old file or the whole new one.

The response cache, the Mind2Web extract cache and the log importer all write files that a
concurrent reader (another job) or a later run trusts as complete: each is written beside
its target and renamed over it, so a killed writer leaves no half file. Append-only JSONL
files (run checkpoints, the judging checkpoint, the budget ledger) are appended with
:func:`append_lines` and read with :func:`read_json_lines`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


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


def append_lines(path: Path, data: bytes) -> None:
    """Append ``data`` (whole lines, each ending in a newline) to ``path`` and fsync it.

    A writer killed mid-write leaves a last line without its newline: it is ended first, so
    the new lines are not glued to it (readers skip the torn line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab+") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def read_json_lines(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of an append-only JSONL file, one per whole line, and how many
    non-blank lines were not one (a line being written now, or torn by a kill; a line that
    is not UTF-8 or not an object). A missing file has none: ``([], 0)``."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return [], 0
    records: list[dict[str, Any]] = []
    unreadable = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            unreadable += 1
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            unreadable += 1
    return records, unreadable

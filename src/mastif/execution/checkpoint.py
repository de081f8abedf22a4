"""A stack's finished runs, appended as they finish: what an interrupted job resumes from."""

from __future__ import annotations

from pathlib import Path

from mastif.core.atomic import append_lines, read_json_lines
from mastif.core.trace import RunTrace


class Checkpoint:
    """Append-only JSONL of finished runs, one file per shard job; survives a killed job.

    It lives outside Snakemake's declared outputs, so a killed or failed job keeps it.
    :meth:`load` reads every ``*.jsonl`` beside ``path`` (the stack's other shards, also
    under an earlier shard count), so a finished run is found wherever it was written.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, RunTrace]:
        """Every finished run of the stack: this shard's file and those beside it."""
        done: dict[str, RunTrace] = {}
        if not self.path.parent.is_dir():
            return done
        for path in sorted(self.path.parent.glob("*.jsonl")):
            done.update(_read(path))
        return done

    def load_own(self) -> dict[str, RunTrace]:
        """The runs appended to this shard's file only (what one job wrote)."""
        return _read(self.path) if self.path.is_file() else {}

    def append(self, trace: RunTrace) -> None:
        append_lines(self.path, trace.to_json().encode() + b"\n")

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _read(path: Path) -> dict[str, RunTrace]:
    done: dict[str, RunTrace] = {}
    # a torn last line from a kill mid-write is skipped: that run is redone
    for record in read_json_lines(path)[0]:
        try:
            trace = RunTrace.from_record(record)
        except (TypeError, KeyError, ValueError, AttributeError):
            continue  # not a run this version wrote: redone
        done[trace.run_id] = trace
    return done

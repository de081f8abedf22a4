"""Read a local task table (JSON, JSONL, CSV, Parquet) as records, each with where it came from.

The format is the file's suffix unless the config names one. A JSON file holds a list of
objects (Mind2Web's data files and Online-Mind2Web's task file are such lists).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import orjson
import polars as pl

FORMATS = ("json", "jsonl", "csv", "parquet")
_SUFFIXES = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
_SUFFIXES |= {".parquet": "parquet", ".pq": "parquet"}

Records = list[tuple[str, dict[str, Any]]]


class TableError(ValueError):
    """A task table that cannot be read (the message names the file and the place)."""


def table_format(path: Path, fmt: str | None = None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise TableError(f"{path}: unknown format {fmt!r}; expected one of {FORMATS}")
        return fmt
    try:
        return _SUFFIXES[path.suffix.lower()]
    except KeyError:
        raise TableError(
            f"{path}: cannot tell the format from the suffix {path.suffix!r}; "
            f"set tasks.format to one of {', '.join(FORMATS)}"
        ) from None


def read_records(path: str | Path, fmt: str | None = None) -> tuple[Records, list[str]]:
    """The file's records as ``(where, record)`` pairs, and the columns it has."""
    path = Path(path)
    fmt = table_format(path, fmt)
    if not path.is_file():
        raise TableError(f"{path}: task file not found")
    reader = {"json": _json, "jsonl": _jsonl, "csv": _csv, "parquet": _parquet}[fmt]
    try:
        records, columns = reader(path)
    except UnicodeDecodeError as exc:
        raise TableError(
            f"{path}: task file is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    if not records:
        raise TableError(f"{path}: no tasks in file")
    return records, columns


def _columns(records: Records) -> list[str]:
    return sorted({k for _, r in records if isinstance(r, dict) for k in r})


def _json(path: Path) -> tuple[Records, list[str]]:
    try:
        # orjson: Mind2Web's data files are ~600 MB each
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise TableError(f"{path}: invalid JSON: {exc}") from exc
    if not isinstance(data, list):
        raise TableError(f"{path}: expected a JSON list of task objects, got {type(data).__name__}")
    records = [(f"{path}:item {i}", r) for i, r in enumerate(data)]
    return records, _columns(records)


def _jsonl(path: Path) -> tuple[Records, list[str]]:
    records: Records = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((f"{path}:{lineno}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TableError(f"{path}:{lineno}: invalid JSON: {exc}") from exc
    return records, _columns(records)


def _csv(path: Path) -> tuple[Records, list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        # row numbers as a spreadsheet shows them: the header is row 1
        records = [(f"{path}:row {i}", dict(row)) for i, row in enumerate(reader, start=2)]
        columns = list(reader.fieldnames or [])
    for where, row in records:
        if None in row:
            raise TableError(f"{where}: more cells than the header has columns")
    return records, columns


def _parquet(path: Path) -> tuple[Records, list[str]]:
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars raises several error types for a broken file
        raise TableError(f"{path}: not a readable Parquet file: {exc}") from exc
    records = [(f"{path}:row {i}", row) for i, row in enumerate(frame.iter_rows(named=True))]
    return records, frame.columns

"""The append-only JSONL files' one reader (run checkpoints, judging checkpoint, ledger)."""

from __future__ import annotations

from pathlib import Path

from mastif.core.atomic import append_lines, read_json_lines


def test_whole_object_lines_are_read_and_the_rest_counted(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    append_lines(path, b'{"a": 1}\n\n[1, 2]\n{"b": 2}\n')
    with path.open("ab") as fh:  # a writer killed mid-line, then a non-UTF-8 line
        fh.write(b'{"c": 3')
    append_lines(path, b'{"d": "\xff"}\n{"e": 5}\n')
    records, unreadable = read_json_lines(path)
    # the torn line was ended by the next append; the \xff becomes U+FFFD, still an object
    assert records == [{"a": 1}, {"b": 2}, {"d": "\ufffd"}, {"e": 5}]
    assert unreadable == 2  # the list and the torn line


def test_a_missing_file_has_no_records(tmp_path: Path) -> None:
    assert read_json_lines(tmp_path / "gone.jsonl") == ([], 0)

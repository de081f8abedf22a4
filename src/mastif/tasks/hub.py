"""Mind2Web from the Hugging Face hub (``osunlp/Mind2Web``), through the local hub cache.

The dataset keeps its training split as JSON lists in ``data/train/*.json`` and its three
test splits (cross-task ``test_task``, cross-website ``test_website``, cross-domain
``test_domain``) in a password-protected ``test.zip``, so crawlers cannot train on them.
Each record is one task with ``annotation_id``, ``website``, ``domain``, ``subdomain``,
``confirmed_task`` and ``action_reprs`` (plus every step's page HTML, which we drop).

``huggingface_hub`` downloads into its cache (``$HF_HOME``, ``$HF_HUB_CACHE``) and reads
``$HF_TOKEN`` itself; offline (``HF_HUB_OFFLINE=1`` or no network) it serves what the cache
holds. What it cannot serve is an error that says what to do: there is never a fallback
to other tasks. The task fields of each data file are kept in a small extract beside the
hub cache (``$MASTIF_CACHE``, default ``~/.cache/mastif``), keyed by the file's content
identity, so a rerun does not parse 6 GB of HTML again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from mastif.core.atomic import write_atomically
from mastif.core.paths import cache_dir
from mastif.tasks.model import Task
from mastif.tasks.records import RecordError, tasks_from_records

SPLITS = ("train", "test_task", "test_website", "test_domain")
TEST_ARCHIVE = "test.zip"
#: the fields a task needs; the rest of a record (page HTML per step) is not kept
KEEP = ("annotation_id", "website", "domain", "subdomain", "confirmed_task", "action_reprs")


class HubError(ValueError):
    """The dataset cannot be had (offline and not cached, gated, missing, bad password)."""


def extract_cache_dir() -> Path:
    return cache_dir() / "mind2web"


def load_mind2web(
    splits: tuple[str, ...] | list[str],
    *,
    repo_id: str = "osunlp/Mind2Web",
    revision: str = "main",
    endpoint: str | None = None,
    archive_password_env: str = "MIND2WEB_ARCHIVE_PASSWORD",
) -> list[Task]:
    """The tasks of ``splits`` in split order, then file order, then record order.

    A task id (``annotation_id``) occurring twice, within or across splits, is an error.
    """
    unknown = [s for s in splits if s not in SPLITS]
    if unknown or not splits:
        raise HubError(f"unknown Mind2Web split(s) {unknown}; expected some of {SPLITS}")
    tests = [s for s in splits if s != "train"]
    patterns = [f"data/{s}/*.json" for s in splits] + ([TEST_ARCHIVE] if tests else [])
    folder = Path(_download(repo_id, revision, endpoint, patterns, splits))
    records: list[tuple[str, Mapping[str, Any]]] = []
    for split in splits:
        records += _split_records(folder, split, repo_id, archive_password_env)
    try:
        return tasks_from_records(records)
    except RecordError as exc:
        raise HubError(f"{repo_id}: {exc}") from exc


def _download(
    repo_id: str,
    revision: str,
    endpoint: str | None,
    patterns: list[str],
    splits: tuple[str, ...] | list[str],
) -> str:
    """The local snapshot folder holding ``patterns`` (downloaded when the hub is reachable)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    what = f"{repo_id}@{revision} (splits {', '.join(splits)})"
    token_note = "HF_TOKEN is set" if os.environ.get("HF_TOKEN") else "HF_TOKEN is not set"
    try:
        return snapshot_download(
            repo_id,
            repo_type="dataset",
            revision=revision,
            allow_patterns=patterns,
            endpoint=endpoint,
        )
    except GatedRepoError as exc:
        raise HubError(
            f"{what} is gated and this account has no access ({token_note}): accept the "
            f"dataset's conditions at https://huggingface.co/datasets/{repo_id} while logged "
            "in, then set HF_TOKEN to a read token of that account"
        ) from exc
    except RepositoryNotFoundError as exc:
        raise HubError(
            f"{what}: no such dataset on the hub, or it is private and the token has no "
            f"access ({token_note}); check tasks.hub.repo_id"
        ) from exc
    except RevisionNotFoundError as exc:
        raise HubError(
            f"{what}: the hub has no revision {revision!r} (tasks.hub.revision)"
        ) from exc
    except LocalEntryNotFoundError as exc:
        raise HubError(
            f"{what} is not in the local Hugging Face cache and the hub cannot be reached "
            f"({_cause(exc)}). Run once with network access to download it (set HF_TOKEN if "
            "the dataset asks for it), or copy a Hugging Face cache that holds it to "
            "$HF_HOME, or download the files yourself and use tasks.source: file. "
            "No other tasks are used instead."
        ) from exc
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        if status == 401:
            raise HubError(f"{what}: the hub refused the token (401; {token_note})") from exc
        raise HubError(f"{what}: the hub answered HTTP {status}: {exc}") from exc


def _cause(exc: BaseException) -> str:
    inner = exc.__cause__ or exc.__context__
    return f"{type(inner).__name__}: {inner}" if inner else str(exc).splitlines()[0]


def _natural(name: str) -> list[Any]:
    """train_2.json before train_10.json."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _split_records(
    folder: Path, split: str, repo_id: str, password_env: str
) -> list[tuple[str, Mapping[str, Any]]]:
    files = sorted(folder.glob(f"data/{split}/*.json"), key=lambda p: _natural(p.name))
    if files:
        return [rec for f in files for rec in _file_records(f, split)]
    archive = folder / TEST_ARCHIVE
    if split == "train" or not archive.is_file():
        raise HubError(
            f"{repo_id}: split {split} has no data files in the snapshot at {folder} "
            f"(expected data/{split}/*.json" + ("" if split == "train" else f" or {TEST_ARCHIVE}")
            + ")"
        )  # fmt: skip
    return _archive_records(archive, split, repo_id, password_env)


def _file_records(path: Path, split: str) -> list[tuple[str, Mapping[str, Any]]]:
    real = path.resolve()
    stat = real.stat()
    key = _key(str(real), stat.st_size, stat.st_mtime_ns)
    items = _cached(key, lambda: orjson.loads(real.read_bytes()), path)
    return [(f"{split}/{path.name}:item {i}", r) for i, r in enumerate(items)]


def _archive_records(
    archive: Path, split: str, repo_id: str, password_env: str
) -> list[tuple[str, Mapping[str, Any]]]:
    with zipfile.ZipFile(archive) as zf:
        members = sorted(
            (i for i in zf.infolist() if _in_split(i.filename, split)),
            key=lambda i: _natural(i.filename),
        )
        if not members:
            tops = sorted({i.filename.split("/")[0] for i in zf.infolist()})
            raise HubError(
                f"{repo_id}: {archive.name} has no {split}/*.json (it holds: {', '.join(tops)})"
            )
        out: list[tuple[str, Mapping[str, Any]]] = []
        for info in members:
            key = _key(str(archive.resolve()), info.filename, info.CRC, info.file_size)
            items = _cached(key, lambda i=info: _read_member(zf, i, password_env), archive)
            out += [
                (f"{split}/{Path(info.filename).name}:item {n}", r) for n, r in enumerate(items)
            ]
    return out


def _in_split(name: str, split: str) -> bool:
    parts = name.split("/")
    return name.endswith(".json") and split in parts[:-1] and not parts[-1].startswith(".")


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, password_env: str) -> Any:
    encrypted = bool(info.flag_bits & 0x1)
    password = os.environ.get(password_env) if encrypted else None
    if encrypted and not password:
        raise HubError(
            f"{info.filename} in the dataset's test archive is password-protected: set "
            f"${password_env} to the password the dataset's README gives "
            "(tasks.hub.archive_password_env names the variable)"
        )
    try:
        data = zf.read(info, pwd=password.encode() if password else None)
    except RuntimeError as exc:  # zipfile's wrong-password error
        raise HubError(f"{info.filename}: cannot decrypt with ${password_env}: {exc}") from exc
    except NotImplementedError as exc:  # e.g. AES encryption, which zipfile cannot read
        raise HubError(
            f"{info.filename}: {exc}; unpack test.zip with 7-Zip and use tasks.source: file"
        ) from exc
    return orjson.loads(data)


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def _cached(key: str, load: Callable[[], Any], origin: Path) -> list[dict[str, Any]]:
    """The task fields of one data file, from the extract cache or parsed and cached."""
    path = extract_cache_dir() / f"{key}.json"
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            pass  # a torn extract is rebuilt below
    data = load()
    if not isinstance(data, list):
        raise HubError(f"{origin}: expected a JSON list of tasks, got {type(data).__name__}")
    items = [{k: r.get(k) for k in KEEP} if isinstance(r, dict) else r for r in data]
    # a concurrent or killed writer never leaves half an extract
    write_atomically(path, lambda p: p.write_text(json.dumps(items), encoding="utf-8"))
    return items

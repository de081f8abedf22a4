"""The opt-in response cache: model answers stored by the content of the request.

The key is the SHA-256 of the provider name and the request as the gateway sends it (model,
messages, tools, tool_choice, temperature, max_tokens, seed, response format — everything
the framework put in it), so a cached answer is only ever replayed for exactly the same
request. One file per answer under ``<dir>/<key[:2]>/<key>.json``, written to a temporary
file and renamed into place: concurrent jobs (shards, stacks) can share a directory, and a
killed job never leaves a torn entry.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class ResponseCache:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(provider: str, request: bytes) -> str:
        digest = hashlib.sha256(provider.encode() + b"\0")
        digest.update(request)
        return digest.hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> bytes | None:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            self.misses += 1
            return None
        self.hits += 1
        return data

    def put(self, key: str, body: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(body)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

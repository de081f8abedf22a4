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
from pathlib import Path

from mastif.core.atomic import write_atomically


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
        write_atomically(self._path(key), lambda p: p.write_bytes(body))

"""An OpenAI-compatible endpoint and how to open one from a model spec.

Remote providers (OpenAI, vLLM, Ollama, HF's OpenAI route) are used as they are; a local
model gets a llama.cpp server started for the duration of the ``with`` block, a scripted
model (``mastif.providers.scripted``, for smoke tests) its scripted server. The API key
is read from the environment variable the config names, and never stored anywhere else.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from mastif.core.config import ModelSpec


@dataclass(frozen=True)
class Endpoint:
    provider: str
    base_url: str  # ends with /v1
    model: str  # the model name to put in requests
    api_key: str = field(default="", repr=False)
    max_connections: int = 1
    #: a local model's server (``options.server``); None for other providers
    server: str | None = None
    #: llama-server's tool calls by a forced first choice (``options.tool_call_template``,
    #: ``mastif.providers.forced_choice``): the template the gateway renders; None: off
    tool_call_template: str | None = None

    @property
    def cache_provider(self) -> str:
        """The provider part of a response-cache key: a local model's answers depend on
        its server's build and how it makes tool calls, down to the template's text."""
        if self.provider != "local":
            return self.provider
        if self.tool_call_template:
            return f"local/{self.server}/forced-choice:{_digest(self.tool_call_template)}"
        return f"local/{self.server}"


@lru_cache(maxsize=8)
def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


@contextmanager
def open_endpoint(model_id: str, spec: ModelSpec, server_log: Path) -> Iterator[Endpoint]:
    """Yield a live endpoint for ``spec``; a local server is stopped on exit, whatever happens.

    ``server_log`` is where a local or scripted server writes its output.
    """
    if spec.provider == "local":
        from mastif.providers.local import LocalServer

        with LocalServer(spec, Path(server_log)) as server:
            yield Endpoint(
                provider="local",
                base_url=server.base_url,
                model=server.alias,
                api_key="",
                max_connections=spec.options.max_connections,
                server=spec.options.server,
                tool_call_template=spec.options.tool_call_template,
            )
        return
    if spec.provider == "scripted":
        from mastif.providers.scripted import ScriptedServer

        # the script path is relative to the working directory (the workflow's)
        with ScriptedServer(spec.model, Path(server_log), model=model_id) as server:
            yield Endpoint(
                provider="scripted",
                base_url=server.base_url,
                model=model_id,
                api_key="",
                max_connections=spec.options.max_connections,
            )
        return
    api_key = ""
    if spec.api_key_env:
        api_key = os.environ.get(spec.api_key_env, "")
        if not api_key:
            raise RuntimeError(
                f"models.{model_id}.api_key_env names {spec.api_key_env}, which is not set"
            )
    assert spec.base_url is not None  # checked by config validation
    yield Endpoint(
        provider=spec.provider,
        base_url=spec.base_url.rstrip("/"),
        model=spec.model,
        api_key=api_key,
        max_connections=spec.options.max_connections,
    )

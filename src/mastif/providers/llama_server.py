"""Entry point of the local model server: llama-cpp-python's server with two fixes applied.

``python -m mastif.providers.llama_server <llama_cpp.server args>``

Seen with llama-cpp-python 0.3.36, in its ``chatml-function-calling`` handler (the one that
gives small ChatML models native tool calls):

1. The prompt template is rendered by jinja with HTML autoescape on, so every ``"`` in a
   prompt or in tool-call arguments reaches the model as ``&#34;`` — and the model learns to
   write ``&#34;`` back. Chat prompts are not HTML: autoescape is turned off.
2. The completions it runs for a plain message and for tool arguments pass
   ``max_tokens=None``, ignoring the request's ``max_tokens``; a small model then writes
   until the context is full. The request's limit is applied to them.

Both are fixed from outside, by wrapping, so an upgrade of llama-cpp-python that fixes
them upstream makes the wrappers no-ops.
"""

from __future__ import annotations

from typing import Any

HANDLER = "chatml-function-calling"


class _CappedLlama:
    """A ``Llama`` whose ``create_completion`` applies a default ``max_tokens``."""

    def __init__(self, llama: Any, max_tokens: int) -> None:
        self._llama = llama
        self._max_tokens = max_tokens

    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("max_tokens") is None:
            kwargs["max_tokens"] = self._max_tokens
        return self._llama.create_completion(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)


def apply_fixes() -> None:
    import jinja2
    from llama_cpp import llama_chat_format

    jinja2.select_autoescape = lambda *a, **k: False  # type: ignore[assignment]

    registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()
    original = registry.get_chat_completion_handler_by_name(HANDLER)

    def capped_handler(*, llama: Any, max_tokens: int | None = None, **kwargs: Any) -> Any:
        target = _CappedLlama(llama, max_tokens) if max_tokens else llama
        return original(llama=target, max_tokens=max_tokens, **kwargs)

    registry.register_chat_completion_handler(HANDLER, capped_handler, overwrite=True)


def main() -> None:
    apply_fixes()
    from llama_cpp.server.__main__ import main as server_main

    server_main()


if __name__ == "__main__":
    main()

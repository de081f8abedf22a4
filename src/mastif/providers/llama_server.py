"""Entry point of the local model server: llama-cpp-python's server with its chat handler mended.

``python -m mastif.providers.llama_server <llama_cpp.server args>``

Seen with llama-cpp-python 0.3.36, in its ``chatml-function-calling`` handler (the one that
gives small ChatML models native tool calls):

1. The prompt template is rendered by jinja with HTML autoescape on, so every ``"`` in a
   prompt or in tool-call arguments reaches the model as ``&#34;`` — and the model learns to
   write ``&#34;`` back. Chat prompts are not HTML: autoescape is turned off.
2. The completions it runs for a plain message and for tool arguments pass
   ``max_tokens=None``, ignoring the request's ``max_tokens``; a small model then writes
   until the context is full. The request's limit is applied to them.
3. Its template has no branch for ``tool`` messages: a tool result is rendered as an empty
   ``<|im_start|>tool`` header, so the model never sees what a tool returned. Tool messages
   are rendered like user messages, under their own ``tool`` header.
4. The tool list is rendered only inside a system message; a request with tools but no
   system message (what most frameworks send) shows the model no tool at all. An empty
   system message is put first in that case, so the template lists the offered tools. The
   list shows each tool's name and parameters but not its description, so the guidance
   ("Use this tool when ...") never reached the model: the description is added as a
   ``//`` comment line under the name.
5. For a single tool call it also returns the legacy ``function_call`` field, named after
   its follow-up completion (``"python_repl:"``); OpenAI never sends both, and a client
   that reads both runs a phantom second call. It is dropped when ``tool_calls`` is present.

All are fixed from outside, by wrapping; none changes what a correct server would do.
"""

from __future__ import annotations

from typing import Any

HANDLER = "chatml-function-calling"
_USER_BRANCH = "{% if message.role == 'user' %}"
_USER_OR_TOOL_BRANCH = "{% if message.role == 'user' or message.role == 'tool' %}"
_TOOL_HEADER = "functions.{{ tool.function.name }}:\n"
_TOOL_HEADER_WITH_DESCRIPTION = (
    _TOOL_HEADER
    + "{% if tool.function.description %}// {{ tool.function.description }}\n{% endif %}"
)


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

    base_env = llama_chat_format.ImmutableSandboxedEnvironment

    class ToolAwareEnvironment(base_env):  # type: ignore[misc, valid-type]
        def from_string(self, source: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(source, str) and "functions.{{ tool.function.name }}" in source:
                source = source.replace(_USER_BRANCH, _USER_OR_TOOL_BRANCH)
                source = source.replace(_TOOL_HEADER, _TOOL_HEADER_WITH_DESCRIPTION, 1)
            return super().from_string(source, *args, **kwargs)

    llama_chat_format.ImmutableSandboxedEnvironment = ToolAwareEnvironment

    registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()
    original = registry.get_chat_completion_handler_by_name(HANDLER)

    def mended_handler(
        *, llama: Any, messages: list[Any], max_tokens: int | None = None, **kwargs: Any
    ) -> Any:
        if kwargs.get("tools") and not any(m.get("role") == "system" for m in messages):
            messages = [{"role": "system", "content": ""}, *messages]
        target = _CappedLlama(llama, max_tokens) if max_tokens else llama
        response = original(llama=target, messages=messages, max_tokens=max_tokens, **kwargs)
        if isinstance(response, dict):  # not a stream
            for choice in response.get("choices", []):
                message = choice.get("message") or {}
                if message.get("tool_calls"):
                    message.pop("function_call", None)
        return response

    registry.register_chat_completion_handler(HANDLER, mended_handler, overwrite=True)


def main() -> None:
    apply_fixes()
    from llama_cpp.server.__main__ import main as server_main

    server_main()


if __name__ == "__main__":
    main()

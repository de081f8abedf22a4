"""A node's model client: CrewAI's native OpenAI-compatible client at our gateway.

:class:`GatewayLLM` is ``OpenAICompletion`` (what ``crewai.LLM("openai/<model>",
base_url=...)`` builds for a custom endpoint) with plain-HTTP clients of its own (closed to
stop a timed-out run), the node's tool-round cap and its ``tool_choice`` on the first turn.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import openai
from crewai.llms.providers.openai.completion import OpenAICompletion
from pydantic import PrivateAttr

from mastif.frameworks.base import RunContext
from mastif.frameworks.crewai.bridge import Bridge, Visit
from mastif.frameworks.plan import PlannedNode


class _NoApproximateCountWarning(logging.Filter):
    """CrewAI warns on every call that its context preflight estimates tokens (4 chars each)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "approximate input token count" not in record.getMessage()


logging.getLogger("crewai.llms.base_llm").addFilter(_NoApproximateCountWarning())


class _NoFunctions(dict[str, Any]):
    """A function table that is truthy but holds no function."""

    def __bool__(self) -> bool:
        return True


class GatewayLLM(OpenAICompletion):
    """CrewAI's native OpenAI-compatible client at our gateway, with the tool-round cap."""

    _bridge: Bridge | None = PrivateAttr(default=None)

    @property
    def _visit(self) -> Visit | None:
        return self._bridge.visit if self._bridge is not None else None

    def _build_sync_client(self) -> Any:
        # The gateway is plain HTTP on loopback: a client without a certificate store
        # (building one loads the CA bundle, ~18 ms; per node visit that was most of a
        # job's CPU at high concurrency, bench/concurrency.py). Each LLM keeps clients of
        # its own: closing them is how a timed-out run's request in flight is stopped.
        return openai.OpenAI(**self._get_client_params(), http_client=httpx.Client(verify=False))

    def _build_async_client(self) -> Any:
        return openai.AsyncOpenAI(
            **self._get_client_params(), http_client=httpx.AsyncClient(verify=False)
        )

    def call(self, messages: Any, tools: Any = None, *args: Any, **kwargs: Any) -> Any:
        visit, bridge = self._visit, self._bridge
        if bridge is not None:
            bridge.check()
        if tools and visit is not None and visit.tool_rounds >= visit.max_tool_rounds:
            tools = None  # the cap is reached: this turn answers in text
        reply = super().call(messages, tools, *args, **kwargs)
        if tools and visit is not None and isinstance(reply, list) and reply:
            visit.tool_rounds += 1
        return reply

    def _handle_completion(
        self, params: dict[str, Any], available_functions: Any = None, **kwargs: Any
    ) -> Any:
        if "tools" not in params and not available_functions:
            # No tools were offered, so tool calls in the reply were not asked for. Given a
            # function table that knows none of them, CrewAI's client leaves them unrun and
            # returns the reply's text. (llama.cpp sends no tool calls unasked; a scripted
            # server may.)
            available_functions = _NoFunctions()
        return super()._handle_completion(params, available_functions, **kwargs)

    def _prepare_completion_params(self, messages: Any, tools: Any = None) -> dict[str, Any]:
        params = super()._prepare_completion_params(messages, tools)
        visit = self._visit
        if tools and visit is not None and visit.tool_rounds == 0:
            # the node's tool_choice holds for its first turn (CrewAI always sends "auto")
            params["tool_choice"] = visit.node.spec.tool_choice
        return params


def gateway_llm(ctx: RunContext, node: PlannedNode, bridge: Bridge) -> GatewayLLM:
    """The node's model client (one per node and run: its URL names the node)."""
    s = ctx.client_settings(node.name)
    llm = GatewayLLM(
        model=s.model,
        provider="openai",
        custom_openai=True,  # an OpenAI-compatible server: never try OpenAI's /responses
        base_url=s.base_url,
        api_key=s.api_key,
        **s.sampling(),
        **s.client_options(),
        stream=False,
    )
    llm._bridge = bridge
    bridge.llms.append(llm)
    return llm

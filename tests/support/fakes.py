"""A scripted OpenAI-compatible chat server for unit tests of the workflow and runner.

It is a test double for the *model* only: requests still go through our real gateway, the
real LangGraph graph, the real tools. ``respond(payload)`` decides each reply.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from tests.support.servers import QuietHandler, serve

Reply = dict[str, Any]  # {"content": str} or {"tool_calls": [(name, args_dict)]} or {"status": int}


def last_user_text(payload: dict[str, Any]) -> str:
    users = [m for m in payload["messages"] if m["role"] == "user"]
    return users[-1]["content"] if users else ""


def in_interaction_round(payload: dict[str, Any]) -> bool:
    """The request belongs to an interaction round: one of its user turns is the interact
    prompt (the last, or followed by a framework's own text turns of tool results)."""
    return any(
        m["role"] == "user" and "interaction round" in str(m.get("content"))
        for m in payload["messages"]
    )


def opens_interaction_round(payload: dict[str, Any]) -> bool:
    """The request asks for an interaction round's first reply: its last turn is the
    interact prompt, with no tool results after it -- neither OpenAI tool messages nor the
    text turns a framework writes them back as (smolagents: "Observation:" / "Error:")."""
    text = last_user_text(payload)
    at = text.rfind("interaction round")
    if at < 0 or payload["messages"][-1]["role"] != "user":
        return False
    after = text[at:]
    return "Observation:" not in after and "Error:" not in after


class ScriptedChatServer:
    def __init__(self, respond: Callable[[dict[str, Any]], Reply]) -> None:
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        #: each request's Authorization header (None when absent)
        self.authorizations: list[str | None] = []
        outer = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                payload = json.loads(self.rfile.read(length))
                outer.requests.append(payload)
                outer.authorizations.append(self.headers.get("Authorization"))
                reply = outer.respond(payload)
                if "sleep" in reply:
                    time.sleep(reply["sleep"])
                status = reply.get("status", 200)
                body = outer._body(reply) if status == 200 else {"error": {"message": "boom"}}
                if "raw" in reply:
                    data = reply["raw"].encode()
                else:
                    data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._served = serve(Handler)

    @property
    def base_url(self) -> str:
        return f"{self._served.url}/v1"

    def _body(self, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        finish = "stop"
        if reply.get("tool_calls"):
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:8]}",
                    "type": "function",
                    "function": {"name": name, "arguments": args if isinstance(args, str)
                                 else json.dumps(args)},
                }
                for name, args in reply["tool_calls"]
            ]  # fmt: skip
            finish = "tool_calls"
        body: dict[str, Any] = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
        if "usage" in reply:  # a provider's own usage, or None: a response without usage
            body["usage"] = reply["usage"]
            if reply["usage"] is None:
                del body["usage"]
        return body

    def __enter__(self) -> ScriptedChatServer:
        self._served.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._served.stop()


class RecordingProxy:
    """A pass-through to a real OpenAI-compatible server that records every exchange.

    Sits between our gateway and the real llama.cpp server in tests, so what the model
    server reported (usage, tool calls) can be compared with what the trace recorded.
    """

    def __init__(
        self,
        upstream_base_url: str,
        tool_call_template: str | None = None,
    ) -> None:
        """Applies the gateway's mends for a local llama.cpp server;
        ``tool_call_template``: tool calls by a forced first choice, as the gateway makes
        them (``mastif.providers.forced_choice``)."""
        import httpx

        from mastif.providers.forced_choice import ForcedChoice

        forced = ForcedChoice(tool_call_template) if tool_call_template else None

        self.exchanges: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.requests = 0  # every request, answered or not
        client = httpx.Client(base_url=upstream_base_url, timeout=300)
        outer = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802
                from mastif.providers.gateway import normalise_request

                length = int(self.headers.get("Content-Length", 0))
                outer.requests += 1
                # the proxy stands in for the local server: apply the gateway's llama.cpp
                # mends (e.g. max_completion_tokens -> max_tokens) as for a local endpoint
                payload = normalise_request(json.loads(self.rfile.read(length)), "local")
                if forced is not None and forced.applies(payload):
                    r = forced.complete_blocking(upstream_base_url, payload, 300)
                else:
                    r = client.post("/chat/completions", json=payload)
                if r.status_code == 200:
                    outer.exchanges.append((payload, r.json()))
                self.send_response(r.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

        self._served = serve(Handler)

    @classmethod
    def for_server(cls, server: Any) -> RecordingProxy:
        """In front of a running ``LocalServer``, doing what the gateway does for its model
        (its mends for llama.cpp, its tool calls by a forced first choice)."""
        return cls(server.base_url, server.spec.options.tool_call_template)

    @property
    def base_url(self) -> str:
        return f"{self._served.url}/v1"

    def usage(self) -> tuple[int, int]:
        p = sum(resp["usage"]["prompt_tokens"] for _, resp in self.exchanges)
        c = sum(resp["usage"]["completion_tokens"] for _, resp in self.exchanges)
        return p, c

    def tool_calls(self) -> list[tuple[str, str]]:
        """(name, arguments JSON text) of every tool call the model server returned."""
        return [
            (tc["function"]["name"], tc["function"]["arguments"])
            for _, resp in self.exchanges
            for tc in resp["choices"][0]["message"].get("tool_calls") or []
        ]

    def __enter__(self) -> RecordingProxy:
        self._served.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._served.stop()

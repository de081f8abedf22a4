"""Tool calls by a forced first choice (mastif.providers.forced_choice): the prompt, the two
completions it asks llama-server for, and the chat completion it makes of them. The upstream
here is a scripted transport; tests/providers/test_local_server.py runs it on the real llama-server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from mastif.providers.forced_choice import COMPACT_JSON, ForcedChoice, choice_grammar, closed
from tests.support.paths import REPO

TEMPLATE = REPO / "config" / "chat_templates" / "chatml-forced-choice.jinja"

BROWSER = {
    "type": "function",
    "function": {
        "name": "web_browser",
        "description": "Open a URL & read <the> page.",
        "parameters": {
            "type": "object",
            "properties": {"url": {"type": "string"}},
            "required": ["url"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "web_search",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}


def completion(text: str, prompt_tokens: int | None = 100, completion_tokens: int = 4) -> dict:
    usage: dict[str, Any] = {"completion_tokens": completion_tokens}
    if prompt_tokens is not None:
        usage["prompt_tokens"] = prompt_tokens
        usage["prompt_tokens_details"] = {"cached_tokens": 60}
    return {
        "choices": [{"text": text, "index": 0, "finish_reason": "stop"}],
        "usage": usage,
        "timings": {
            "cache_n": 60,
            "prompt_n": 40,
            "prompt_ms": 400.0,
            "predicted_n": completion_tokens,
            "predicted_ms": 80.0,
        },
    }


class Upstream:
    """Answers /completions from a list of replies, recording each request."""

    def __init__(self, *replies: tuple[int, dict]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/completions"
        self.requests.append(json.loads(request.content))
        status, body = self.replies.pop(0)
        return httpx.Response(status, json=body)


def complete(upstream: Upstream, payload: dict[str, Any]) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.MockTransport(upstream)
        async with httpx.AsyncClient(base_url="http://llama/v1", transport=transport) as c:
            return await ForcedChoice(TEMPLATE).complete(c, payload)

    return asyncio.run(go())


def request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "smollm2",
        "messages": [
            {"role": "system", "content": "You are a web agent."},
            {"role": "user", "content": "Find the lake's depth."},
        ],
        "tools": [BROWSER, SEARCH],
        "temperature": 0.7,
        "max_tokens": 96,
        "seed": 7,
        **extra,
    }


def test_the_prompt_lists_the_tools_in_the_system_turn_as_plain_text():
    fc = ForcedChoice(TEMPLATE)
    prompt = fc.render(request()["messages"], [BROWSER, SEARCH])
    assert prompt.startswith("<|im_start|>system\nYou are a web agent.\n\n")
    system = prompt.split("<|im_end|>")[0]
    assert "functions.web_browser:\n// Open a URL & read <the> page.\n" in system
    # JSON as JSON: no HTML escapes a model would copy
    assert '{"type": "object", "properties": {"url": {"type": "string"}}' in system
    assert "functions.web_search:\n{" in system
    assert prompt.endswith(
        "<|im_start|>user\nFind the lake's depth.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_without_a_system_message_the_tools_get_a_system_turn_of_their_own():
    prompt = ForcedChoice(TEMPLATE).render([{"role": "user", "content": "hi"}], [BROWSER])
    assert prompt.startswith("<|im_start|>system\nThese are the functions")
    assert "<|im_start|>user\nhi<|im_end|>" in prompt
    # and no tools, no system turn: plain ChatML
    plain = ForcedChoice(TEMPLATE).render([{"role": "user", "content": "hi"}], [])
    assert plain == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_earlier_calls_and_tool_results_are_in_the_reply_format():
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "web_browser", "arguments": '{"url": "/a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "page A"},
        {"role": "assistant", "content": "It says A."},
    ]
    prompt = ForcedChoice(TEMPLATE).render(messages, [BROWSER])
    assert '<|im_start|>assistant\nfunctions.web_browser:\n{"url": "/a"}<|im_end|>\n' in prompt
    assert "<|im_start|>tool\npage A<|im_end|>\n" in prompt
    assert "<|im_start|>assistant\nmessage:\nIt says A.<|im_end|>\n" in prompt


def test_a_chosen_tool_gets_its_arguments_under_its_schema():
    upstream = Upstream(
        (200, completion("functions.web_browser:", completion_tokens=5)),
        (200, completion('{"url": "/lake"}', prompt_tokens=108, completion_tokens=9)),
    )
    r = complete(upstream, request())
    assert r.status_code == 200
    choice_req, args_req = upstream.requests
    assert choice_req["temperature"] == 0.0 and choice_req["seed"] == 7
    assert choice_req["grammar"] == choice_grammar(["web_browser", "web_search"], True)
    assert (
        '"message:"' in choice_req["grammar"] and '"functions.web_search:"' in choice_req["grammar"]
    )
    assert args_req["prompt"] == choice_req["prompt"] + "functions.web_browser:\n"
    assert args_req["json_schema"] == {
        **BROWSER["function"]["parameters"],
        "additionalProperties": False,
        "x-guidance": COMPACT_JSON,
    }
    assert "additionalProperties" not in BROWSER["function"]["parameters"]
    assert args_req["temperature"] == 0.7 and args_req["max_tokens"] == 96
    body = r.json()
    (call,) = body["choices"][0]["message"]["tool_calls"]
    assert call["function"] == {"name": "web_browser", "arguments": '{"url": "/lake"}'}
    assert call["id"].startswith("call_") and body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["choices"][0]["message"]["content"] is None
    # the prompt once; what the model wrote in both steps
    assert body["usage"] == {
        "prompt_tokens": 100,
        "completion_tokens": 14,
        "total_tokens": 114,
        "prompt_tokens_details": {"cached_tokens": 60},
    }
    assert body["timings"]["prompt_n"] == 80 and body["timings"]["cache_n"] == 60


def test_objects_that_declare_properties_are_closed_to_others():
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "filters": {"type": "object", "properties": {"site": {"type": "string"}}},
            "pages": {"type": "array", "items": {"type": "object", "properties": {"n": {}}}},
            "either": {"anyOf": [{"type": "object", "properties": {"a": {}}}, {"type": "null"}]},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object"},
        },
        "$defs": {"Ref": {"type": "object", "properties": {"id": {"type": "integer"}}}},
    }
    before = json.dumps(schema, sort_keys=True)
    out = closed(schema)
    assert json.dumps(schema, sort_keys=True) == before  # the tool's own schema is untouched
    props = out["properties"]
    assert out["additionalProperties"] is False
    assert props["filters"]["additionalProperties"] is False
    assert props["pages"]["items"]["additionalProperties"] is False
    assert props["either"]["anyOf"][0]["additionalProperties"] is False
    assert props["either"]["anyOf"][1] == {"type": "null"}
    # what a schema says of extra properties stands; an object with no declared properties
    # (a free-form map) stays open
    assert props["headers"]["additionalProperties"] == {"type": "string"}
    assert props["free"] == {"type": "object"}
    assert out["$defs"]["Ref"]["additionalProperties"] is False
    assert closed({"type": "object", "properties": {}}) == {"type": "object", "properties": {}}
    open_ = {"type": "object", "properties": {"a": {}}, "additionalProperties": True}
    assert closed(open_) == open_


def test_a_chosen_message_is_free_text():
    upstream = Upstream(
        (200, completion("message:")),
        (200, completion(" The lake is 40 m deep. ")),
    )
    body = complete(upstream, request()).json()
    assert "json_schema" not in upstream.requests[1]
    assert upstream.requests[1]["prompt"].endswith("<|im_start|>assistant\nmessage:\n")
    message = body["choices"][0]["message"]
    assert message["content"] == "The lake is 40 m deep." and "tool_calls" not in message
    assert body["choices"][0]["finish_reason"] == "stop"


def test_required_leaves_no_message_and_a_named_tool_skips_the_choice():
    upstream = Upstream(
        (200, completion("functions.web_search:")), (200, completion('{"query": "lake"}'))
    )
    complete(upstream, request(tool_choice="required"))
    assert '"message:"' not in upstream.requests[0]["grammar"]
    upstream = Upstream((200, completion('{"query": "lake"}')))
    named = {"type": "function", "function": {"name": "web_search"}}
    body = complete(upstream, request(tool_choice=named)).json()
    (only,) = upstream.requests
    assert only["prompt"].endswith("assistant\nfunctions.web_search:\n")
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "web_search"


def test_unknown_usage_stays_unknown():
    upstream = Upstream(
        (200, completion("functions.web_browser:", prompt_tokens=None)),
        (200, completion('{"url": "/"}')),
    )
    usage = complete(upstream, request()).json()["usage"]
    assert "prompt_tokens" not in usage and "total_tokens" not in usage
    assert usage["completion_tokens"] == 8


def test_a_failing_step_comes_back_as_it_is_for_the_gateway_to_retry():
    upstream = Upstream((503, {"error": {"message": "loading model"}}))
    r = complete(upstream, request())
    assert r.status_code == 503 and len(upstream.requests) == 1
    upstream = Upstream((200, completion("functions.web_browser:")), (500, {"error": "x"}))
    assert complete(upstream, request()).status_code == 500


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            {"tools": [{"type": "function", "function": {"name": 'evil" | x'}}]},
            "tool name 'evil\" | x' is not",
        ),
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "names 'nope'"),
    ],
)
def test_a_request_it_cannot_serve_is_a_400_naming_why(payload, message):
    upstream = Upstream()
    r = complete(upstream, request(**payload))
    assert r.status_code == 400 and message in r.json()["error"]["message"]
    assert upstream.requests == []


def test_it_applies_only_to_requests_that_offer_tools():
    assert ForcedChoice.applies(request())
    assert not ForcedChoice.applies(request(tools=[]))
    assert not ForcedChoice.applies(request(tool_choice="none"))

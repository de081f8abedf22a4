"""Tool calls for small chat models on llama.cpp's server, by a forced first choice.

llama.cpp's own tool calling (the chat template's format, a grammar that starts once the
model writes the call marker) lets a model write prose first, and a 135M model does: with
SmolLM2 0-17% of interact replies held a call (bench/local_server.py). llama-cpp-python's
``chatml-function-calling`` (mastif's earlier server) got ~75% because it makes the model
*choose* how its reply begins, under a grammar, before it writes anything. This module does
the same on llama.cpp's server, prebuilt or compiled (``models.<id>.options.
tool_call_template``), from the gateway, for a request that offers tools:

1. render the conversation with the template (``config/chat_templates/
   chatml-forced-choice.jinja``): the tools listed in the system turn, replies beginning with
   ``message:`` or ``functions.<name>:``;
2. one greedy completion under a grammar allowing only those beginnings (``tool_choice:
   required`` drops ``message:``; a named tool skips the step);
3. a second completion from the chosen beginning, at the request's sampling settings: a
   tool call's arguments constrained to the tool's JSON schema (objects closed to undeclared
   properties, compact JSON: see :func:`closed`), or the message's text.

Both go to the server's OpenAI-compatible ``/completions``; the second prompt extends the
first, so the slot evaluates only the chosen beginning. The reply is an OpenAI chat
completion with one tool call or a message. Its usage: ``prompt_tokens`` the first
completion's prompt (the rendered one; with a named tool, that plus the call's beginning),
``completion_tokens`` what the model wrote in both steps; ``timings`` add up what both
evaluated and generated, ``cache_n`` only the first step's (prefix reuse from earlier
requests, not step 3 reading step 2's prompt). A sub-request that fails is returned as it
is, so the gateway retries it like any other.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

MESSAGE = "message:"
CALL_PREFIX = "functions."
#: a tool name that is safe inside a GBNF string literal and in the rendered prompt
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: the choice is a few tokens; the bound only stops a runaway
CHOICE_MAX_TOKENS = 24
#: llguidance's JSON options: one space after ":" and ",", no other whitespace
COMPACT_JSON = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}
#: sampling fields of a chat request that carry over to both completions
SAMPLING = ("seed", "top_p", "top_k", "min_p", "repeat_penalty", "presence_penalty",
            "frequency_penalty")  # fmt: skip


class ForcedChoiceError(ValueError):
    """A request the forced choice cannot serve (said in the 400 it becomes)."""


def _tojson(value: Any) -> str:
    # plain JSON: jinja's own tojson escapes < > & ' for HTML, which a model would copy
    return json.dumps(value, ensure_ascii=False)


def load_template(path: str | Path) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(autoescape=False, keep_trailing_newline=True)
    env.filters["tojson"] = _tojson
    return env.from_string(Path(path).read_text(encoding="utf-8"))


def choice_grammar(names: list[str], allow_message: bool) -> str:
    """GBNF: the reply begins with ``message:`` or ``functions.<name>:``, nothing else."""
    options = [f'"{CALL_PREFIX}{name}:"' for name in names]
    if allow_message:
        options.append(f'"{MESSAGE}"')
    return "root ::= " + " | ".join(options) + "\n"


#: schema keywords whose value is one subschema, a list of them, or a name → subschema map
_ONE = ("items", "additionalItems", "not", "if", "then", "else", "contains")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "$defs", "definitions", "dependentSchemas")


def closed(schema: Any) -> Any:
    """The schema with every object that lists its ``properties`` closed to others.

    JSON Schema lets an object carry undeclared properties unless ``additionalProperties``
    says otherwise, and most tool schemas say nothing, so under a schema-constrained decoder
    SmolLM2 invented ``type``, ``description`` or whole sub-schemas beside the declared
    arguments: Semantic Kernel refused such calls (6 of 48 in a default run) and one ran into
    max_tokens. A tool's declared properties are its signature, so the arguments keep to
    them; an object that declares no properties, or says what extra ones may be, stays as
    it is. The input is not modified.
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _ONE:
        if isinstance(out.get(key), dict):
            out[key] = closed(out[key])
    for key in _LIST:
        if isinstance(out.get(key), list):
            out[key] = [closed(sub) for sub in out[key]]
    for key in _MAP:
        if isinstance(out.get(key), dict):
            out[key] = {name: closed(sub) for name, sub in out[key].items()}
    if (
        isinstance(out.get("properties"), dict)
        and out["properties"]
        and "additionalProperties" not in out
        and "patternProperties" not in out
        and "unevaluatedProperties" not in out
    ):
        out["additionalProperties"] = False
    return out


class ForcedChoice:
    """``await ForcedChoice(path).complete(client, payload)``: an ``httpx.Response`` holding
    an OpenAI chat completion; ``client`` is based at the server's ``/v1``."""

    def __init__(self, template_path: str | Path) -> None:
        self.template = load_template(template_path)

    @staticmethod
    def applies(payload: dict[str, Any]) -> bool:
        return bool(payload.get("tools")) and payload.get("tool_choice") != "none"

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return self.template.render(messages=messages, tools=tools, add_generation_prompt=True)

    async def complete(self, client: httpx.AsyncClient, payload: dict[str, Any]) -> httpx.Response:
        try:
            tools = self._tools(payload)
            forced = self._named_tool(payload, tools)
        except ForcedChoiceError as exc:
            body = {"error": {"message": f"mastif forced choice: {exc}", "type": "invalid_request"}}
            return httpx.Response(400, json=body)
        prompt = self.render(payload.get("messages", []), list(tools.values()))
        sampling = {k: payload[k] for k in SAMPLING if k in payload}
        steps: list[dict[str, Any]] = []
        if forced is None:
            choice = await client.post(
                "/completions",
                json={
                    "model": payload.get("model"),
                    "prompt": prompt,
                    "grammar": choice_grammar(
                        list(tools), payload.get("tool_choice") != "required"
                    ),
                    # the choice is greedy (as in llama-cpp-python's handler): the most
                    # likely beginning, not a draw; what follows is sampled
                    "temperature": 0.0,
                    "max_tokens": CHOICE_MAX_TOKENS,
                    **sampling,
                },
            )
            if choice.status_code != 200:
                return choice
            steps.append(choice.json())
            beginning = steps[0]["choices"][0]["text"].strip()
        else:
            beginning = f"{CALL_PREFIX}{forced}:"
        name = beginning[len(CALL_PREFIX) : -1] if beginning.startswith(CALL_PREFIX) else None
        follow_up: dict[str, Any] = {
            "model": payload.get("model"),
            "prompt": f"{prompt}{beginning}\n",
            **sampling,
        }
        for key in ("temperature", "max_tokens", "stop"):
            if payload.get(key) is not None:
                follow_up[key] = payload[key]
        if name is not None:
            params = closed(tools[name]["function"].get("parameters") or {"type": "object"})
            # compact JSON: llguidance (the prebuilt server's schema engine) otherwise lets the
            # model pad the arguments with newlines and indents, which ran SmolLM2's calls
            # into max_tokens, cut mid-string (10 of 42 calls in a default run); llama.cpp's
            # own schema-to-grammar converter (a native build) ignores the key
            follow_up["json_schema"] = {**params, "x-guidance": COMPACT_JSON}
        reply = await client.post("/completions", json=follow_up)
        if reply.status_code != 200:
            return reply
        steps.append(reply.json())
        return httpx.Response(200, json=self._chat_completion(payload, steps, name))

    def complete_blocking(
        self, base_url: str, payload: dict[str, Any], timeout_s: float = 600
    ) -> httpx.Response:
        """:meth:`complete` for a caller without an event loop (a bench, a test proxy)."""

        async def go() -> httpx.Response:
            async with httpx.AsyncClient(base_url=base_url, timeout=timeout_s) as client:
                return await self.complete(client, payload)

        return asyncio.run(go())

    @staticmethod
    def _tools(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
        tools: dict[str, dict[str, Any]] = {}
        for tool in payload.get("tools") or []:
            name = (tool.get("function") or {}).get("name", "")
            if tool.get("type") != "function" or not TOOL_NAME.match(name):
                raise ForcedChoiceError(f"tool name {name!r} is not [A-Za-z0-9_.-]{{1,64}}")
            tools[name] = tool
        return tools

    @staticmethod
    def _named_tool(payload: dict[str, Any], tools: dict[str, Any]) -> str | None:
        choice = payload.get("tool_choice")
        if not isinstance(choice, dict):
            return None
        name = (choice.get("function") or {}).get("name")
        if name not in tools:
            raise ForcedChoiceError(f"tool_choice names {name!r}, which is not offered")
        return str(name)

    @staticmethod
    def _chat_completion(
        payload: dict[str, Any], steps: list[dict[str, Any]], name: str | None
    ) -> dict[str, Any]:
        last = steps[-1]["choices"][0]
        text = last.get("text") or ""
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = last.get("finish_reason") or "stop"
        if name is None:
            message["content"] = text.strip()
        else:
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": name, "arguments": text.strip()},
                }
            ]
            finish = "tool_calls" if finish == "stop" else finish
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(steps),
            "timings": _timings(steps),
        }


def _usage(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Unknown stays unknown: a count a step did not report leaves the total out."""
    usages = [step.get("usage") or {} for step in steps]
    first = usages[0]
    completions = [u.get("completion_tokens") for u in usages]
    usage: dict[str, Any] = {}
    if isinstance(first.get("prompt_tokens"), int):
        usage["prompt_tokens"] = first["prompt_tokens"]
    if all(isinstance(c, int) for c in completions):
        usage["completion_tokens"] = sum(completions)  # type: ignore[arg-type]
    if "prompt_tokens" in usage and "completion_tokens" in usage:
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    cached = (first.get("prompt_tokens_details") or {}).get("cached_tokens")
    if isinstance(cached, int):
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def _timings(steps: list[dict[str, Any]]) -> dict[str, Any]:
    timings = [step.get("timings") or {} for step in steps]
    if not all(timings):
        return {}
    summed = {
        key: sum(t.get(key, 0) for t in timings)
        for key in ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms")
    }
    summed["cache_n"] = timings[0].get("cache_n", 0)
    return summed

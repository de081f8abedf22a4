"""A scripted model for smoke-testing a pipeline without a model (``provider: scripted``).

An OpenAI-compatible chat-completions server on a free loopback port, in a thread of the
job, started and stopped with the job's ``with`` block like the llama.cpp server of
``provider: local``. Its answers come from a script file (YAML or JSON; the model's
``model`` key names it), not from a model:

.. code-block:: yaml

    rules:                       # the first rule whose conditions all hold answers
      - when: {json: true}       # a request with response_format (the judge)
        reply:
          content: {TU_score: 0.7, TU_rationale: "..."}   # a mapping is sent as JSON text
      - when: {node: interact, tool_result: false}
        reply:
          tool_calls: [{name: web_search, arguments: {query: opening hours}}]
      - when: {user: "(?i)observation round"}
        reply: {content: "The page shows ... CONTINUE"}
      - reply: {content: "Done."}  # no conditions: always matches

Conditions (all optional; a rule matches when every one given holds):

* ``node``: the workflow node (or ``judge``) the request is for, as the gateway's route
  names it (the gateway tells a scripted endpoint in the ``X-Mastif-Node`` header);
* ``user`` / ``system``: a regex searched in the last user message / the system messages;
* ``tools``: whether the request offers tools; ``tool_result``: whether the last message
  is a tool result; ``json``: whether the request asks for a ``response_format``.

A top-level ``latency_s`` (seconds, default 0) makes every answer wait that long, as a
remote endpoint of constant latency would (benches: what a framework or protocol costs
beside the model).

A reply is ``content`` (text, or a mapping/list sent as its JSON text) and/or
``tool_calls`` (``name`` and ``arguments``, a mapping or JSON text). Usage is reported as
characters / 4 (at least 1 token each way), so token and cost columns are filled. A
request no rule matches gets HTTP 400 with the reason (not retried), which the run records
as a provider error. Every request is logged, one line each, to the job's server log.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from mastif.core.server import StartStop

#: the header in which the gateway names the node of a request to a scripted endpoint
NODE_HEADER = "X-Mastif-Node"

CONDITIONS = ("node", "user", "system", "tools", "tool_result", "json")
FLAGS = ("tools", "tool_result", "json")
REPLY_KEYS = ("content", "tool_calls")


class ScriptError(ValueError):
    """The script file is unreadable or malformed; the message names the place."""


@dataclass(frozen=True)
class Rule:
    index: int
    node: str | None = None
    user: re.Pattern[str] | None = None
    system: re.Pattern[str] | None = None
    flags: dict[str, bool] = field(default_factory=dict)
    content: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()

    def matches(self, request: dict[str, Any], node: str | None) -> bool:
        if self.node is not None and self.node != node:
            return False
        messages = request.get("messages") or []
        if self.user is not None:
            users = [m for m in messages if m.get("role") == "user"]
            if not users or not self.user.search(_text(users[-1].get("content"))):
                return False
        if self.system is not None:
            system = "\n".join(
                _text(m.get("content"))
                for m in messages
                if m.get("role") in ("system", "developer")
            )
            if not self.system.search(system):
                return False
        facts = {
            "tools": bool(request.get("tools")),
            "tool_result": bool(messages) and messages[-1].get("role") == "tool",
            "json": bool(request.get("response_format")),
        }
        return all(facts[k] == v for k, v in self.flags.items())


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def load_script(path: str | Path) -> list[Rule]:
    """The rules of a script file; :class:`ScriptError` naming the rule if one is malformed."""
    return _load(path)[0]


def _load(path: str | Path) -> tuple[list[Rule], float]:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))  # JSON is YAML too
    except (OSError, yaml.YAMLError) as exc:
        raise ScriptError(f"{path}: cannot read the script: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list) or not data["rules"]:
        raise ScriptError(f"{path}: a script is a mapping with a non-empty list 'rules'")
    unknown = set(data) - {"rules", "latency_s"}
    if unknown:
        raise ScriptError(f"{path}: unknown key(s) {sorted(unknown)}; only 'rules', 'latency_s'")
    latency = data.get("latency_s", 0)
    if (
        isinstance(latency, bool)
        or not isinstance(latency, int | float)
        or not 0 <= latency <= 600  # also refuses NaN
    ):
        raise ScriptError(
            f"{path}: latency_s must be a number of seconds in 0..600, not {latency!r}"
        )
    return [_parse_rule(path, i, raw) for i, raw in enumerate(data["rules"])], float(latency)


def _parse_rule(path: Path, i: int, raw: Any) -> Rule:
    where = f"{path}: rules.{i}"
    if not isinstance(raw, dict) or set(raw) - {"when", "reply"} or "reply" not in raw:
        raise ScriptError(f"{where}: a rule is a mapping with 'reply' and an optional 'when'")
    when = raw.get("when") or {}
    if not isinstance(when, dict) or set(when) - set(CONDITIONS):
        raise ScriptError(f"{where}.when: conditions are a mapping of {list(CONDITIONS)}")
    patterns: dict[str, re.Pattern[str] | None] = {}
    for key in ("user", "system"):
        value = when.get(key)
        try:
            patterns[key] = re.compile(value) if value is not None else None
        except (re.error, TypeError) as exc:
            raise ScriptError(f"{where}.when.{key}: not a valid regex: {exc}") from exc
    flags = {k: when[k] for k in FLAGS if k in when}
    if any(not isinstance(v, bool) for v in flags.values()):
        raise ScriptError(f"{where}.when: {list(FLAGS)} are true or false")
    node = when.get("node")
    if node is not None and not isinstance(node, str):
        raise ScriptError(f"{where}.when.node: a node name")
    reply = raw["reply"]
    if not isinstance(reply, dict) or not reply or set(reply) - set(REPLY_KEYS):
        raise ScriptError(f"{where}.reply: a mapping of {list(REPLY_KEYS)}")
    if not reply.get("content") and not reply.get("tool_calls"):
        raise ScriptError(f"{where}.reply: give a content or tool_calls")
    content = reply.get("content")
    if content is not None and not isinstance(content, str):
        content = json.dumps(content)
    calls = []
    for j, call in enumerate(reply.get("tool_calls") or []):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ScriptError(f"{where}.reply.tool_calls.{j}: needs a 'name'")
        args = call.get("arguments", {})
        calls.append((call["name"], args if isinstance(args, str) else json.dumps(args)))
    return Rule(i, node, patterns["user"], patterns["system"], flags, content, tuple(calls))


def _tokens(text: str) -> int:
    return max(1, round(len(text) / 4))


class ScriptedServer(StartStop):
    """``with ScriptedServer(script, log_path) as s:`` — the scripted model at ``s.base_url``."""

    def __init__(self, script: str | Path, log_path: Path, model: str = "scripted") -> None:
        self.script = Path(script)
        self.rules, self.latency_s = _load(self.script)
        self.log_path = Path(log_path)
        self.model = model
        self._log_lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def answer(self, request: dict[str, Any], node: str | None) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) for one chat-completions request."""
        rule = next((r for r in self.rules if r.matches(request, node)), None)
        prompt = json.dumps(request.get("messages") or []) + json.dumps(request.get("tools") or [])
        if rule is None:
            self._log(f"node={node} no rule matches -> 400")
            message = f"scripted model {self.script}: no rule matches this request (node {node})"
            return 400, {"error": {"message": message, "type": "no_rule"}}
        message: dict[str, Any] = {"role": "assistant", "content": rule.content}
        if rule.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
                for name, args in rule.tool_calls
            ]
        completion = (rule.content or "") + "".join(n + a for n, a in rule.tool_calls)
        usage = {"prompt_tokens": _tokens(prompt), "completion_tokens": _tokens(completion)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        what = ", ".join(n for n, _ in rule.tool_calls) or f"{len(rule.content or '')} chars"
        self._log(f"node={node} rule {rule.index} -> {what}")
        return 200, {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if rule.tool_calls else "stop",
                }
            ],
            "usage": usage,
        }

    def _log(self, line: str) -> None:
        with self._log_lock, self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # one line per request is written by answer()

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "owned_by": "mastif"}]})  # fmt: skip
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    length = int(self.headers.get("Content-Length", 0))
                    request = json.loads(self.rfile.read(length))
                except (ValueError, json.JSONDecodeError) as exc:
                    self._send(400, {"error": {"message": f"bad request: {exc}"}})
                    return
                if request.get("stream"):
                    self._send(400, {"error": {"message": "the scripted model does not stream"}})
                    return
                if server.latency_s:
                    time.sleep(server.latency_s)  # this request's own thread
                self._send(*server.answer(request, self.headers.get(NODE_HEADER)))

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="scripted-model", daemon=True
        )
        self._thread.start()
        self._log(f"scripted model {self.script} ({len(self.rules)} rules) at {self.base_url}")

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._log("stopped")
        self._httpd = None

"""The seed paper's protocol condition: the protocol's message format in the prompt text.

The seed could not run MCP or A2A exchanges; it wrapped each prompt in text shaped like the
protocol's messages and measured that. With ``protocol_options.<protocol>.prompt_format:
true`` mastif does the same on top of the real exchange, so results can be set beside the
paper's. The envelopes follow each protocol's JSON-RPC message shape (MCP: a
``sampling/createMessage`` request; A2A: a ``message/send`` request with a text part),
serialised deterministically so the same prompt always gives the same text.
"""

from __future__ import annotations

import json


def wrap_prompt(protocol: str, prompt: str, node: str, step: int) -> str:
    """``prompt`` inside a ``protocol`` message; ``standard`` leaves it as it is."""
    msg_id = f"{node}-{step}"
    if protocol == "mcp":
        envelope = {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "sampling/createMessage",
            "params": {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}]},
        }
    elif protocol == "a2a":
        envelope = {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "message/send",
            "params": {
                "message": {
                    "role": "user",
                    "messageId": msg_id,
                    "parts": [{"kind": "text", "text": prompt}],
                }
            },
        }
    elif protocol == "standard":
        return prompt
    else:
        raise ValueError(f"no message format for protocol {protocol!r}")
    return json.dumps(envelope, ensure_ascii=False, indent=1)

import json

import pytest

from tests.support.fakes import ScriptedChatServer, opens_interaction_round
from tests.support.stackrun import run_stack

FRAMEWORK = "ag2"


def test_dbg(tmp_path, fake_model_config):
    args = {"json_string": '{"a": 95}', "query": "a"}

    def respond(payload):
        if opens_interaction_round(payload):
            return {"tool_calls": [("json_parser", args), ("no_such_tool", {"x": 1})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        (trace,) = run_stack(fake_model_config(srv.base_url, max_steps=1), tmp_path, framework=FRAMEWORK)
    print(trace.status, trace.error_message)
    for c in trace.tool_calls:
        print(c)
    for r in srv.requests:
        print(json.dumps(r)[:1500])
    pytest.fail("debug")

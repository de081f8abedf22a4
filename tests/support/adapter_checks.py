"""Checks several framework adapters' own test files run with the same body (the framework
name differs); each file keeps its own test function, so its failures are named there."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from mastif.execution.experiment import parse_config
from mastif.execution.runner import classify_error
from mastif.frameworks.plan import plan_workflow
from mastif.tasks import load_tasks
from mastif.tools import get_tools
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.paths import REPO
from tests.support.stackrun import run_stack


def first_interact_turn(payload: dict[str, Any]) -> bool:
    """The first model turn of an interact visit (no tool result yet)."""
    return (
        "interaction round" in last_user_text(payload) and payload["messages"][-1]["role"] == "user"
    )


def check_required_tool_choice_holds_for_the_first_turn(
    framework: str, tmp_path: Path, fake_model_config: Any
) -> None:
    def respond(payload: dict[str, Any]) -> dict[str, Any]:
        if first_interact_turn(payload):
            return {"tool_calls": [("datetime", {})]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1)
        cfg["workflow"]["nodes"][2]["tool_choice"] = "required"
        (trace,) = run_stack(cfg, tmp_path, framework=framework)
    assert trace.status == "ok", trace.error_message
    choices = [r.get("tool_choice") for r in srv.requests if "tools" in r]
    assert choices == ["required", "auto"]


def check_an_unreachable_endpoint_is_classified_as_such(
    framework: str, fake_model_config: Any
) -> None:
    from mastif.frameworks import RunContext, RunRecorder, get_framework
    from mastif.protocols.standard import InProcessTransport
    from mastif.providers.local import free_port

    cfg = parse_config(fake_model_config("http://unused"))
    ctx = RunContext(
        run_id="r1",
        task=load_tasks("builtin")[0],
        plan=plan_workflow(cfg.workflow, cfg.generation, REPO),
        generation=cfg.generation,
        tools=InProcessTransport(get_tools(list(cfg.tools))),
        recorder=RunRecorder(),
        gateway_url=f"http://127.0.0.1:{free_port()}/r/r1",  # nobody listens there
        model_name="fake-model",
        gateway_token="no-gateway",
    )
    with pytest.raises(Exception) as info:
        asyncio.run(get_framework(framework).run(ctx))
    assert classify_error(info.value) == ("error", "provider_unreachable")

"""Stacks on sandbox tasks with the web tools: a scripted model drives the real sandbox in
a real Chromium through each framework and protocol; the task's check decides success.

What this pins down: the run id reaches the tools through every path (in-process, the MCP
server, A2A agents), so each run acts on its own page and sandbox session; the run's
sandbox state is snapshotted into the trace and checked; tool results reach later prompts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mastif.execution.experiment import parse_config
from mastif.execution.runner import execute_stack
from mastif.tasks import load_tasks
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.paths import REPO

pytestmark = pytest.mark.slow  # a real Chromium through every stack

TASKS = {t.task_id: t for t in load_tasks("sandbox")}

# sb-shop-11: 3 jump ropes in the cart with coupon SAVE10 (state check)
JUMP_ROPES = [
    ("web_search", {"query": "Strideon Jump Rope Pro"}),
    ("web_browser", {"url": "/shop/product/FIT-604"}),
    ("web_interaction", {"action": "fill", "target": "Quantity", "value": "3"}),
    ("web_interaction", {"action": "click", "target": "Add to cart"}),
    ("web_interaction", {"action": "fill", "target": "Coupon code", "value": "SAVE10"}),
    ("web_interaction", {"action": "click", "target": "Apply coupon"}),
]
# sb-shop-10: the mouse in the cart (a second run in the same job, own session)
MOUSE = [
    ("web_browser", {"url": "/shop/product/CMP-203"}),
    ("web_interaction", {"action": "click", "target": "Add to cart"}),
]


def scripted(scripts: dict[str, list[tuple[str, dict]]]):
    """A model that plays the task's script one tool call per turn in the interact node,
    and reports the first price it sees in the history."""

    def respond(payload):
        text = last_user_text(payload)
        if "interaction round" in text:
            task = next(t for t in scripts if TASKS[t].confirmed_task in text)
            done = sum(1 for m in payload["messages"] if m["role"] == "tool")
            if done < len(scripts[task]) and payload["messages"][-1]["role"] in ("user", "tool"):
                name, args = scripts[task][done]
                return {"tool_calls": [(name, args)]}
            return {"content": "Done with the page."}
        if "final report" in text:
            price = re.search(r"\$\d+\.\d\d", text)
            return {"content": f"Completed. Result: {price.group(0) if price else 'none'}"}
        return {"content": "Plan: search, open the product, act. CONTINUE"}

    return respond


def run_stack(cfg_dict, tmp_path, task_ids):
    cfg = parse_config(cfg_dict)
    return execute_stack(
        cfg, cfg.stacks()[0], [TASKS[t] for t in task_ids],
        tmp_path / "ckpt.jsonl", tmp_path / "server.log", REPO,
    )  # fmt: skip


def web_config(fake_model_config, base_url, protocol, framework):
    cfg = fake_model_config(base_url, max_steps=1, max_tool_rounds=8)
    cfg.update(protocols=[protocol], frameworks=[framework], web="sandbox")
    cfg["tools"] = ["web_search", "web_browser", "web_interaction"]
    return cfg


@pytest.mark.parametrize(
    "protocol,framework",
    [
        ("standard", "langgraph"),
        ("standard", "langchain"),
        ("standard", "crewai"),
        ("standard", "semantic_kernel"),
        ("mcp", "langgraph"),
        ("a2a", "langgraph"),
    ],
)
def test_scripted_agent_completes_sandbox_tasks(tmp_path, fake_model_config, protocol, framework):
    scripts = {"sb-shop-11": JUMP_ROPES, "sb-shop-10": MOUSE}
    with ScriptedChatServer(scripted(scripts)) as srv:
        ropes, mouse = run_stack(
            web_config(fake_model_config, srv.base_url, protocol, framework),
            tmp_path,
            list(scripts),
        )
    for trace, script in ((ropes, JUMP_ROPES), (mouse, MOUSE)):
        assert trace.status == "ok", trace.error_message
        assert [(c.name, json.loads(c.arguments)) for c in trace.tool_calls] == script
        assert all(c.ok for c in trace.tool_calls), [c.error for c in trace.tool_calls]
        assert trace.success is True, trace.check_detail
        assert trace.web == "sandbox"
    # each run saw only its own session: one cart line each
    assert json.loads(ropes.web_state)["shop"]["cart"] == [{"sku": "FIT-604", "qty": 3}]
    assert json.loads(mouse.web_state)["shop"]["cart"] == [{"sku": "CMP-203", "qty": 1}]
    # the search result reached the report through the history
    assert "$" in ropes.final_answer and "none" not in ropes.final_answer


def test_wrong_solution_fails_the_check(tmp_path, fake_model_config):
    without_coupon = {"sb-shop-11": JUMP_ROPES[:4]}
    with ScriptedChatServer(scripted(without_coupon)) as srv:
        (trace,) = run_stack(
            web_config(fake_model_config, srv.base_url, "standard", "langgraph"),
            tmp_path,
            ["sb-shop-11"],
        )
    assert trace.status == "ok" and all(c.ok for c in trace.tool_calls)
    assert trace.success is False
    assert "coupon" in trace.check_detail.lower()


def test_failed_browser_action_is_a_failed_call(tmp_path, fake_model_config):
    bad = {"sb-shop-10": [("web_browser", {"url": "/shop/product/NO-SUCH"}),
                          ("web_browser", {"url": "http://169.254.169.254/latest/"})]}  # fmt: skip
    with ScriptedChatServer(scripted(bad)) as srv:
        (trace,) = run_stack(
            web_config(fake_model_config, srv.base_url, "standard", "langgraph"),
            tmp_path,
            ["sb-shop-10"],
        )
    not_found, metadata = trace.tool_calls
    assert not not_found.ok and "HTTP 404" in not_found.error
    assert not metadata.ok and "refused" in metadata.error
    assert trace.success is False


def test_web_search_on_the_sandbox_finds_pages_and_fails_on_no_results() -> None:
    from mastif.core.config import WebOptions
    from mastif.execution.webenv import open_web_environment

    options = WebOptions(
        allow_private=False, allowed_hosts=(), browser_executable="/usr/bin/chromium",
        action_timeout_s=5, http_timeout_s=5, page_chars=1500, search_backend="duckduckgo",
    )  # fmt: skip
    with open_web_environment("sandbox", options) as web:
        (search,) = web.tools(["web_search"])
        hit = search.invoke({"query": "Strideon Cork Yoga Mat", "max_results": 2}, "run-s")
        assert hit.ok and "rated 4.7/5" in hit.output
        assert hit.output.count("\n   http://127.0.0.1:") == 2  # absolute sandbox URLs
        lake = search.invoke({"query": "Varnholm Lake depth"}, "run-s")  # encyclopedia pages
        assert lake.ok and "131 metres" in lake.output
        many = search.invoke({"query": "yoga", "max_results": 250}, "run-s")
        assert many.ok and 1 <= many.output.count("\n   http://") <= 10  # capped, not refused
        nothing = search.invoke({"query": "zzqxv wqxzz"}, "run-s")
        assert not nothing.ok and "no results" in nothing.error


def test_check_run_on_the_live_web() -> None:
    from mastif.execution.runner import check_run

    state_task, answer_task = TASKS["sb-shop-10"], TASKS["sb-shop-02"]
    assert check_run(state_task, "added", None) == (
        None,
        "state check not decidable on the live web",
    )
    success, detail = check_run(answer_task, "It is rated 4.7 out of 5.", None)
    assert success is True and detail
    assert check_run(TASKS["sb-shop-02"].model_copy(update={"check": None}), "x", {}) == (
        None,
        None,
    )


def test_prompts_show_the_runs_current_page(tmp_path, fake_model_config):
    """``{page}``: the interact prompt shows the start page before any browsing, and a later
    prompt shows the page the run's tool calls left open (max_steps 2: observe after)."""
    act = scripted({"sb-shop-10": MOUSE})

    def respond(payload):  # acts in round 1 only
        if "interaction round 2" in last_user_text(payload):
            return {"content": "Nothing more to do."}
        return act(payload)

    with ScriptedChatServer(respond) as srv:
        cfg = web_config(fake_model_config, srv.base_url, "standard", "langgraph")
        cfg["generation"]["max_steps"] = 2
        for node in cfg["workflow"]["nodes"]:  # the default prompts do not show the page
            if node["name"] in ("observe", "interact"):
                text = (REPO / node["prompt"]).read_text() + "\nPage now:\n{page}\n"
                node["prompt"] = str(tmp_path / f"{node['name']}.md")
                Path(node["prompt"]).write_text(text)
        (trace,) = run_stack(cfg, tmp_path, ["sb-shop-10"])
    assert trace.success is True
    prompts = [last_user_text(r) for r in srv.requests]
    observe = [p for p in prompts if "observation round" in p]
    interact = [p for p in prompts if "interaction round 1" in p]
    # before any tool call the page is the task's start page, listed with numbered elements;
    # the model sees the gateway's stand-in for the sandbox's per-job origin
    assert "URL: http://sandbox.mastif.invalid/shop/\n" in interact[0]
    assert "127.0.0.1" not in "".join(prompts)
    assert re.search(r"\[\d+\] ", interact[0])
    # in round 2 the observation shows the cart the click led to
    assert "Page: Your cart" in observe[-1] or "Bytecraft Silent Mouse" in observe[-1]
    # the view is the environment's observation, not a tool call of the agent
    assert [c.name for c in trace.tool_calls] == [name for name, _ in MOUSE]

"""A run's prompts do not depend on the port its stack job's sandbox listens on.

The response cache keys a request with the sandbox's ``127.0.0.1:PORT`` replaced by a
stand-in (``Gateway.volatile``), which works only where the origin is whole. Prompts carry
clipped tool results (``format_history``) and tools truncated pages (``clip_text``): a
cut inside the port left ``127.0.0.1:4`` in one job and ``127.0.0.1:3`` in another, so
the report call of a rerun missed the cache (the flaky
``test_cached_rerun_calls_no_model_and_reproduces_the_runs``).
"""

from __future__ import annotations

import copy

import pytest
import yaml

from mastif.core.textclip import clip_text, head_at_word
from mastif.core.trace import NodeOutput, ToolCall
from mastif.frameworks.plan import HISTORY_CHARS_PER_TOOL_RESULT, format_history
from tests.support.paths import REPO

STAND_IN = "sandbox.mastif.invalid"
PORTS = ("127.0.0.1:41795", "127.0.0.1:34315")  # two jobs' sandboxes


def neutral(text: str, origin: str) -> str:
    return text.replace(origin, STAND_IN)


def search_output(origin: str, shift: int) -> str:
    """A web_search-like result whose second URL starts ``shift`` characters before the
    history's clip, so the clip falls at every position in and around the origin."""
    lead = 700 - len("ok: ") - shift
    words = ("alpha beta gamma delta " * 60)[:lead]
    return f"{words}\n   http://{origin}/shop/product/AUD-101\n   $129.99, rated 4.6/5"


@pytest.mark.parametrize("shift", range(0, 40))
def test_clipped_history_is_the_same_in_every_job(shift: int) -> None:
    histories = []
    for origin in PORTS:
        call = ToolCall("interact", 1, "web_search", '{"query": "q7"}', True,
                        search_output(origin, shift), None, 0.1)  # fmt: skip
        history = format_history([NodeOutput("interact", 1, "act", "done")], [call])
        assert len(history.splitlines()[0]) < HISTORY_CHARS_PER_TOOL_RESULT + 100
        histories.append(neutral(history, origin))
    assert histories[0] == histories[1]


@pytest.mark.parametrize("shift", range(0, 40))
def test_truncated_tool_output_is_the_same_in_every_job(shift: int) -> None:
    outputs = [neutral(clip_text(search_output(o, shift + 4), 700), o) for o in PORTS]
    assert outputs[0] == outputs[1]
    assert "[truncated " in outputs[0]


def test_node_output_clip_keeps_urls_whole() -> None:
    text = "x " * 295 + "see http://127.0.0.1:41795/shop/product/AUD-101 for $129.99"
    line = format_history([NodeOutput("interact", 1, "act", text)]).splitlines()[0]
    assert line.endswith(" see ...") and "127.0.0.1:4" not in line


def test_head_at_word() -> None:
    assert head_at_word("short", 10) == "short"
    assert head_at_word("the price $129.99 today", 16) == "the price"  # not "... $129.9"
    assert head_at_word("one two", 3) == "one"  # a space right at the limit ends a word
    assert head_at_word("one\n   two three", 9) == "one"
    # one word longer than half the limit is cut inside
    assert head_at_word("a " + "y" * 50, 20) == "a " + "y" * 18


def test_report_prompts_from_real_search_results_do_not_depend_on_the_port() -> None:
    """Every sandbox task's text as a web_search query, answered by two sandbox servers
    (two ports), gives the same report history once each origin is neutralised (three of
    them clipped inside the port before the fix)."""
    from mastif.execution.experiment import parse_config
    from mastif.execution.webenv import open_web_environment
    from mastif.tasks import load_tasks

    with (REPO / "config" / "config.yaml").open() as fh:
        options = parse_config(copy.deepcopy(yaml.safe_load(fh))).web_options
    queries = [t.confirmed_task for t in load_tasks("sandbox")]
    histories = []
    with (
        open_web_environment("sandbox", options) as a,
        open_web_environment("sandbox", options) as b,
    ):
        for env in (a, b):
            search = env.tools(["web_search"])[0]
            calls = [
                ToolCall("interact", 1, "web_search", "{}", r.ok, r.output, r.error, 0.0)
                for r in (search.invoke({"query": q}, "run-1") for q in queries)
            ]
            assert any(env.sandbox.host_port in c.output for c in calls)
            out = [NodeOutput("interact", 1, "act", "done")]
            histories.append(
                [neutral(format_history(out, [c]), env.sandbox.host_port) for c in calls]
            )
    assert histories[0] == histories[1]


@pytest.mark.parametrize("framework", ["langgraph", "langchain", "crewai", "semantic_kernel"])
def test_a_turns_tool_calls_are_recorded_and_shown_in_the_order_made(
    framework, tmp_path, fake_model_config
):
    """LangGraph's ToolNode runs a turn's calls at once: the slow first call finished last
    and was recorded (and shown to the report node) after the fast second one, an order
    that varies with the machine's load."""
    from tests.support.fakes import ScriptedChatServer, last_user_text
    from tests.support.stackrun import run_stack

    slow = ("python_repl", {"code": "import time\ntime.sleep(1.5)\nprint('slow done')"})
    fast = ("json_parser", {"json_string": '{"a": 7}', "query": "a"})

    def respond(payload):
        if (
            "interaction round" in last_user_text(payload)
            and payload["messages"][-1]["role"] == "user"
        ):
            return {"tool_calls": [slow, fast]}
        return {"content": "done."}

    with ScriptedChatServer(respond) as srv:
        cfg = fake_model_config(srv.base_url, max_steps=1, max_tool_rounds=1)
        (trace,) = run_stack(cfg, tmp_path, framework=framework)
    assert [c.name for c in trace.tool_calls] == ["python_repl", "json_parser"]
    report = last_user_text(srv.requests[-1])
    assert "What happened" in report
    assert report.index("tool python_repl(") < report.index("tool json_parser(")

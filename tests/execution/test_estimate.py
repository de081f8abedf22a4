"""`mastif estimate`: calls, tokens and dollars of an experiment before it runs.

The call counts are derived by hand below from the adapters' rules (a tool-using node visit
makes 1 to max_tool_rounds + 1 calls; a node without tools 1, under CrewAI up to
max_tool_rounds + 2) and the workflow's loop rules, and compared with the estimator, which
runs the workflow's own orchestration code with a recording dispatcher.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from mastif import cli
from mastif.execution.cost_model import calls_per_visit, simulate_run, tool_list_json
from mastif.execution.estimate import estimate_experiment
from mastif.execution.experiment import parse_config
from mastif.reporting.estimate_report import format_estimate
from mastif.tasks import Task
from mastif.tools import get_tools
from tests.support.paths import REPO

TASK = Task(
    task_id="t1",
    confirmed_task="Find the cheapest red scarf and add it to the cart.",
    website="shop",
    domain="Shopping",
    subdomain="Fashion",
    reference_steps=["[link] Scarves -> CLICK", "[button] Add to cart -> CLICK"],
)
TOOLS = ["datetime", "json_parser"]


@pytest.fixture
def prompts(tmp_path: Path) -> dict[str, str]:
    """Prompt templates for hand-made workflows (absolute paths)."""
    texts = {
        "plain": "Task: {task} on {website}.\nSo far:\n{history}\nStep {step} of {max_steps}.",
        "tools": "Task: {task}\nSo far:\n{history}\nUse one of {tools}.",
        "worker": "Task: {task}\nYour part: {subtask}\nSo far:\n{history}\nTools: {tools}",
    }
    paths = {}
    for name, text in texts.items():
        path = tmp_path / f"{name}.md"
        path.write_text(text)
        paths[name] = str(path)
    return paths


def node(name: str, prompt: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "prompt": prompt, "output_key": name, **kw}


def make_config(base: dict[str, Any], workflow: dict[str, Any], **over: Any) -> Any:
    raw = copy.deepcopy(base)
    raw["workflow"] = workflow
    raw["tools"] = TOOLS
    raw["generation"].update({"max_steps": 2, "max_tool_rounds": 2, "max_tokens": 100})
    for key, value in over.items():
        raw[key] = value
    return parse_config(raw, base_dir=REPO)


def linear(prompts: dict[str, str], stop_on: str | None = "observe") -> dict[str, Any]:
    """plan -> (observe <-> act) -> report; ``act`` uses tools."""

    def stop(name: str) -> dict[str, Any]:
        return {"stop_when": "DONE"} if name == stop_on else {}

    return {
        "nodes": [
            node("plan", prompts["plain"]),
            node("observe", prompts["plain"], loop=True, **stop("observe")),
            node("act", prompts["tools"], loop=True, use_tools=True, **stop("act")),
            node("report", prompts["plain"]),
        ]
    }


def hierarchical(prompts: dict[str, str]) -> dict[str, Any]:
    return {
        "shape": "hierarchical",
        "max_subtasks": 3,
        "nodes": [
            node("decompose", prompts["plain"]),
            node("worker", prompts["worker"], use_tools=True),
            node("synthesise", prompts["plain"]),
        ],
    }


def run_calls(cfg: Any, framework: str, scenario: str) -> list[Any]:
    cost, _ = simulate_run(cfg, framework, None, scenario, TASK, get_tools(TOOLS),
                           base_dir=REPO)  # fmt: skip
    return list(cost.calls)


def test_calls_per_visit_follow_the_adapters():
    # max_tool_rounds = 3: a tool node 1..4 calls; without tools 1, CrewAI's ReAct up to 5
    assert [calls_per_visit(f, True, 3, "high") for f in ("langgraph", "crewai")] == [4, 4]
    assert calls_per_visit("semantic_kernel", False, 3, "high") == 1
    assert calls_per_visit("crewai", False, 3, "high") == 5
    assert calls_per_visit("crewai", True, 3, "low") == 1
    assert calls_per_visit("langchain", True, 0, "high") == 1


def test_linear_workflow_call_bounds(base_config, prompts):
    cfg = make_config(base_config, linear(prompts))
    # low: plan, observe (stop_when matches in round 1: act never runs), report
    assert [c.node for c in run_calls(cfg, "langgraph", "low")] == ["plan", "observe", "report"]
    # high: plan 1 + 2 rounds x (observe 1 + act 2 tool rounds + 1) + report 1 = 10
    high = run_calls(cfg, "langgraph", "high")
    assert len(high) == 1 + 2 * (1 + 3) + 1
    # the tool list goes with the two tool rounds of each act visit, not the last call
    assert [c.node for c in high if c.with_tools] == ["act"] * 4
    # CrewAI: nodes without tools up to max_iter (3) ReAct turns + a forced final answer
    assert len(run_calls(cfg, "crewai", "high")) == 4 + 2 * (4 + 3) + 4
    assert len(run_calls(cfg, "crewai", "low")) == 3


def test_loop_without_early_exit_runs_every_round(base_config, prompts):
    # no stop_when: even the low bound runs max_steps rounds: 1 + 2 x (1 + 1) + 1
    cfg = make_config(base_config, linear(prompts, stop_on=None))
    assert len(run_calls(cfg, "langchain", "low")) == 6
    # stop_when on the second loop node: round 1 runs both loop nodes, then the loop ends
    cfg = make_config(base_config, linear(prompts, stop_on="act"))
    low = run_calls(cfg, "semantic_kernel", "low")
    assert [c.node for c in low] == ["plan", "observe", "act", "report"]


def test_hierarchical_call_bounds(base_config, prompts):
    cfg = make_config(base_config, hierarchical(prompts))
    # low: a decomposer reply without a list leaves one subtask (the task itself)
    for framework in ("langgraph", "crewai"):
        assert [c.node for c in run_calls(cfg, framework, "low")] == [
            "decompose", "worker", "synthesise"
        ]  # fmt: skip
    # high: 3 subtasks, each worker visit 2 tool rounds + 1
    assert len(run_calls(cfg, "langgraph", "high")) == 1 + 3 * 3 + 1
    assert len(run_calls(cfg, "crewai", "high")) == 4 + 3 * 3 + 4


def test_prompt_holds_the_tool_list_and_the_clipped_history(base_config, prompts):
    # the tool list's JSON schemas go with a call that offers tools (none at 0 tool rounds)
    cfg = make_config(base_config, linear(prompts, stop_on="act"))
    no_rounds = cfg.model_copy(
        update={"generation": cfg.generation.model_copy(update={"max_tool_rounds": 0})}
    )
    act = next(c for c in run_calls(cfg, "langgraph", "low") if c.node == "act")
    act0 = next(c for c in run_calls(no_rounds, "langgraph", "low") if c.node == "act")
    assert act.with_tools and not act0.with_tools
    tool_tokens = -(-len(tool_list_json(get_tools(TOOLS))) // 4)
    assert act.prompt_tokens - act0.prompt_tokens == tool_tokens > 100
    cfg = make_config(base_config, linear(prompts))
    high = run_calls(cfg, "langgraph", "high")
    # format_history clips each earlier output at 600 characters: a reply of 100 tokens
    # (400 characters) is shown whole, one of 1,000 tokens is clipped, so the report's
    # prompt grows by less than the replies did
    big = make_config(base_config, linear(prompts))
    big = big.model_copy(
        update={"generation": big.generation.model_copy(update={"max_tokens": 1000})}
    )
    report_small = high[-1].prompt_tokens
    report_big = run_calls(big, "langgraph", "high")[-1].prompt_tokens
    n_outputs = 1 + 2 * 2  # plan, observe x2, act x2 before the report
    grown = n_outputs * (600 + len(" ...") - 400)  # characters, at 4 per token
    assert report_big - report_small == pytest.approx(grown / 4, abs=1)


def estimate(cfg: Any) -> Any:
    return estimate_experiment(cfg, REPO, tasks=[TASK], task_note="test task")


def test_tokens_scale_with_sample_size_and_repeats(base_config, prompts):
    one = estimate(make_config(base_config, linear(prompts), repeats=1,
                               tasks={"source": "builtin", "sample_size": 2}))  # fmt: skip
    six = estimate(make_config(base_config, linear(prompts), repeats=3,
                               tasks={"source": "builtin", "sample_size": 4}))  # fmt: skip
    assert one.runs == 12 * 2 and six.runs == 12 * 12
    for a, b in ((one.total, six.total), (one.models[0], six.models[0]), (one.judge, six.judge)):
        assert b.prompt_tokens.low == 6 * a.prompt_tokens.low > 0
        assert b.prompt_tokens.high == 6 * a.prompt_tokens.high
        assert b.completion_tokens.high == 6 * a.completion_tokens.high
        assert b.calls.high == 6 * a.calls.high
        assert b.calls_per_run == a.calls_per_run


def test_protocols_add_no_calls_but_an_envelope_adds_tokens(base_config, prompts):
    plain = estimate(make_config(base_config, linear(prompts)))
    by = {s.stack.path: s.agent for s in plain.stacks}
    assert by["smollm2/standard/langgraph"] == by["smollm2/a2a/langgraph"]
    wrapped = estimate(make_config(base_config, linear(prompts),
                                   protocol_options={"a2a": {"prompt_format": True}}))  # fmt: skip
    wby = {s.stack.path: s.agent for s in wrapped.stacks}
    assert wby["smollm2/a2a/langgraph"].calls == by["smollm2/a2a/langgraph"].calls
    assert (
        wby["smollm2/a2a/langgraph"].prompt_tokens.low
        > by["smollm2/a2a/langgraph"].prompt_tokens.low
    )
    assert wby["smollm2/mcp/langgraph"] == by["smollm2/mcp/langgraph"]


def test_dollars_from_price_and_none_without_one(base_config, prompts):
    est = estimate(make_config(base_config, linear(prompts)))  # smollm2 and gemma3: no price
    assert est.models[0].usd is None and est.judge.usd is None and est.total.usd is None
    priced = copy.deepcopy(base_config)
    priced["models"]["smollm2"]["price"] = {"input_per_mtok": 2.0, "output_per_mtok": 10.0}
    est = estimate(make_config(priced, linear(prompts)))
    m = est.models[0]
    assert m.usd is not None
    assert m.usd.high == pytest.approx(
        (m.prompt_tokens.high * 2.0 + m.completion_tokens.high * 10.0) / 1e6
    )
    assert m.usd.low < m.usd.high
    # the judge (gemma3) still has no price: its dollars and the total stay unknown
    assert est.judge.usd is None and est.total.usd is None


def test_judge_attempts_bound_its_calls(base_config, prompts):
    raw = copy.deepcopy(base_config)
    raw["judge"]["attempts"] = 2
    raw["judge"]["max_tokens"] = 300
    est = estimate(make_config(raw, linear(prompts)))
    judge = est.stacks[0].judge
    assert judge.calls.low == 1 and judge.calls.high == 2
    assert judge.completion_tokens.high == 2 * 300
    assert 0 < judge.prompt_tokens.low < judge.prompt_tokens.high


def test_chars_per_token_is_a_parameter(base_config, prompts):
    cfg = make_config(base_config, linear(prompts))
    at4 = estimate_experiment(cfg, REPO, 4.0, tasks=[TASK])
    at2 = estimate_experiment(cfg, REPO, 2.0, tasks=[TASK])
    assert at2.total.prompt_tokens.low > 1.5 * at4.total.prompt_tokens.low
    with pytest.raises(ValueError, match="chars_per_token"):
        estimate_experiment(cfg, REPO, 0, tasks=[TASK])


def test_cli_prints_the_paper_estimate(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    assert cli.main(["estimate", "config/experiments/paper.yaml"]) == 0
    out = capsys.readouterr().out
    assert "36 stack(s), 10,800 runs" in out
    assert "ESTIMATE" in out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert {"mistral7b", "qwen25_7b", "llama4_scout", "judge: gpt4o_mini", "total"} <= set(rows)
    for label in ("mistral7b", "judge: gpt4o_mini", "total"):
        cells = [c.strip() for c in rows[label].split("|")]
        assert cells[3] == ("10,800" if label != "mistral7b" else "3,600")
        assert "unknown" not in cells[7]  # every paper model has a price


def test_a_judge_panel_and_repeats_multiply_the_judges_calls(base_config, prompts):
    one = estimate(make_config(base_config, linear(prompts)))
    raw = copy.deepcopy(base_config)
    raw["models"]["smollm2"]["price"] = {"input_per_mtok": 2.0, "output_per_mtok": 10.0}
    raw["judge"].update(models=["gemma3", "smollm2"], repeats=3)
    panel = estimate(make_config(raw, linear(prompts)))
    assert panel.judge.calls.high == 6 * one.judge.calls.high
    assert panel.judge.prompt_tokens.low == 6 * one.judge.prompt_tokens.low
    assert panel.judge.label == "judge panel: gemma3, smollm2"
    assert panel.judge.usd is None  # gemma3 has no price: the panel's dollars are unknown
    assert "each judged 6 times" in format_estimate(panel)
    assert "each judged once" in format_estimate(one)
    raw["models"]["gemma3"]["price"] = {"input_per_mtok": 1.0, "output_per_mtok": 1.0}
    priced = estimate(make_config(raw, linear(prompts))).judge
    half_p, half_c = priced.prompt_tokens.high / 2, priced.completion_tokens.high / 2
    assert priced.usd is not None and priced.usd.high == pytest.approx(
        (half_p * 1.0 + half_c * 1.0 + half_p * 2.0 + half_c * 10.0) / 1e6
    )

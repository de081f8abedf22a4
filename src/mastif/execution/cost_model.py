"""The cost model of one run: its LLM calls and their tokens, simulated without a model.

What :mod:`mastif.execution.estimate` (an experiment's cost before it runs),
:mod:`mastif.execution.budget` (a run's reservation) and :mod:`mastif.execution.judging` (a
judgement's reservation) compute their bounds from. Tokens come from characters at a
chars-per-token ratio (4 for English and JSON by default, a parameter), and every figure is
a bound of one of two scenarios.

* **low** — the fewest calls a run that finishes can make: a loop ends in its first round at
  the first loop node with ``stop_when`` (its output matches; without any ``stop_when`` the
  loop always runs ``max_steps`` rounds), no tool-using node calls a tool, a hierarchical
  decomposer writes no list (one subtask: the task), every reply is
  :data:`LOW_REPLY_TOKENS` long, no page is open, the judge answers at its first attempt
  with the shortest reply its JSON schema allows.
* **high** — the most calls the code makes: every loop runs ``max_steps`` rounds, every
  tool-using node visit uses all ``max_tool_rounds`` rounds (one tool call per round, each
  result as long as the longest a configured tool hands back) and then one more call
  without tools, a CrewAI node without tools runs its ReAct loop to ``max_iter`` and then
  its forced final answer, the decomposer lists ``max_subtasks`` subtasks, every reply is
  ``max_tokens`` long, the page (``{page}``) is ``page_chars`` of text, and the judge uses
  all ``judge.attempts`` with ``judge.max_tokens`` each.

The run is not modelled by hand: the visits and their prompts come from the workflow's own
code (:func:`mastif.frameworks.orchestration.run_linear` / :func:`~mastif.frameworks.orchestration.run_hierarchical`
with a dispatcher that records each rendered prompt instead of calling a model, so the loop
rules, ``render_prompt`` with ``format_history``'s clipping, the ``{page}`` observation and a
protocol's ``prompt_format`` envelope are exactly those of a real run), and the judge's prompt
is :func:`mastif.evaluation.judge.build_messages` of the simulated run. Calls per node visit are read
from the framework adapters (see :func:`calls_per_visit`). The protocols add no LLM call
(MCP carries tool calls, A2A carries node visits to agents that make the same calls), only
the optional ``prompt_format`` envelope in the prompt text.

Not counted: calls of runs that fail early (fewer), retries of failed upstream calls by the
gateway (``provider_retries``; a failed call is normally not billed), parallel tool calls in
one reply, the element listing (links, fields, buttons) after a page's text, CrewAI's
context-window summaries, and chat-template tokens beyond :data:`MESSAGE_OVERHEAD_TOKENS`
per message.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from mastif.core.config import ExperimentConfig
from mastif.frameworks.plan import PlannedNode, WorkflowPlan, plan_workflow
from mastif.tasks import Task
from mastif.tools import Tool

Scenario = Literal["low", "high"]

#: characters per token for English prose and JSON (OpenAI's rule of thumb)
DEFAULT_CHARS_PER_TOKEN = 4.0
#: tokens a chat template adds per message (role markers, separators; OpenAI's
#: token-counting guide counts 3-4 per message)
MESSAGE_OVERHEAD_TOKENS = 4
#: reply length in the low scenario: a reply is at least its end-of-turn token
LOW_REPLY_TOKENS = 1
#: prompt tokens a framework adds to every call of a node visit by itself: CrewAI's
#: role-playing system message and "Current Task: ..." turn (docs/frameworks.md, measured
#: with the SmolLM2 tokenizer on a node's first request)
FRAMEWORK_PROMPT_OVERHEAD_TOKENS: dict[str, int] = {"crewai": 78}
#: what CrewAI sends back after a ReAct turn in a node without tools (a tool that does not
#: exist, a format reminder, the forced-final-answer request): its longest such message,
#: ``format_without_tools`` in crewai's translations/en.json, is 702 characters
CREWAI_REACT_FEEDBACK_CHARS = 702
#: the run id of the simulated runs
_RUN_ID = "estimate"


@dataclass(frozen=True)
class CallCost:
    """One LLM call of a simulated run."""

    node: str
    prompt_tokens: int
    completion_tokens: int
    with_tools: bool


@dataclass(frozen=True)
class RunCost:
    """The calls of one simulated run (one scenario)."""

    calls: tuple[CallCost, ...]

    @property
    def n_calls(self) -> int:
        return len(self.calls)

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)


# ------------------------------------------------------------------------ calls per visit


def calls_per_visit(
    framework: str, uses_tools: bool, max_tool_rounds: int, scenario: Scenario
) -> int:
    """LLM calls of one node visit, as the framework adapters make them.

    A tool-using node (``use_tools`` and a non-empty tool list): in every adapter the model
    is asked with the tools while fewer than ``max_tool_rounds`` replies asked for tools,
    then once more without them (LangGraph's conditional edge, LangChain's ``NodeTurns``
    middleware, CrewAI's ``GatewayLLM.call`` cap with ``max_iter = max_tool_rounds + 1``,
    Semantic Kernel's ``maximum_auto_invoke_attempts``): 1 call at least, at most
    ``max_tool_rounds + 1``. A node without tools is one call, except under CrewAI, whose
    ReAct parser runs a reply that spells out ``Action:`` as a tool call and asks again up
    to ``max_iter`` turns, then makes its forced-final-answer call: at most
    ``max_tool_rounds + 2``.
    """
    if scenario == "low":
        return 1
    if uses_tools:
        return max_tool_rounds + 1
    if framework == "crewai":
        return max_tool_rounds + 2
    return 1


# ------------------------------------------------------------------------ the simulated run


def _tokens(chars: int, chars_per_token: float) -> int:
    return math.ceil(chars / chars_per_token)


def tool_list_json(tools: Sequence[Tool]) -> str:
    """The ``tools`` array of a chat request, as the OpenAI API receives it."""
    return json.dumps([t.openai_schema() for t in tools])


def tool_list_tokens(tools: Sequence[Tool], chars_per_token: float) -> int:
    """Estimated tokens of :func:`tool_list_json`, on every call that offers the tools;
    0 without tools."""
    return _tokens(len(tool_list_json(tools)), chars_per_token) if tools else 0


def tool_result_cap(tool_names: Sequence[str], page_chars: int) -> int:
    """The longest result one call of any of ``tool_names`` hands back (characters).

    The web tools cut page text at ``page_chars`` (a browser tool's listing of links, fields
    and buttons after it is not counted); the built-in and knowledge tools cut their output
    at :data:`mastif.core.textclip.MAX_TEXT_CHARS`. Both say what they cut.
    """
    from mastif.core.textclip import MAX_TEXT_CHARS, clip_text
    from mastif.tools.web import WEB_TOOL_NAMES

    caps = [0]
    if any(n in WEB_TOOL_NAMES for n in tool_names):
        caps.append(len(_page_listing(page_chars)))
    if any(n not in WEB_TOOL_NAMES for n in tool_names):
        caps.append(len(clip_text("x" * (MAX_TEXT_CHARS + 1))))
    return max(caps)


def _page_listing(page_chars: int) -> str:
    """A page as the web tools list it, with ``page_chars`` of text (the high ``{page}``)."""
    from mastif.tools.web import format_snapshot

    snap = {"title": "", "url": "", "text": "x" * (page_chars + 1), "links": [], "fields": [],
            "buttons": []}  # fmt: skip
    return format_snapshot(snap, page_chars)


@dataclass
class _Simulation:
    """The settings of one simulated run (one framework, one scenario)."""

    framework: str
    scenario: Scenario
    max_tool_rounds: int
    max_tokens: int
    max_subtasks: int
    chars_per_token: float
    tool_list_tokens: int
    result_chars: int
    calls: list[CallCost] = field(default_factory=list)

    @property
    def reply_chars(self) -> int:
        tokens = self.max_tokens if self.scenario == "high" else LOW_REPLY_TOKENS
        return math.ceil(tokens * self.chars_per_token)

    def visit(self, node_name: str, uses_tools: bool, is_decomposer: bool, prompt: str) -> str:
        """Cost the calls of one node visit with ``prompt``; return the node's output text."""
        n = calls_per_visit(self.framework, uses_tools, self.max_tool_rounds, self.scenario)
        overhead = FRAMEWORK_PROMPT_OVERHEAD_TOKENS.get(self.framework, 0)
        # what each earlier call of the visit added to the conversation: its reply and what
        # came back (a tool result, or CrewAI's ReAct feedback)
        back = self.result_chars if uses_tools else CREWAI_REACT_FEEDBACK_CHARS
        completion = max(1, _tokens(self.reply_chars, self.chars_per_token))
        for k in range(n):
            with_tools = uses_tools and k < self.max_tool_rounds
            chars = len(prompt) + k * (self.reply_chars + back)
            tokens = (
                _tokens(chars, self.chars_per_token)
                + (1 + 2 * k) * MESSAGE_OVERHEAD_TOKENS
                + overhead
                + (self.tool_list_tokens if with_tools else 0)
            )
            self.calls.append(CallCost(node_name, tokens, completion, with_tools))
        if is_decomposer and self.scenario == "high":
            # a numbered list of max_subtasks items, max_tokens long in all
            item = max(1, self.reply_chars // self.max_subtasks - 4)
            return "\n".join(f"{i}. {'x' * item}" for i in range(1, self.max_subtasks + 1))
        return "x" * self.reply_chars


def _scenario_plan(plan: WorkflowPlan, scenario: Scenario) -> WorkflowPlan:
    """The plan with its loop-exit rule forced: every ``stop_when`` matches (low) or none
    is there (high). The rest of the plan, and the loop rules of the code, are unchanged."""

    def force(node: PlannedNode) -> PlannedNode:
        if scenario == "high":
            stop = None
        else:
            stop = r"\A" if node.spec.stop_when else None  # \A matches any text
        return replace(node, spec=node.spec.model_copy(update={"stop_when": stop}))

    return replace(
        plan,
        before=tuple(force(n) for n in plan.before),
        loop=tuple(force(n) for n in plan.loop),
        after=tuple(force(n) for n in plan.after),
    )


def simulate_run(
    config: ExperimentConfig,
    framework: str,
    prompt_format: str | None,
    scenario: Scenario,
    task: Task,
    tools: Sequence[Tool],
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
    base_dir: Path | None = None,
) -> tuple[RunCost, dict[str, Any]]:
    """One run of the workflow with a dispatcher instead of a model.

    Returns the run's calls and the run as the runs table holds it (the fields the judge's
    :func:`~mastif.evaluation.judge.build_messages` reads), both of ``scenario``.
    """
    from mastif.frameworks.base import RunContext, RunRecorder
    from mastif.frameworks.orchestration import run_hierarchical, run_linear
    from mastif.protocols.standard import InProcessTransport
    from mastif.tools import ToolResult

    gen = config.generation
    plan = _scenario_plan(plan_workflow(config.workflow, gen, base_dir, prompt_format), scenario)
    tool_names = [t.name for t in tools]
    sim = _Simulation(
        framework=framework,
        scenario=scenario,
        max_tool_rounds=gen.max_tool_rounds,
        max_tokens=gen.max_tokens,
        max_subtasks=config.workflow.max_subtasks,
        chars_per_token=chars_per_token,
        tool_list_tokens=tool_list_tokens(tools, chars_per_token),
        result_chars=tool_result_cap(tool_names, config.web_options.page_chars),
    )
    page = _page_listing(config.web_options.page_chars)

    async def page_view() -> str:
        return page

    ctx = RunContext(
        run_id=_RUN_ID, task=task, plan=plan, generation=gen,
        tools=InProcessTransport(list(tools)), recorder=RunRecorder(), gateway_url="",
        model_name="", gateway_token="", page_view=page_view if scenario == "high" else None,
    )  # fmt: skip
    decomposer = plan.nodes[0].name if plan.shape == "hierarchical" else None

    async def dispatch(node: PlannedNode, step: int, prompt: str) -> str:
        uses_tools = node.spec.use_tools and bool(tools)
        if uses_tools and scenario == "high":
            for _ in range(gen.max_tool_rounds):  # one call per round, each a full result
                ctx.recorder.tool_call(
                    node.name, step, tool_names[0], "x" * sim.reply_chars,
                    ToolResult(True, "x" * sim.result_chars),
                )  # fmt: skip
        return sim.visit(node.name, uses_tools, node.name == decomposer, prompt)

    if plan.shape == "hierarchical":
        final = asyncio.run(run_hierarchical(ctx, dispatch, dispatch))
    else:
        final = asyncio.run(run_linear(ctx, dispatch))
    run = {
        "status": "ok",
        "error_class": None,
        "error_message": None,
        "node_outputs": [
            {"node": o.node, "step": o.step, "text": o.text} for o in ctx.recorder.node_outputs
        ],
        "tool_calls": [
            {
                "name": c.name,
                "arguments": c.arguments,
                "ok": c.ok,
                "output": c.output,
                "error": c.error,
            }
            for c in ctx.recorder.tool_calls
        ],
        "final_answer": final,
    }
    return RunCost(tuple(sim.calls)), run


# ------------------------------------------------------------------------ the judge


def judge_prompt_tokens(
    messages: Sequence[dict[str, str]],
    max_tokens: int,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
) -> int:
    """Estimated prompt tokens of one judge call: the messages and the reply's JSON schema
    (sent as ``response_format``)."""
    from mastif.evaluation.judge import judgement_schema

    chars = sum(len(m["content"]) for m in messages) + len(json.dumps(judgement_schema(max_tokens)))
    return _tokens(chars, chars_per_token) + len(messages) * MESSAGE_OVERHEAD_TOKENS


def judgement_bound(
    messages: Sequence[dict[str, str]],
    max_tokens: int,
    attempts: int,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
) -> tuple[int, int]:
    """(prompt, completion) tokens one judgement could take at most (the ``high``
    scenario): every attempt, each reply ``max_tokens`` long."""
    return attempts * judge_prompt_tokens(messages, max_tokens, chars_per_token), (
        attempts * max_tokens
    )


def judge_cost(
    config: ExperimentConfig,
    run: dict[str, Any],
    task: Task,
    rubric: str,
    scenario: Scenario,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
) -> RunCost:
    """The judge's calls on one run: its prompt is :func:`mastif.evaluation.judge.build_messages` of
    the run plus the reply's JSON schema (sent as ``response_format``); one attempt with
    the shortest valid reply (low) or ``judge.attempts`` with ``judge.max_tokens`` (high);
    as many times as the run is judged: by every judge of the panel, ``judge.repeats`` times
    each."""
    from mastif.evaluation.judge import CRITERIA, JudgeClip, build_messages

    j = config.judge
    messages = build_messages(
        run, task.model_dump(), rubric, reference_guided=j.reference_guided,
        clip=JudgeClip(j.node_chars, j.tool_chars, j.answer_chars),
    )  # fmt: skip
    prompt = judge_prompt_tokens(messages, j.max_tokens, chars_per_token)
    if scenario == "high":
        attempts, completion = config.judge.attempts, config.judge.max_tokens
    else:
        # the schema's rationales have minLength 12
        shortest = {k: v for c in CRITERIA for k, v in
                    ((f"{c}_rationale", "x" * 12), (f"{c}_score", 0.0))}  # fmt: skip
        attempts = 1
        completion = _tokens(len(json.dumps(shortest, separators=(",", ":"))), chars_per_token)
    judgements = len(j.panel) * j.repeats
    calls = attempts * judgements
    return RunCost(tuple(CallCost("judge", prompt, completion, False) for _ in range(calls)))


# ------------------------------------------------------------------------ the tools


def configured_tools(config: ExperimentConfig) -> list[Tool]:
    """The config's tools as the runner builds them (names, descriptions, JSON schemas);
    nothing is served and no browser is started."""
    from mastif.execution.webenv import WebEnvironment

    env = WebEnvironment(config.web, config.web_options, None)
    try:
        return list(env.tools(list(config.tools)))
    finally:
        env.close()

"""What an experiment will cost before it runs: LLM calls, tokens and US dollars.

One job: from an experiment config, bound the calls, prompt and completion tokens and
dollars of every stack and of the judge, without calling a model. These are **estimates**:
tokens come from characters at a chars-per-token ratio (4 for English and JSON by default,
a parameter), and every figure is a bound of one of two scenarios.

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
per message. Dollars use each model's ``price`` in the config; a model without one gives
``None`` dollars, never 0.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from mastif.core.config import (
    PATH_SOURCES,
    ExperimentConfig,
    ModelPrice,
    Stack,
    resolve_path,
)
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
class Range:
    """A low and a high bound of one quantity."""

    low: float
    high: float

    def __add__(self, other: Range) -> Range:
        return Range(self.low + other.low, self.high + other.high)

    def scaled(self, k: float) -> Range:
        """Both bounds times ``k``."""
        return Range(self.low * k, self.high * k)

    @staticmethod
    def zero() -> Range:
        return Range(0, 0)


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


@dataclass(frozen=True)
class PerRun:
    """Calls and tokens of one run, low and high."""

    calls: Range
    prompt_tokens: Range
    completion_tokens: Range

    @staticmethod
    def of(low: RunCost, high: RunCost) -> PerRun:
        return PerRun(
            Range(low.n_calls, high.n_calls),
            Range(low.prompt_tokens, high.prompt_tokens),
            Range(low.completion_tokens, high.completion_tokens),
        )


@dataclass(frozen=True)
class StackEstimate:
    """One stack: its runs, and per run the agent's and the judge's calls and tokens."""

    stack: Stack
    runs: int
    agent: PerRun
    judge: PerRun


@dataclass(frozen=True)
class Line:
    """A row of the estimate: one agent model over its stacks, the judge, or the total."""

    label: str
    stacks: int
    runs: int
    calls_per_run: Range
    calls: Range
    prompt_tokens: Range
    completion_tokens: Range
    #: ``None`` when a model involved has no ``price``
    usd: Range | None


@dataclass(frozen=True)
class ExperimentEstimate:
    """Everything :func:`estimate_experiment` computed, and on which assumptions."""

    experiment: str
    chars_per_token: float
    typical_task: Task
    task_note: str
    stacks: tuple[StackEstimate, ...]
    models: tuple[Line, ...]
    judge: Line
    total: Line
    tool_list_tokens: int
    #: the longest prompt of one agent call (high), to hold against the models' context
    largest_prompt_tokens: int
    #: judgements per run: judges of the panel (``judge.models``) x ``judge.repeats``
    judgements_per_run: int = 1

    @property
    def runs(self) -> int:
        return sum(s.runs for s in self.stacks)


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


def tool_result_cap(tool_names: Sequence[str], page_chars: int) -> int:
    """The longest result one call of any of ``tool_names`` hands back (characters).

    The web tools cut page text at ``page_chars`` (a browser tool's listing of links, fields
    and buttons after it is not counted); the built-in and knowledge tools cut their output
    at :data:`mastif.tools.base.MAX_OUTPUT_CHARS`. Both say what they cut.
    """
    from mastif.tools.base import MAX_OUTPUT_CHARS, truncate_output
    from mastif.tools.web import WEB_TOOL_NAMES

    caps = [0]
    if any(n in WEB_TOOL_NAMES for n in tool_names):
        caps.append(len(_page_listing(page_chars)))
    if any(n not in WEB_TOOL_NAMES for n in tool_names):
        caps.append(len(truncate_output("x" * (MAX_OUTPUT_CHARS + 1))))
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
        tool_list_tokens=_tokens(len(tool_list_json(tools)), chars_per_token) if tools else 0,
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


# ------------------------------------------------------------------------ inputs


def typical_task(tasks: Sequence[Task]) -> Task:
    """The median task by the characters it puts into prompts (instruction, website,
    domains, reference steps); ties by task id."""
    if not tasks:
        raise ValueError("no tasks to pick a typical one from")

    def size(t: Task) -> int:
        fields = (t.confirmed_task, t.website, t.domain or "", t.subdomain or "")
        return sum(map(len, fields)) + sum(len(s) + 5 for s in t.reference_steps)

    ranked = sorted(tasks, key=lambda t: (size(t), t.task_id))
    return ranked[(len(ranked) - 1) // 2]


def load_estimate_tasks(
    config: ExperimentConfig, base_dir: Path | None = None, tasks_path: str | Path | None = None
) -> tuple[list[Task], str]:
    """The tasks the typical one is picked from, and a note saying which they are.

    ``tasks_path``: a tasks table the sample rule wrote (``results/tasks.parquet``). Else the
    config's own source when it is a local one; a hub source (``mind2web``) is not
    downloaded: the shipped Mind2Web-style ``builtin`` set stands in for it.
    """
    from mastif.tasks import load_tasks, tasks_from_frame

    if tasks_path is not None:
        import polars as pl

        return tasks_from_frame(pl.read_parquet(tasks_path)), f"from {tasks_path}"
    spec = config.tasks
    if spec.source == "mind2web":
        note = ("from the builtin Mind2Web-style set (tasks.source mind2web is not "
                "downloaded; --tasks results/tasks.parquet uses the drawn sample)")  # fmt: skip
        return load_tasks("builtin"), note
    path = (
        str(resolve_path(spec.path, base_dir))
        if spec.source in PATH_SOURCES and spec.path
        else None
    )
    tasks = load_tasks(spec.source, path, format=spec.format, columns=spec.columns)
    return tasks, f"from tasks.source {spec.source}"


def configured_tools(config: ExperimentConfig) -> list[Tool]:
    """The config's tools as the runner builds them (names, descriptions, JSON schemas);
    nothing is served and no browser is started."""
    from mastif.execution.webenv import WebEnvironment

    env = WebEnvironment(config.web, config.web_options, None)
    try:
        return list(env.tools(list(config.tools)))
    finally:
        env.close()


# ------------------------------------------------------------------------ the estimate


def dollars(prompt: Range, completion: Range, price: ModelPrice | None) -> Range | None:
    """US dollars of ``prompt`` and ``completion`` tokens at ``price``; ``None`` unpriced."""
    if price is None:
        return None
    return Range(
        (prompt.low * price.input_per_mtok + completion.low * price.output_per_mtok) / 1e6,
        (prompt.high * price.input_per_mtok + completion.high * price.output_per_mtok) / 1e6,
    )


def _sum_usd(parts: Sequence[Range | None]) -> Range | None:
    if any(p is None for p in parts):
        return None
    total = Range.zero()
    for p in parts:
        assert p is not None
        total = total + p
    return total


def _line(
    label: str, per_run: Sequence[tuple[int, PerRun]], usd: Range | None, stacks: int
) -> Line:
    runs = sum(r for r, _ in per_run)
    calls = prompt = completion = Range.zero()
    for r, p in per_run:
        calls = calls + p.calls.scaled(r)
        prompt = prompt + p.prompt_tokens.scaled(r)
        completion = completion + p.completion_tokens.scaled(r)
    per_call = Range(min(p.calls.low for _, p in per_run), max(p.calls.high for _, p in per_run))
    return Line(label, stacks, runs, per_call, calls, prompt, completion, usd)


def estimate_experiment(
    config: ExperimentConfig,
    base_dir: Path | None = None,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
    tasks: Sequence[Task] | None = None,
    task_note: str | None = None,
) -> ExperimentEstimate:
    """Calls, tokens and dollars of ``config`` (every stack x ``sample_size`` x ``repeats``
    runs, each judged by every judge of the panel `judge.repeats` times), low and high; see
    the module docstring for both scenarios."""
    if chars_per_token <= 0:
        raise ValueError(f"chars_per_token must be > 0, got {chars_per_token}")
    if getattr(config, "importing", False):
        raise ValueError("import mode (import.mastif_log) runs no stack: nothing to estimate")
    if tasks is None:
        loaded, note = load_estimate_tasks(config, base_dir)
        tasks, task_note = loaded, task_note or note
    task = typical_task(tasks)
    tools = configured_tools(config)
    rubric = resolve_path(config.judge.rubric, base_dir).read_text()
    runs_per_stack = config.tasks.sample_size * config.repeats

    cache: dict[tuple[str, str | None], tuple[PerRun, PerRun]] = {}
    stacks: list[StackEstimate] = []
    largest = 0
    for stack in config.stacks():
        key = (stack.framework, config.prompt_format_for(stack.protocol))
        if key not in cache:
            costs = {}
            scenarios: tuple[Scenario, ...] = ("low", "high")
            for scenario in scenarios:
                agent, run = simulate_run(config, key[0], key[1], scenario, task, tools,
                                          chars_per_token, base_dir)  # fmt: skip
                judge = judge_cost(config, run, task, rubric, scenario, chars_per_token)
                costs[scenario] = (agent, judge)
                largest = max([largest, *(c.prompt_tokens for c in agent.calls)])
            cache[key] = (
                PerRun.of(costs["low"][0], costs["high"][0]),
                PerRun.of(costs["low"][1], costs["high"][1]),
            )
        agent_run, judge_run = cache[key]
        stacks.append(StackEstimate(stack, runs_per_stack, agent_run, judge_run))

    models = []
    for model_id in config.agent_models:
        mine = [(s.runs, s.agent) for s in stacks if s.stack.model == model_id]
        line = _line(model_id, mine, None, len(mine))
        usd = dollars(line.prompt_tokens, line.completion_tokens, config.models[model_id].price)
        models.append(replace(line, usd=usd))
    panel = config.judge.panel
    label = f"judge: {panel[0]}" if len(panel) == 1 else f"judge panel: {', '.join(panel)}"
    judge_line = _line(label, [(s.runs, s.judge) for s in stacks], None, len(stacks))
    # every judge of the panel has the same prompts and replies: an equal share each, at its
    # own price
    share = 1.0 / len(panel)
    judge_line = replace(judge_line, usd=_sum_usd([
        dollars(judge_line.prompt_tokens.scaled(share),
                judge_line.completion_tokens.scaled(share), config.models[m].price)
        for m in panel
    ]))  # fmt: skip
    everything = [(s.runs, s.agent) for s in stacks] + [(s.runs, s.judge) for s in stacks]
    total = _line("total", everything, _sum_usd([*(m.usd for m in models), judge_line.usd]),
                  len(stacks))  # fmt: skip
    # a run's calls are the agent's plus the judge's
    total = replace(
        total,
        runs=judge_line.runs,
        calls_per_run=Range(
            min(s.agent.calls.low + s.judge.calls.low for s in stacks),
            max(s.agent.calls.high + s.judge.calls.high for s in stacks),
        ),
    )
    return ExperimentEstimate(
        experiment=config.experiment,
        chars_per_token=chars_per_token,
        typical_task=task,
        task_note=task_note or "tasks given",
        stacks=tuple(stacks),
        models=tuple(models),
        judge=judge_line,
        total=total,
        tool_list_tokens=_tokens(len(tool_list_json(tools)), chars_per_token) if tools else 0,
        largest_prompt_tokens=largest,
        judgements_per_run=len(panel) * config.judge.repeats,
    )


# ------------------------------------------------------------------------ printing


def _count(x: float) -> str:
    x = round(x)
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:,.1f}{unit}"
    return f"{x:,}"


def _range(r: Range, fmt: str = "count") -> str:
    if fmt == "usd":
        return f"{r.low:,.2f}–{r.high:,.2f}"
    if fmt == "int":
        return f"{round(r.low):,}–{round(r.high):,}"
    return f"{_count(r.low)}–{_count(r.high)}"


def format_estimate(est: ExperimentEstimate, source: str = "") -> str:
    """The estimate as a Markdown table with a header saying what it assumes."""
    t = est.typical_task
    head = [
        f"{source or est.experiment}: {len(est.stacks)} stack(s), {est.runs:,} runs, each judged "
        + ("once" if est.judgements_per_run == 1 else f"{est.judgements_per_run} times"),
        f"ESTIMATE, not a measurement: tokens = characters / {est.chars_per_token:g}.",
        "  low:  fewest calls (a loop stops in round 1, no tool calls, 1-token replies)",
        "  high: most calls (max_steps rounds, all max_tool_rounds, max_tokens replies)",
        f"typical task: {t.task_id} ({len(t.confirmed_task)} characters, "
        f"{len(t.reference_steps)} reference steps), {est.task_note}",
        f"tool list: {est.tool_list_tokens:,} tokens on every call that offers tools; "
        f"longest agent prompt: {est.largest_prompt_tokens:,} tokens",
        "US$ from each model's price in the config (unknown without one)",
        "",
        "| | stacks | runs | calls/run | prompt tokens | completion tokens | US$ |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for line in (*est.models, est.judge, est.total):
        usd = _range(line.usd, "usd") if line.usd is not None else "unknown (no price)"
        rows.append(
            f"| {line.label} | {line.stacks} | {line.runs:,} | {_range(line.calls_per_run, 'int')} "
            f"| {_range(line.prompt_tokens)} | {_range(line.completion_tokens)} | {usd} |"
        )
    return "\n".join(head + rows)

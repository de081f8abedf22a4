"""What an experiment will cost before it runs: LLM calls, tokens and US dollars.

One job: from an experiment config, bound the calls, prompt and completion tokens and
dollars of every stack and of the judge, without calling a model. These are **estimates**:
each stack's runs and their judgements are costed by :mod:`mastif.execution.cost_model` (its
docstring says what the low and high scenarios assume and what is not counted) on the
config's typical task (:func:`typical_task`), then summed per agent model, for the judge and
in total. Dollars use each model's ``price`` in the config; a model without one gives
``None`` dollars, never 0. ``mastif estimate`` prints the result
(:mod:`mastif.reporting.estimate_report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mastif.core import pricing
from mastif.core.config import (
    PATH_SOURCES,
    ExperimentConfig,
    ModelPrice,
    Stack,
    resolve_path,
)
from mastif.execution.cost_model import (
    DEFAULT_CHARS_PER_TOKEN,
    RunCost,
    Scenario,
    configured_tools,
    judge_cost,
    simulate_run,
    tool_list_tokens,
)
from mastif.tasks import Task
from mastif.tools import Tool


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


# ------------------------------------------------------------------------ the estimate


def dollars(prompt: Range, completion: Range, price: ModelPrice | None) -> Range | None:
    """US dollars of ``prompt`` and ``completion`` tokens at ``price``; ``None`` unpriced."""
    if price is None:
        return None
    return Range(
        pricing.usd(prompt.low, completion.low, price.input_per_mtok, price.output_per_mtok),
        pricing.usd(prompt.high, completion.high, price.input_per_mtok, price.output_per_mtok),
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


def _costs_per_run(
    config: ExperimentConfig,
    framework: str,
    prompt_format: str | None,
    task: Task,
    tools: Sequence[Tool],
    rubric: str,
    chars_per_token: float,
    base_dir: Path | None,
) -> tuple[PerRun, PerRun, int]:
    """Per run of ``framework`` under ``prompt_format``: the agent's and the judge's calls
    and tokens, low and high, and the longest prompt of one agent call."""
    agent: dict[Scenario, RunCost] = {}
    judge: dict[Scenario, RunCost] = {}
    scenarios: tuple[Scenario, ...] = ("low", "high")
    for scenario in scenarios:
        agent[scenario], run = simulate_run(config, framework, prompt_format, scenario, task,
                                            tools, chars_per_token, base_dir)  # fmt: skip
        judge[scenario] = judge_cost(config, run, task, rubric, scenario, chars_per_token)
    largest = max([0, *(c.prompt_tokens for s in scenarios for c in agent[s].calls)])
    return (
        PerRun.of(agent["low"], agent["high"]),
        PerRun.of(judge["low"], judge["high"]),
        largest,
    )


def _stack_estimates(
    config: ExperimentConfig,
    task: Task,
    tools: Sequence[Tool],
    chars_per_token: float,
    base_dir: Path | None,
) -> tuple[list[StackEstimate], int]:
    """Every stack's runs and costs per run, and the longest prompt of one agent call. The
    costs depend on the framework and the protocol's prompt format only, so stacks that
    share both are simulated once."""
    rubric = resolve_path(config.judge.rubric, base_dir).read_text()
    runs_per_stack = config.tasks.sample_size * config.repeats
    cache: dict[tuple[str, str | None], tuple[PerRun, PerRun]] = {}
    stacks: list[StackEstimate] = []
    largest = 0
    for stack in config.stacks():
        key = (stack.framework, config.prompt_format_for(stack.protocol))
        if key not in cache:
            agent, judge, longest = _costs_per_run(config, *key, task, tools, rubric,
                                                   chars_per_token, base_dir)  # fmt: skip
            cache[key] = (agent, judge)
            largest = max(largest, longest)
        agent_run, judge_run = cache[key]
        stacks.append(StackEstimate(stack, runs_per_stack, agent_run, judge_run))
    return stacks, largest


def _judge_line(config: ExperimentConfig, stacks: Sequence[StackEstimate]) -> Line:
    """The judge's (or the panel's) line: every judge of the panel has the same prompts and
    replies, so an equal share each, at its own price."""
    panel = config.judge.panel
    label = f"judge: {panel[0]}" if len(panel) == 1 else f"judge panel: {', '.join(panel)}"
    line = _line(label, [(s.runs, s.judge) for s in stacks], None, len(stacks))
    share = 1.0 / len(panel)
    return replace(line, usd=_sum_usd([
        dollars(line.prompt_tokens.scaled(share),
                line.completion_tokens.scaled(share), config.models[m].price)
        for m in panel
    ]))  # fmt: skip


def _lines(
    config: ExperimentConfig, stacks: Sequence[StackEstimate]
) -> tuple[list[Line], Line, Line]:
    """The estimate's lines: one per agent model, the judge's, and the total."""
    models = []
    for model_id in config.agent_models:
        mine = [(s.runs, s.agent) for s in stacks if s.stack.model == model_id]
        line = _line(model_id, mine, None, len(mine))
        price = config.models[model_id].price
        models.append(replace(line, usd=dollars(line.prompt_tokens, line.completion_tokens, price)))
    judge_line = _judge_line(config, stacks)
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
    return models, judge_line, total


def estimate_experiment(
    config: ExperimentConfig,
    base_dir: Path | None = None,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
    tasks: Sequence[Task] | None = None,
    task_note: str | None = None,
) -> ExperimentEstimate:
    """Calls, tokens and dollars of ``config`` (every stack x ``sample_size`` x ``repeats``
    runs, each judged by every judge of the panel `judge.repeats` times), low and high; see
    :mod:`mastif.execution.cost_model` for both scenarios."""
    if chars_per_token <= 0:
        raise ValueError(f"chars_per_token must be > 0, got {chars_per_token}")
    if getattr(config, "importing", False):
        raise ValueError("import mode (import.mastif_log) runs no stack: nothing to estimate")
    if tasks is None:
        loaded, note = load_estimate_tasks(config, base_dir)
        tasks, task_note = loaded, task_note or note
    task = typical_task(tasks)
    tools = configured_tools(config)
    stacks, largest = _stack_estimates(config, task, tools, chars_per_token, base_dir)
    models, judge_line, total = _lines(config, stacks)
    return ExperimentEstimate(
        experiment=config.experiment,
        chars_per_token=chars_per_token,
        typical_task=task,
        task_note=task_note or "tasks given",
        stacks=tuple(stacks),
        models=tuple(models),
        judge=judge_line,
        total=total,
        tool_list_tokens=tool_list_tokens(tools, chars_per_token),
        largest_prompt_tokens=largest,
        judgements_per_run=len(config.judge.panel) * config.judge.repeats,
    )

"""LLM-as-judge: grade each run on task understanding (TU), adherence (TA) and completion (TCR).

The judge reads the rubric (``config/rubric.md``, a rule input), the task, what the agent
produced node by node, its tool calls with their outcomes and its final answer, and answers
a JSON object constrained by a JSON schema in which every score is an enum of the five
anchors (1.0 / 0.7 / 0.5 / 0.3 / 0.0). Each reply is validated again on the way in, whatever
the server promised. A reply that does not parse or validate is retried; after the last
attempt the run is recorded as ``judge_failed`` with the raw reply — never a default score.
TCR is the Λ of the paper's Eq. 1.

What the judge is shown is recorded with every judgement: how long a node output, a tool call
(arguments, output or error, the run's error message) and the final answer may be before
they are cut (``judge.node_chars`` / ``tool_chars`` / ``answer_chars``) and how many texts
were cut. Every attempt samples at ``judge.temperature``; a retry takes a new seed derived
from the run and the attempt, so retried scores come from the same distribution as first
ones.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import openai
import polars as pl

from mastif.providers import Gateway

log = logging.getLogger(__name__)

SCORE_ANCHORS: tuple[float, ...] = (1.0, 0.7, 0.5, 0.3, 0.0)
CRITERIA: tuple[str, ...] = ("TU", "TA", "TCR")


#: tokens a judgement's JSON may take besides its rationales' text (keys, quotes, scores,
#: the whitespace the grammar lets the model write): Gemma-3-270M spent ~70 on a reply cut
#: at 512 tokens with 149-character rationales, so leave room
JUDGEMENT_SCAFFOLD_TOKENS = 96


def rationale_max_chars(max_tokens: int | None) -> int:
    """The longest rationale the judgement schema allows: 200 characters, or less when
    three of them would not fit ``max_tokens`` at one token per character (a small judge
    looping on digits spends a token on each), so every reply the schema allows ends
    within ``max_tokens`` -- a degenerate rationale is cut by the grammar, not the
    judgement by the token limit."""
    if max_tokens is None:
        return 200
    return max(min(200, (max_tokens - JUDGEMENT_SCAFFOLD_TOKENS) // len(CRITERIA)), 12)


def judgement_schema(max_tokens: int | None = None) -> dict[str, Any]:
    """JSON schema of a judge reply: rationale then score per criterion (reasoning first);
    rationales at most :func:`rationale_max_chars` of ``max_tokens`` long."""
    props: dict[str, Any] = {}
    longest = rationale_max_chars(max_tokens)
    for c in CRITERIA:
        props[f"{c}_rationale"] = {"type": "string", "minLength": 12, "maxLength": longest}
        props[f"{c}_score"] = {"type": "number", "enum": list(SCORE_ANCHORS)}
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


class JudgeParseError(ValueError):
    """A judge reply that is not a valid judgement."""


@dataclass(frozen=True)
class Judgement:
    scores: dict[str, float]
    rationales: dict[str, str]


def parse_judgement(text: str) -> Judgement:
    """Parse and validate a reply; every score must be one of :data:`SCORE_ANCHORS`."""
    try:
        # strict=False: a raw newline inside a rationale is harmless, not a broken reply
        data = json.loads(text, strict=False)
    except (json.JSONDecodeError, TypeError) as exc:
        raise JudgeParseError(f"reply is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise JudgeParseError("reply is not a JSON object")
    scores, rationales = {}, {}
    for c in CRITERIA:
        raw = data.get(f"{c}_score")
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise JudgeParseError(f"{c}_score missing or not a number: {raw!r}")
        match = [a for a in SCORE_ANCHORS if abs(float(raw) - a) < 1e-9]
        if not match:
            raise JudgeParseError(f"{c}_score {raw!r} is not one of {SCORE_ANCHORS}")
        scores[c] = match[0]
        rationale = data.get(f"{c}_rationale")
        if not isinstance(rationale, str) or not rationale.strip():
            raise JudgeParseError(f"{c}_rationale missing or empty")
        rationales[c] = rationale.strip()
    return Judgement(scores, rationales)


@dataclass(frozen=True)
class JudgeClip:
    """The longest text of each kind the judge is shown (characters; config ``judge``).

    The defaults are the schema's: long enough that the default experiment's outputs reach
    the judge whole (``docs/data.md``, judged table).
    """

    #: one node output
    node_chars: int = 4096
    #: one tool call's arguments, its output or error; the run's error message
    tool_chars: int = 4000
    #: the final answer
    answer_chars: int = 4096


CUT_MARK = " ...[cut]"


class _Clipper:
    """Cuts texts at a length and counts how many it cut."""

    def __init__(self) -> None:
        self.n_clipped = 0

    def __call__(self, text: str | None, n: int) -> str:
        text = (text or "").strip()
        if len(text) <= n:
            return text
        self.n_clipped += 1
        return text[:n] + CUT_MARK


def build_messages(
    run: dict[str, Any],
    task: dict[str, Any],
    rubric: str,
    *,
    reference_guided: bool = True,
    clip: JudgeClip = JudgeClip(),
) -> list[dict[str, str]]:
    """The judge's view of one run (:func:`judge_view` without the count of cut texts)."""
    return judge_view(run, task, rubric, reference_guided=reference_guided, clip=clip)[0]


def judge_view(
    run: dict[str, Any],
    task: dict[str, Any],
    rubric: str,
    *,
    reference_guided: bool = True,
    clip: JudgeClip = JudgeClip(),
) -> tuple[list[dict[str, str]], int]:
    """The judge's view of one run: task, reasoning per node, tool calls, final answer; and
    how many texts in it were cut at ``clip``'s lengths.

    With ``reference_guided`` (config ``judge.reference_guided``) the judge also sees the
    task's reference steps (Mind2Web's ``action_reprs``), or, for sources that give only
    their number (Online-Mind2Web's ``reference_length``), how many steps a person needed.
    """
    _clip = _Clipper()
    node_chars, tool_chars = clip.node_chars, clip.tool_chars
    where = " / ".join(str(x) for x in (task.get("domain"), task.get("subdomain")) if x)
    lines = [
        f"Website: {task['website']}" + (f" ({where})" if where else ""),
        f"Task: {task['confirmed_task']}",
    ]
    if reference_guided and task.get("reference_steps"):
        lines.append("Reference steps a person took (for orientation, not required verbatim):")
        lines += [f"  - {s}" for s in task["reference_steps"]]
    elif reference_guided and task.get("reference_length"):
        lines.append(f"A person needed {task['reference_length']} steps for this task.")
    lines.append(f"Run status: {run['status']}" + (
        f" ({run['error_class']}: {_clip(run['error_message'], tool_chars)})" if run["error_class"] else ""
    ))  # fmt: skip
    lines.append("Agent steps:")
    for n in run["node_outputs"] or []:
        lines.append(f"  [{n['node']} {n['step']}] {_clip(n['text'], node_chars)}")
    if not run["node_outputs"]:
        lines.append("  (none)")
    lines.append("Tool calls:")
    for t in run["tool_calls"] or []:
        if t["ok"] is None:  # imported runs whose log kept no outcome per call
            outcome = f"outcome not recorded -> {_clip(t['output'], tool_chars)}"
        elif t["ok"]:
            outcome = f"ok -> {_clip(t['output'], tool_chars)}"
        else:
            outcome = f"failed: {_clip(t['error'], tool_chars)}"
        lines.append(f"  {t['name']}({_clip(t['arguments'], tool_chars)}) {outcome}")
    if not run["tool_calls"]:
        lines.append("  (none)")
    lines.append(f"Final answer: {_clip(run['final_answer'], clip.answer_chars) or '(empty)'}")
    messages = [
        {"role": "system", "content": rubric.strip()},
        {"role": "user", "content": "\n".join(lines)},
    ]
    return messages, _clip.n_clipped


@dataclass(frozen=True)
class JudgeSettings:
    model_id: str
    temperature: float
    max_tokens: int
    attempts: int
    seed: int
    #: show the judge the task's reference steps when it has them
    reference_guided: bool = True
    clip: JudgeClip = JudgeClip()


def attempt_seed(seed: int, run_id: str, attempt: int) -> int:
    """The sampling seed of attempt ``attempt`` (1-based) at judging run ``run_id``.

    The first attempt uses the configured seed; a retry gets a new one, derived from the
    seed, the run and the attempt (the same on every rerun), within llama.cpp's 32-bit range.
    """
    if attempt == 1:
        return seed
    digest = hashlib.sha256(f"{seed}|{run_id}|{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def repeat_seed(seed: int, run_id: str, repeat: int) -> int:
    """The first attempt's sampling seed of repeat ``repeat`` (0-based, ``judge.repeats``) of
    judging run ``run_id``: the configured seed for repeat 0 (so a single judgement is as
    before), else one derived from the seed, the run and the repeat (the same on every rerun,
    in llama.cpp's 32-bit range); a retry derives its own from it (:func:`attempt_seed`)."""
    if repeat == 0:
        return seed
    digest = hashlib.sha256(f"{seed}|{run_id}|repeat {repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def judge_one(
    gateway: Gateway, run_id: str, messages: list[dict[str, str]], settings: JudgeSettings
) -> dict[str, Any]:
    """Ask the judge up to ``settings.attempts`` times; return the judged-table row fields."""
    client = openai.OpenAI(
        base_url=gateway.base_url_for(run_id, "judge"), api_key=gateway.token, max_retries=0
    )
    response_format = {
        "type": "json_schema",
        "json_schema": {
            "name": "judgement",
            "schema": judgement_schema(settings.max_tokens),
            "strict": True,
        },
    }
    raw, error = "", None
    gateway.begin_run(run_id)
    attempts = 0
    judgement = None
    seed = settings.seed
    for attempt in range(1, settings.attempts + 1):
        attempts = attempt
        # every attempt at the configured temperature (a retry's scores then come from the
        # same distribution as a first attempt's), a retry with a new seed; at temperature
        # 0 (greedy) the seed changes nothing, and a retry only helps after an API error
        seed = attempt_seed(settings.seed, run_id, attempt)
        try:
            reply = client.chat.completions.create(
                model=gateway.endpoint.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=settings.temperature,
                max_tokens=settings.max_tokens,
                seed=seed,
                response_format=response_format,  # type: ignore[arg-type]
            )
            raw = reply.choices[0].message.content or ""
            judgement = parse_judgement(raw)
            error = None
            break
        except JudgeParseError as exc:
            error = f"unparseable reply: {exc}"
        except openai.APIError as exc:
            error = f"{type(exc).__name__}: {exc}"
        log.warning("judge attempt %d for run %s failed: %s", attempts, run_id, error)
    calls = gateway.end_run(run_id)
    row: dict[str, Any] = {
        "judge_status": "ok" if judgement else "judge_failed",
        "judge_raw_reply": raw,
        "judge_attempts": attempts,
        "judge_seed": seed,
        "judge_temperature": settings.temperature,
        "judge_error": error,
        "judge_prompt_tokens": sum(c.prompt_tokens or 0 for c in calls),
        "judge_completion_tokens": sum(c.completion_tokens or 0 for c in calls),
    }
    for c in CRITERIA:
        row[c] = judgement.scores[c] if judgement else None
        row[f"{c}_rationale"] = judgement.rationales[c] if judgement else None
    return row


#: one judgement of the panel (a judge's score of a run in one repeat)
PANEL_ENTRY = pl.Struct(
    {
        "judge_model": pl.String,
        "repeat": pl.Int64,
        "status": pl.String,
        "TU": pl.Float64,
        "TA": pl.Float64,
        "TCR": pl.Float64,
    }
)

JUDGED_SCHEMA = {
    "run_id": pl.String,
    "model": pl.String,
    "protocol": pl.String,
    "framework": pl.String,
    "task_id": pl.String,
    "judge_model": pl.String,
    "rubric_sha256": pl.String,
    "judge_status": pl.String,
    "TU": pl.Float64,
    "TA": pl.Float64,
    "TCR": pl.Float64,
    "TU_rationale": pl.String,
    "TA_rationale": pl.String,
    "TCR_rationale": pl.String,
    "judge_raw_reply": pl.String,
    "judge_attempts": pl.Int64,
    "judge_seed": pl.Int64,
    "judge_temperature": pl.Float64,
    "judge_error": pl.String,
    "judge_prompt_tokens": pl.Int64,
    "judge_completion_tokens": pl.Int64,
    "judge_node_chars": pl.Int64,
    "judge_tool_chars": pl.Int64,
    "judge_answer_chars": pl.Int64,
    "judge_n_clipped": pl.Int64,
    # every judgement of the panel (judge.models x judge.repeats)
    "judge_panel": pl.List(PANEL_ENTRY),
}


#: what opens a judge's endpoint: model id -> a context manager giving its gateway
OpenGateway = Callable[[str], AbstractContextManager[Gateway]]


def judge_runs(
    runs: pl.DataFrame,
    tasks: pl.DataFrame,
    rubric_path: Path,
    gateway: Gateway,
    settings: JudgeSettings,
    repeats: int = 1,
) -> pl.DataFrame:
    """One judged row per run (see docs/data.md), by the one judge behind ``gateway``."""
    return judge_panel_runs(
        runs,
        tasks,
        rubric_path,
        lambda _model_id: nullcontext(gateway),
        settings,
        panel=(settings.model_id,),
        repeats=repeats,
    )


def judge_panel_runs(
    runs: pl.DataFrame,
    tasks: pl.DataFrame,
    rubric_path: Path,
    open_gateway: OpenGateway,
    settings: JudgeSettings,
    panel: Sequence[str] | None = None,
    repeats: int = 1,
) -> pl.DataFrame:
    """One judged row per run (see docs/data.md) from a judge panel (``judge.models``).

    Every judge of ``panel`` (default: ``settings.model_id`` alone) scores every run
    ``repeats`` times, one judge's endpoint open at a time (``open_gateway(model_id)``).
    Repeat r's first attempt samples with :func:`repeat_seed`. The row's TU/TA/TCR are the
    median over the judges of each judge's repeat-0 score, leaving out judges whose
    judgement failed; ``judge_status`` is ``judge_failed`` (and the scores null) only when
    every judge failed. The reply, rationale, attempt and seed columns are those of
    ``settings.model_id``'s repeat-0 judgement, or, when it failed, of the first judge of the
    panel whose repeat-0 judgement succeeded (``judge_model`` names it); the token columns
    sum every judgement. ``judge_panel`` lists every judgement. With one judge and one
    repeat the row is that judge's judgement.
    """
    panel = tuple(panel or (settings.model_id,))
    if settings.model_id not in panel:
        raise ValueError(f"judge {settings.model_id!r} is not one of the panel {list(panel)}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    rubric_bytes = Path(rubric_path).read_bytes()
    rubric = rubric_bytes.decode("utf-8")
    rubric_sha = hashlib.sha256(rubric_bytes).hexdigest()
    by_id = {t["task_id"]: t for t in tasks.iter_rows(named=True)}
    views = []
    for run in runs.iter_rows(named=True):
        task = by_id.get(run["task_id"])
        if task is None:
            raise KeyError(
                f"run {run['run_id']} refers to task {run['task_id']!r}, not in the tasks table"
            )
        views.append(
            judge_view(
                run, task, rubric, reference_guided=settings.reference_guided, clip=settings.clip
            )
        )
    # judgements[model_id][run index][repeat] = judge_one's fields
    judgements: dict[str, list[list[dict[str, Any]]]] = {}
    # the primary judge first, then the others in the panel's order
    order = [settings.model_id, *(m for m in panel if m != settings.model_id)]
    for model_id in order:
        per_run: list[list[dict[str, Any]]] = []
        with open_gateway(model_id) as gateway:
            for run, (messages, _) in zip(runs.iter_rows(named=True), views, strict=True):
                per_repeat = []
                for r in range(repeats):
                    seed = repeat_seed(settings.seed, run["run_id"], r)
                    one = replace(settings, model_id=model_id, seed=seed)
                    fields = judge_one(gateway, run["run_id"], messages, one)
                    per_repeat.append(fields)
                    log.info("judge %s, repeat %d, run %s: %s %s", model_id, r, run["run_id"],
                             fields["judge_status"], {c: fields[c] for c in CRITERIA})  # fmt: skip
                per_run.append(per_repeat)
        judgements[model_id] = per_run
    rows = []
    for i, (run, (_, n_clipped)) in enumerate(zip(runs.iter_rows(named=True), views, strict=True)):
        first = {m: judgements[m][i][0] for m in order}
        ok = [m for m in order if first[m]["judge_status"] == "ok"]
        shown = ok[0] if ok else settings.model_id
        fields = dict(first[shown])
        for c in CRITERIA:
            fields[c] = float(np.median([first[m][c] for m in ok])) if ok else None
        for k in ("judge_prompt_tokens", "judge_completion_tokens"):
            fields[k] = sum(j[k] for m in order for j in judgements[m][i])
        entries = [
            {"judge_model": m, "repeat": r, "status": j["judge_status"],
             **{c: j[c] for c in CRITERIA}}
            for m in panel
            for r, j in enumerate(judgements[m][i])
        ]  # fmt: skip
        rows.append(
            {
                "run_id": run["run_id"],
                "model": run["model"],
                "protocol": run["protocol"],
                "framework": run["framework"],
                "task_id": run["task_id"],
                "judge_model": shown,
                "rubric_sha256": rubric_sha,
                **fields,
                "judge_node_chars": settings.clip.node_chars,
                "judge_tool_chars": settings.clip.tool_chars,
                "judge_answer_chars": settings.clip.answer_chars,
                "judge_n_clipped": n_clipped,
                "judge_panel": entries,
            }
        )
    return pl.DataFrame(rows, schema=JUDGED_SCHEMA)

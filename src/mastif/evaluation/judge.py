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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import polars as pl

from mastif.core import metric_registry as registry
from mastif.core.textclip import clip_optional
from mastif.providers import Gateway

log = logging.getLogger(__name__)

#: the judge's ordinal scale and the metrics it scores, from the metric registry
SCORE_ANCHORS: tuple[float, ...] = registry.SCORE_ANCHORS
CRITERIA: tuple[str, ...] = registry.JUDGE_SCORES


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


def known_sum(counts: Sequence[int | None]) -> int | None:
    """The sum of token counts, or ``None`` when one of them is unknown (a response without
    usage): an unknown count is never taken as 0."""
    if any(c is None for c in counts):
        return None
    return sum(c for c in counts if c is not None)


def judge_one(
    gateway: Gateway,
    run_id: str,
    messages: list[dict[str, str]],
    settings: JudgeSettings,
    key: str | None = None,
) -> dict[str, Any]:
    """Ask the judge up to ``settings.attempts`` times; return the judged-table row fields.

    ``key`` names the judgement in the gateway's bookkeeping (default ``run_id``): judgements
    of the same run in flight at once (repeats) need one each. Seeds derive from ``run_id``.
    """
    key = key or run_id
    client = openai.OpenAI(
        base_url=gateway.base_url_for(key, "judge"),
        api_key=gateway.token,
        max_retries=0,
        # no certificate store to load per judgement: the gateway is plain HTTP on loopback
        http_client=httpx.Client(verify=False),  # noqa: S501
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
    gateway.begin_run(key)
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
    client.close()
    calls = gateway.end_run(key)
    row: dict[str, Any] = {
        "judge_status": "ok" if judgement else "judge_failed",
        "judge_raw_reply": raw,
        "judge_attempts": attempts,
        "judge_seed": seed,
        "judge_temperature": settings.temperature,
        "judge_error": clip_optional(error),  # an unparseable reply is quoted in it
        # from API usage; null when a response did not report it
        "judge_prompt_tokens": known_sum([c.prompt_tokens for c in calls]),
        "judge_completion_tokens": known_sum([c.completion_tokens for c in calls]),
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
        # this judgement's tokens over its attempts, from API usage (null: not reported)
        "prompt_tokens": pl.Int64,
        "completion_tokens": pl.Int64,
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

"""The judge: strict parsing, retries, judge_failed, and a real judgement by Gemma-3-270M."""

from __future__ import annotations

import hashlib
import json

import polars as pl
import pytest

from mastif.evaluation.judge import (
    JUDGED_SCHEMA,
    SCORE_ANCHORS,
    JudgeClip,
    JudgeParseError,
    JudgeSettings,
    attempt_seed,
    build_messages,
    judge_view,
    judgement_schema,
    parse_judgement,
)
from mastif.execution.experiment import parse_config
from mastif.execution.judging import judge_runs
from mastif.providers import Endpoint, Gateway, open_endpoint
from mastif.providers.gateway import normalise_request
from tests.support.fakes import ScriptedChatServer
from tests.support.paths import REPO

RUBRIC = REPO / "config" / "rubric.md"
SETTINGS = JudgeSettings("judge", 0.0, 256, 3, 1)


def valid_reply(tu=1.0, ta=0.7, tcr=0.5) -> str:
    return json.dumps(
        {
            "TU_rationale": "Understood the booking goal.",
            "TU_score": tu,
            "TA_rationale": "Stayed mostly on task.",
            "TA_score": ta,
            "TCR_rationale": "Found the flight, no price.",
            "TCR_score": tcr,
        }
    )


def test_parse_valid_reply():
    j = parse_judgement(valid_reply())
    assert j.scores == {"TU": 1.0, "TA": 0.7, "TCR": 0.5}
    assert j.rationales["TA"] == "Stayed mostly on task."


@pytest.mark.parametrize(
    "reply, message",
    [
        ("not json at all", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (
            valid_reply(tu=2),
            "TU_score 2 is not one of",
        ),  # seen from Gemma-3-270M with a free number
        (valid_reply(tcr=0.6), "TCR_score 0.6 is not one of"),
        (valid_reply(ta="0.7"), "TA_score missing or not a number"),
        (json.dumps({"TU_score": 1.0}), "TU_rationale missing"),
    ],
)
def test_parse_rejects_invalid_replies(reply, message):
    with pytest.raises(JudgeParseError, match=message):
        parse_judgement(reply)


def test_schema_scores_are_enums_of_the_anchors():
    schema = judgement_schema()
    for c in ("TU", "TA", "TCR"):
        assert schema["properties"][f"{c}_score"]["enum"] == list(SCORE_ANCHORS)
    assert schema["additionalProperties"] is False


def test_every_reply_the_schema_allows_fits_max_tokens():
    """Gemma-3-270M looping on digits (a token per character) filled two 200-character
    rationales and ran out of its 512 tokens inside the third: the schema now keeps the
    longest allowed reply within max_tokens at one token per character."""
    import json as _json

    for max_tokens in (256, 512, 1024):
        schema = judgement_schema(max_tokens)
        longest = {
            k: ("9" * v["maxLength"] if v["type"] == "string" else 0.7)
            for k, v in schema["properties"].items()
        }
        reply = _json.dumps(longest, indent=4)
        rationale_chars = sum(
            v["maxLength"] for v in schema["properties"].values() if "maxLength" in v
        )
        scaffold = len(reply) - rationale_chars
        # one token per rationale character, and the scaffold (keys, quotes, scores) at
        # worst ~3 characters per token
        assert rationale_chars + scaffold / 3 <= max_tokens
    assert judgement_schema()["properties"]["TU_rationale"]["maxLength"] == 200
    assert judgement_schema(512)["properties"]["TU_rationale"]["maxLength"] == 138


def test_gateway_keeps_openai_json_schema_and_required_for_llama_cpp():
    """llama.cpp's server takes OpenAI's json_schema spelling and tool_choice "required" as
    they are: the gateway passes both through, for a local model as for a remote one."""
    fmt = {"type": "json_schema", "json_schema": {"name": "j", "schema": {"type": "object"}}}
    body = {"messages": [], "response_format": fmt, "tool_choice": "required"}
    for provider in ("local", "openai_compatible"):
        served = normalise_request(json.loads(json.dumps(body)), provider)
        assert served["response_format"] == fmt and served["tool_choice"] == "required"


def test_response_cache_keys_differ_by_local_server():
    """Answers depend on the server's build and on the forced choice's template: each has
    keys of its own (a cached answer of one build is never replayed for the other)."""
    from mastif.providers.endpoint import Endpoint

    prebuilt = Endpoint("local", "http://x/v1", "m", server="xllamacpp")
    native = Endpoint("local", "http://x/v1", "m", server="llama-server")
    assert prebuilt.cache_provider == "local/xllamacpp"
    assert native.cache_provider == "local/llama-server"
    assert Endpoint("openai_compatible", "http://x/v1", "m").cache_provider == "openai_compatible"
    template = str(REPO / "config/chat_templates/chatml-forced-choice.jinja")
    forced = Endpoint("local", "http://x/v1", "m", server="xllamacpp", tool_call_template=template)
    assert forced.cache_provider.startswith("local/xllamacpp/forced-choice:")


@pytest.fixture
def one_run() -> tuple[pl.DataFrame, pl.DataFrame]:
    tasks = pl.DataFrame(
        [
            {
                "task_id": "t1",
                "confirmed_task": "Find a one-way flight from Denver to Boston on June 12.",
                "website": "skyfare",
                "domain": "Travel",
                "subdomain": "Airlines",
                "level": "easy",
                "n_steps": 2,
                "reference_steps": ["[textbox] From -> TYPE: Denver", "[button] Search -> CLICK"],
            }
        ]
    )
    runs = pl.DataFrame(
        [
            {
                "run_id": "r1",
                "model": "m",
                "protocol": "standard",
                "framework": "langgraph",
                "task_id": "t1",
                "status": "ok",
                "error_class": None,
                "error_message": None,
                "final_answer": "I searched skyfare for Denver to Boston on June 12 and found flight SF 12 at $120.",
                "node_outputs": [
                    {"node": "navigate", "step": 1, "output_key": "plan", "text": "Open the flight search."},
                    {"node": "report", "step": 1, "output_key": "final_answer",
                     "text": "I searched skyfare for Denver to Boston on June 12 and found flight SF 12 at $120."},
                ],
                "tool_calls": [
                    {"node": "interact", "step": 1, "name": "datetime", "arguments": "{}", "ok": True,
                     "output": "2026-12-01", "error": None, "duration_s": 0.01},
                ],
            }
        ]
    )  # fmt: skip
    return runs, tasks


def test_prompt_shows_task_steps_tools_and_answer(one_run):
    runs, tasks = one_run
    system, user = build_messages(runs.row(0, named=True), tasks.row(0, named=True), "RUBRIC")
    assert system == {"role": "system", "content": "RUBRIC"}
    text = user["content"]
    for expected in ("skyfare", "Denver to Boston", "[button] Search -> CLICK", "[navigate 1]",
                     "datetime({}) ok -> 2026-12-01", "Final answer: I searched"):  # fmt: skip
        assert expected in text


def judge_with(respond, runs, tasks):
    with ScriptedChatServer(respond) as srv:
        endpoint = Endpoint("openai_compatible", srv.base_url, "judge-model")
        with Gateway(endpoint, retries=0) as gw:
            judged = judge_runs(runs, tasks, RUBRIC, gw, SETTINGS)
    return judged, srv.requests


def test_invalid_json_is_retried_then_judge_failed(one_run):
    runs, tasks = one_run
    judged, requests = judge_with(lambda p: {"content": "Sure! The scores are great."}, runs, tasks)
    row = judged.row(0, named=True)
    assert row["judge_status"] == "judge_failed"
    assert row["TU"] is None and row["TA"] is None and row["TCR"] is None  # never a default score
    assert row["judge_raw_reply"] == "Sure! The scores are great."
    assert row["judge_attempts"] == 3 and len(requests) == 3
    assert "unparseable reply" in row["judge_error"]
    assert row["judge_prompt_tokens"] == 3 * 11  # usage summed over attempts
    # every attempt at the configured temperature; a retry with a new seed, derived from
    # the run and the attempt (the values pin attempt_seed's derivation: sha256 of
    # "1|r1|2" and "1|r1|3", first 4 bytes, 31 bits)
    assert [r["temperature"] for r in requests] == [0.0, 0.0, 0.0]
    assert [r["seed"] for r in requests] == [1, 912825194, 606895206]
    assert (row["judge_seed"], row["judge_temperature"]) == (606895206, 0.0)
    assert requests[0]["response_format"]["type"] == "json_schema"


def test_attempt_seeds_are_the_configured_one_then_new_per_run_and_attempt():
    assert attempt_seed(1, "r1", 1) == 1 and attempt_seed(7, "r2", 1) == 7
    assert attempt_seed(1, "r1", 2) == 912825194  # the same on every rerun
    assert attempt_seed(1, "r2", 2) == 210557592  # another run, another seed
    assert attempt_seed(2, "r1", 2) != attempt_seed(1, "r1", 2)
    seeds = {attempt_seed(1, f"r{i}", k) for i in range(50) for k in (2, 3, 4)}
    assert len(seeds) == 150 and all(0 <= s < 2**31 for s in seeds)


def test_clip_lengths_cut_and_count(one_run):
    runs, tasks = one_run
    run = runs.row(0, named=True)
    # node outputs are 23 and 82 characters, the tool call's arguments 2 and output 10,
    # the final answer 82
    clip = JudgeClip(node_chars=23, tool_chars=5, answer_chars=81)
    (_, user), n = judge_view(run, tasks.row(0, named=True), "R", clip=clip)
    text = user["content"]
    assert n == 3  # the report node's output (82 > 23), the tool output (10 > 5), the answer
    assert "[navigate 1] Open the flight search.\n" in text  # 23 characters: whole
    assert "[report 1] I searched skyfare for  ...[cut]" in text  # its first 23
    assert "datetime({}) ok -> 2026- ...[cut]" in text
    assert "Final answer: " + run["final_answer"][:81] + " ...[cut]" in text
    # the defaults cut nothing here
    assert judge_view(run, tasks.row(0, named=True), "R")[1] == 0
    # an error message is a tool-length text
    failed = {**run, "status": "error", "error_class": "ToolError", "error_message": "x" * 6}
    assert judge_view(failed, tasks.row(0, named=True), "R", clip=clip)[1] == 4


def test_clip_settings_are_recorded_per_judgement(one_run):
    runs, tasks = one_run
    settings = JudgeSettings("judge", 0.2, 256, 2, 5, clip=JudgeClip(23, 5, 1000))
    with ScriptedChatServer(lambda p: {"content": valid_reply()}) as srv:
        endpoint = Endpoint("openai_compatible", srv.base_url, "judge-model")
        with Gateway(endpoint, retries=0) as gw:
            judged = judge_runs(runs, tasks, RUBRIC, gw, settings)
    row = judged.row(0, named=True)
    assert (row["judge_node_chars"], row["judge_tool_chars"], row["judge_answer_chars"]) == (
        23, 5, 1000,
    )  # fmt: skip
    assert row["judge_n_clipped"] == 2  # the report node's output and the tool output
    assert (row["judge_attempts"], row["judge_seed"], row["judge_temperature"]) == (1, 5, 0.2)
    assert srv.requests[0]["temperature"] == 0.2 and srv.requests[0]["seed"] == 5


def test_a_retry_can_succeed(one_run):
    runs, tasks = one_run
    replies = iter([{"content": '{"TU_score": 2'}, {"content": valid_reply(0.7, 0.7, 0.3)}])
    judged, requests = judge_with(lambda p: next(replies), runs, tasks)
    row = judged.row(0, named=True)
    assert row["judge_status"] == "ok" and row["judge_attempts"] == 2 and row["judge_error"] is None
    # the recorded settings are those of the attempt whose reply counts
    assert row["judge_seed"] == 912825194 and row["judge_temperature"] == 0.0
    assert row["judge_n_clipped"] == 0 and row["judge_node_chars"] == JudgeClip().node_chars
    assert (row["TU"], row["TA"], row["TCR"]) == (0.7, 0.7, 0.3)
    assert row["rubric_sha256"] == hashlib.sha256(RUBRIC.read_bytes()).hexdigest()
    assert judged.schema == pl.Schema(JUDGED_SCHEMA)


def test_provider_errors_end_as_judge_failed(one_run):
    runs, tasks = one_run
    judged, _ = judge_with(lambda p: {"status": 500}, runs, tasks)
    row = judged.row(0, named=True)
    assert row["judge_status"] == "judge_failed" and "InternalServerError" in row["judge_error"]


@pytest.mark.slow  # starts the real Gemma-3-270M server
def test_real_gemma_judge(one_run, base_config, tmp_path):
    runs, tasks = one_run
    cfg = parse_config(base_config)
    with open_endpoint("gemma3", cfg.models["gemma3"], tmp_path / "server.log") as ep:
        with Gateway(ep) as gw:
            # retries run at the configured temperature with a new seed: at 0 (greedy) a
            # retry would repeat an unparseable reply, so sample, as a user who wants
            # retries to help would configure it
            settings = JudgeSettings("gemma3", 0.7, 384, 3, 1)
            judged = judge_runs(runs, tasks, RUBRIC, gw, settings)
    row = judged.row(0, named=True)
    assert row["judge_status"] == "ok", row["judge_raw_reply"]
    assert {row["TU"], row["TA"], row["TCR"]} <= set(SCORE_ANCHORS)
    assert row["judge_prompt_tokens"] > 0 and row["judge_completion_tokens"] > 0

"""The gateway's retry, backoff, adaptive limit and response cache, against faults injected
by tests/support/faultproxy.py in front of a scripted model server."""

from __future__ import annotations

import asyncio
import email.utils
import time

import httpx
import pytest

from mastif.core.trace import usage_totals
from mastif.providers import Endpoint, Gateway
from mastif.providers.cache import ResponseCache
from mastif.providers.upstream import AdaptiveLimit, parse_retry_after
from tests.support.fakes import ScriptedChatServer
from tests.support.faultproxy import FaultProxy

REQUEST = {"messages": [{"role": "user", "content": "hi"}], "temperature": 0.7, "seed": 1}


def endpoint(base_url: str, connections: int = 4) -> Endpoint:
    return Endpoint("openai_compatible", base_url, "fake-model", max_connections=connections)


def post(gw: Gateway, run_id: str = "r1", payload: dict | None = None) -> httpx.Response:
    url = gw.base_url_for(run_id, "node") + "/chat/completions"
    return httpx.post(url, json=payload or REQUEST, headers=gw.auth_headers, timeout=60)


def test_retry_after_is_read_as_seconds_or_an_http_date():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.5 ") == 0.5
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    assert 18 <= parse_retry_after(when) <= 21  # type: ignore[operator]
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_adaptive_limit_halves_on_429_pauses_and_recovers():
    async def scenario() -> None:
        limit = AdaptiveLimit(8)
        await limit.acquire()
        await limit.release("throttled", retry_after_s=0.3)
        assert (limit.limit, limit.throttles, limit.lowest) == (4, 1, 4)
        t0 = time.perf_counter()
        await limit.acquire()  # waits out the Retry-After
        assert time.perf_counter() - t0 >= 0.25
        await limit.release("ok")
        for _ in range(3):
            await limit.acquire()
            await limit.release("ok")
        assert limit.limit == 5  # 4 successes in a row at limit 4: one more
        await limit.acquire()
        await limit.release("error")  # errors neither lower nor raise it
        assert limit.limit == 5

    asyncio.run(scenario())


def test_adaptive_limit_bounds_requests_in_flight():
    async def scenario() -> int:
        limit = AdaptiveLimit(3)
        peak = 0

        async def one() -> None:
            nonlocal peak
            await limit.acquire()
            peak = max(peak, limit.active)
            await asyncio.sleep(0.02)
            await limit.release("ok")

        await asyncio.gather(*(one() for _ in range(20)))
        return peak

    assert asyncio.run(scenario()) == 3


@pytest.mark.parametrize("fault", ["429", "500", "drop", "hang", "slow"])
def test_each_fault_is_retried_to_a_good_answer(fault):
    with ScriptedChatServer(lambda p: {"content": "fine"}) as srv:
        # a seeded schedule whose first request gets the fault, the next one not
        with FaultProxy(
            srv.base_url, fault_rate=1.0, faults=[fault], hang_s=5, slow_s=0.3
        ) as proxy:
            proxy.fault_rate = 1.0
            gw_ = Gateway(endpoint(proxy.base_url), retries=2, request_timeout_s=1.0)
            with gw_ as gw:
                gw.begin_run("r1")
                proxy_rng = proxy.rng
                proxy_rng.random = iter([0.0, 1.0, 1.0]).__next__  # type: ignore[method-assign]
                t0 = time.perf_counter()
                r = post(gw)
                took = time.perf_counter() - t0
                (call,) = gw.end_run("r1")
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "fine"
    assert proxy.counts[fault] == 1
    if fault == "slow":
        assert call.attempts == 1  # slower than usual, within the request timeout
    else:
        assert call.attempts == 2 and call.error is None
    if fault == "429":
        assert took >= 1.0  # the proxy's Retry-After: 1
        assert gw.limit is not None and gw.limit.throttles == 1
    assert call.completion_tokens == 7 and call.http_status == 200


@pytest.mark.slow
def test_persistent_faults_end_as_a_recorded_failure_not_a_hang():
    with ScriptedChatServer(lambda p: {"content": "never"}) as srv:
        with FaultProxy(srv.base_url, fault_rate=1.0, faults=["500"]) as proxy:
            with Gateway(endpoint(proxy.base_url), retries=2) as gw:
                gw.begin_run("r1")
                r = post(gw)
                (call,) = gw.end_run("r1")
    assert r.status_code == 500
    assert call.attempts == 3 and call.error and call.error.startswith("upstream 500")
    assert proxy.forwarded == 0


def test_rate_limits_are_waited_out_beyond_the_error_retries():
    # 429s do not use up the error retries: three in a row still end in an answer
    with ScriptedChatServer(lambda p: {"content": "fine"}) as srv:
        with FaultProxy(srv.base_url, faults=["429"], retry_after_s=0.1) as proxy:
            proxy.rng.random = iter([0.0, 0.0, 0.0, 1.0]).__next__  # type: ignore[method-assign]
            with Gateway(endpoint(proxy.base_url), retries=1) as gw:
                gw.begin_run("r1")
                r = post(gw)
                (call,) = gw.end_run("r1")
    assert r.status_code == 200 and call.attempts == 4
    assert gw.limit is not None and gw.limit.throttles == 3 and gw.limit.lowest == 1


def test_cache_replays_the_same_request_and_keeps_the_sandbox_origin_out(tmp_path):
    answers = iter(["see http://127.0.0.1:1111/shop/p/3", "second answer"])
    with ScriptedChatServer(lambda p: {"content": next(answers)}) as srv:
        cache = ResponseCache(tmp_path / "cache")
        with Gateway(endpoint(srv.base_url), cache=cache) as gw:
            gw.volatile["127.0.0.1:1111"] = "sandbox.mastif.invalid"
            gw.begin_run("r1")
            ask = {**REQUEST, "messages": [{"role": "user", "content": "open 127.0.0.1:1111"}]}
            first = post(gw, "r1", ask).json()
            assert gw.upstream_requests == 1
        # a later job: the sandbox listens on another port
        with Gateway(endpoint(srv.base_url), cache=cache) as gw:
            gw.volatile["127.0.0.1:2222"] = "sandbox.mastif.invalid"
            gw.begin_run("r2")
            ask2 = {**REQUEST, "messages": [{"role": "user", "content": "open 127.0.0.1:2222"}]}
            again = post(gw, "r2", ask2).json()
            other = post(gw, "r2", {**ask2, "temperature": 0.1}).json()
            calls = gw.end_run("r2")
            assert gw.upstream_requests == 1  # only the changed request reached the model
    assert first["choices"][0]["message"]["content"] == "see http://127.0.0.1:1111/shop/p/3"
    assert again["choices"][0]["message"]["content"] == "see http://127.0.0.1:2222/shop/p/3"
    assert other["choices"][0]["message"]["content"] == "second answer"
    assert [c.cached for c in calls] == [True, False]
    assert calls[0].completion_tokens == 7  # the usage the model reported when it answered
    assert (cache.hits, cache.misses) == (1, 2)
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2


def test_the_model_sees_a_stand_in_for_the_sandbox_origin_and_the_framework_gets_it_back():
    # the same run in two jobs (two sandbox ports): the model must receive the same bytes,
    # or a seeded model takes another path and CT alone vs in a pipeline compares two runs
    seen: list[str] = []

    def reply(payload: dict) -> dict:
        seen.append(payload["messages"][0]["content"])
        return {"content": "open http://sandbox.mastif.invalid/shop/p/3"}

    answers = []
    with ScriptedChatServer(reply) as srv:
        for port in (41111, 52222):
            with Gateway(endpoint(srv.base_url)) as gw:
                gw.volatile[f"127.0.0.1:{port}"] = "sandbox.mastif.invalid"
                gw.begin_run("r1")
                text = f"page http://127.0.0.1:{port}/shop, not http://127.0.0.1:{port}9/x"
                ask = {**REQUEST, "messages": [{"role": "user", "content": text}]}
                answers.append(post(gw, "r1", ask).json()["choices"][0]["message"]["content"])
    assert seen == [
        "page http://sandbox.mastif.invalid/shop, not http://127.0.0.1:411119/x",
        "page http://sandbox.mastif.invalid/shop, not http://127.0.0.1:522229/x",
    ]
    assert answers == [
        "open http://127.0.0.1:41111/shop/p/3",
        "open http://127.0.0.1:52222/shop/p/3",
    ]


def test_a_response_without_usage_leaves_the_runs_tokens_unknown_not_zero():
    replies = iter(
        [
            {"content": "counted"},  # usage 11 + 7 (the fake's default)
            {"content": "no usage", "usage": None},  # the provider omitted usage
            {"content": "half", "usage": {"prompt_tokens": 5}},  # no completion_tokens
            {"content": "odd", "usage": {"prompt_tokens": "5", "completion_tokens": -1}},
            {"status": 500},  # a failed call delivered nothing: adds 0, not unknown
        ]
    )
    with ScriptedChatServer(lambda p: next(replies)) as srv:
        with Gateway(endpoint(srv.base_url), retries=0) as gw:
            gw.begin_run("r1")
            for _ in range(5):
                post(gw)
            calls = gw.end_run("r1")
    assert [(c.prompt_tokens, c.completion_tokens) for c in calls] == [
        (11, 7),
        (None, None),
        (5, None),
        (None, None),
        (None, None),
    ]
    assert calls[4].http_status == 500
    assert usage_totals(calls) == (None, None)
    assert usage_totals([calls[0], calls[2]]) == (16, None)  # prompt known, completion not
    assert usage_totals([calls[0], calls[4]]) == (11, 7)  # the failed call adds nothing
    assert usage_totals([]) == (0, 0)  # no call, no tokens

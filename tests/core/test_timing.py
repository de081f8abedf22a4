"""CT decomposed per run (issue 16 item 3): model + queue + tools + protocol + set-up + harness
= wall;
cached calls are no model time; generation.request_timeout_s bounds a call, timeout_s a run."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from mastif.core.timing import InFlight, decompose
from mastif.core.trace import LLMCall, ToolCall
from mastif.providers import Endpoint, Gateway
from mastif.providers.cache import ResponseCache
from tests.support.fakes import ScriptedChatServer, last_user_text
from tests.support.faultproxy import FaultProxy
from tests.support.stackrun import run_stack

REQUEST = {"messages": [{"role": "user", "content": "hi"}], "temperature": 0.7, "seed": 1}


def llm(started, upstream, queue=0.0, backoff=0.0, cached=False, overhead=0.01) -> LLMCall:
    latency = upstream + queue + backoff + overhead
    return LLMCall("n", started, latency, 1, 1, 200, None, 1, cached, upstream, queue, backoff)


def tool(started, duration) -> ToolCall:
    return ToolCall("n", 1, "t", "{}", True, "", None, duration, started)


def parts(split) -> tuple[float | None, ...]:
    return tuple(
        None if x is None else round(x, 9)
        for x in (
            split.model_s,
            split.queue_s,
            split.tools_s,
            split.protocol_s,
            split.setup_s,
            split.harness_s,
        )  # fmt: skip
    )


def test_parts_sum_to_wall_each_second_counted_once():
    calls = [
        llm(0.5, upstream=2.0, queue=0.5),  # queue 0.5-1.0, model 1.0-3.0
        llm(4.0, upstream=0.0, cached=True),  # from the cache: no model time
        llm(5.0, upstream=1.5, backoff=1.0),  # back-off 5.0-6.0, model 6.0-7.5
    ]
    tools = [
        tool(3.0, 1.0),  # 3.0-4.0
        tool(3.5, 1.0),  # 3.5-4.5, concurrent with the first: 1.5 s of tools, not 2
        tool(6.0, 1.0),  # inside the model call 6.0-7.5: already model time
    ]
    split = decompose(10.0, calls, tools, protocol_s=0.7)
    # model 2.0 + 1.5, queue 0.5 + 1.0, tools 1.5, protocol 0.7, harness 10 - 7.2
    assert parts(split) == (3.5, 1.5, 1.5, 0.7, 0.0, 2.8)
    assert sum(parts(split)) == pytest.approx(10.0)
    assert split.n_cached_calls == 1
    assert split.columns()["wall_harness_s"] == pytest.approx(2.8)


def test_cached_calls_are_never_model_time():
    cached = [llm(0.0, upstream=0.0, cached=True, overhead=0.4)]
    split = decompose(1.0, cached, [], protocol_s=0.0)
    assert parts(split) == (0.0, 0.0, 0.0, 0.0, 0.0, 1.0)  # the lookup is the harness's
    assert split.n_cached_calls == 1


def test_protocol_gets_only_the_time_left_and_harness_is_never_negative():
    # protocol_seconds counts overlapping exchanges twice: it cannot exceed what is left
    split = decompose(2.0, [llm(0.0, upstream=1.5)], [], protocol_s=1.0)
    assert parts(split) == (1.5, 0.0, 0.0, 0.5, 0.0, 0.0)
    # unknown protocol time (None): the 0.5 s left cannot be split, protocol and harness null
    unknown = decompose(2.0, [llm(0.0, upstream=1.5)], [], None)
    assert parts(unknown) == (1.5, 0, 0, None, None, None)


def test_a_call_cut_short_by_the_run_end_counts_and_spans_are_clipped_to_wall():
    in_flight = [InFlight(started_s=1.0, upstream_s=5.0, queue_s=0.0, backoff_s=0.0)]
    split = decompose(3.0, [], [tool(2.5, 4.0)], 0.0, in_flight)
    # model 1.0-3.0 (then the run ended), the tool 2.5-3.0 is under the model call
    assert parts(split) == (2.0, 0.0, 0.0, 0.0, 0.0, 1.0)


def test_a_call_recorded_without_the_split_counts_whole_as_model_time():
    old = LLMCall("n", 0.0, 1.25, 1, 1, 200, None, 1)  # rows before the gateway split it
    assert parts(decompose(2.0, [old], [], 0.0)) == (1.25, 0, 0, 0, 0, 0.75)


def test_setup_spans_are_set_up_time_apart_from_harness():
    # building 0.0-1.0 (a model call 0.5-0.8 inside it stays model time), again 3.0-3.5
    setup = [(0.0, 1.0), (3.0, 3.5)]
    split = decompose(5.0, [llm(0.5, upstream=0.3)], [], protocol_s=0.2, setup_spans=setup)
    # model 0.3, protocol 0.2, set-up 0.7 + 0.5, harness 5 - 1.7
    assert parts(split) == (0.3, 0.0, 0.0, 0.2, 1.2, 3.3)
    assert sum(parts(split)) == pytest.approx(5.0)
    assert split.columns()["wall_setup_s"] == pytest.approx(1.2)
    # set-up takes only what is left after protocol: never more than wall
    crowded = decompose(1.0, [], [], protocol_s=0.8, setup_spans=[(0.0, 1.0)])
    assert parts(crowded) == (0.0, 0.0, 0.0, 0.8, 0.2, 0.0)


# -- the gateway's split of each call ---------------------------------------------------


def endpoint(base_url: str, connections: int = 1) -> Endpoint:
    return Endpoint("openai_compatible", base_url, "fake-model", max_connections=connections)


def post(gw: Gateway, run_id: str = "r1") -> httpx.Response:
    return httpx.post(gw.base_url_for(run_id, "node") + "/chat/completions", json=REQUEST,
                      headers=gw.auth_headers, timeout=60)  # fmt: skip


def test_gateway_splits_latency_into_upstream_and_queue():
    # one connection, two calls at once: the second waits for the first's 0.4 s
    with ScriptedChatServer(lambda p: {"content": "ok", "sleep": 0.4}) as srv:
        with Gateway(endpoint(srv.base_url, connections=1)) as gw:
            gw.begin_run("r1")
            threads = [threading.Thread(target=post, args=(gw,)) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            calls = gw.end_run("r1")
    assert len(calls) == 2
    for c in calls:
        assert 0.38 <= c.upstream_s <= 0.6 and c.backoff_s == 0.0 and not c.cached
        assert c.upstream_s + c.queue_s + c.backoff_s <= c.latency_s
        assert c.latency_s - (c.upstream_s + c.queue_s) < 0.05  # the gateway's own handling
    waited = sorted(c.queue_s for c in calls)
    assert waited[0] < 0.05 and 0.3 <= waited[1] <= 0.6


def test_gateway_counts_retry_backoff_apart_from_model_time():
    with ScriptedChatServer(lambda p: {"content": "fine"}) as srv:
        with FaultProxy(srv.base_url, faults=["500"]) as proxy:
            proxy.rng.random = iter([0.0, 1.0]).__next__  # type: ignore[method-assign]
            with Gateway(endpoint(proxy.base_url), retries=2) as gw:
                gw.begin_run("r1")
                assert post(gw).status_code == 200
                (call,) = gw.end_run("r1")
    assert call.attempts == 2
    # tenacity's first wait: 0.5 s x 2^0 plus up to 0.5 s of jitter
    assert 0.5 <= call.backoff_s <= 1.05
    assert call.upstream_s < 0.3 and call.latency_s >= call.backoff_s + call.upstream_s


def test_cached_answer_has_no_upstream_time(tmp_path):
    with ScriptedChatServer(lambda p: {"content": "once", "sleep": 0.2}) as srv:
        with Gateway(endpoint(srv.base_url), cache=ResponseCache(tmp_path)) as gw:
            gw.begin_run("r1")
            post(gw)
            post(gw)
            first, again = gw.end_run("r1")
    assert not first.cached and first.upstream_s >= 0.19
    assert again.cached and again.upstream_s == 0.0 and again.queue_s == 0.0
    split = decompose(again.started_s + again.latency_s, [first, again], [], 0.0)
    assert split.model_s == pytest.approx(first.upstream_s) and split.n_cached_calls == 1


def test_gateway_bounds_a_call_by_call_timeout_and_reports_it_in_flight():
    with ScriptedChatServer(lambda p: {"content": "late", "sleep": 2.0}) as srv:
        with Gateway(endpoint(srv.base_url), request_timeout_s=30, call_timeout_s=0.6) as gw:
            gw.begin_run("r1")
            seen: list = []
            probe = threading.Timer(0.3, lambda: seen.extend(gw.in_flight("r1")))
            probe.start()
            t0 = time.perf_counter()
            r = post(gw)
            took = time.perf_counter() - t0
            probe.join()
            (call,) = gw.end_run("r1")
    assert r.status_code == 504 and took < 1.5
    assert call.http_status == 504 and "request_timeout_s=0.6" in call.error
    assert 0.55 <= call.upstream_s <= 0.8  # the attempt it cut short is model time
    (flying,) = seen  # while it ran, the call was in flight with its upstream time so far
    assert 0.1 <= flying.upstream_s < call.upstream_s and flying.started_s >= 0


# -- a whole run through the runner --------------------------------------------------------


def scripted(payload):
    """One tool call in the interact node (python_repl, run in a child process), text
    elsewhere; each model answer takes 0.1 s."""
    reply = {"content": "noted", "sleep": 0.1}
    if "interaction round" in last_user_text(payload) and payload.get("tools"):
        if not any(m["role"] == "tool" for m in payload["messages"]):
            reply = {"tool_calls": [("python_repl", {"code": "print(1)"})], "sleep": 0.1}
    return reply


def test_a_run_is_decomposed_into_parts_that_sum_to_its_wall(tmp_path, fake_model_config):
    cfg = fake_model_config("http://unused", max_steps=1, request_timeout_s=20, timeout_s=60)
    with ScriptedChatServer(scripted) as srv:
        cfg["models"]["fake"]["base_url"] = srv.base_url
        (trace,) = run_stack(cfg, tmp_path, framework="langgraph")
    assert trace.status == "ok", trace.error_message
    total = (trace.wall_model_s + trace.wall_queue_s + trace.wall_tools_s
             + trace.wall_protocol_s + trace.wall_setup_s + trace.wall_harness_s)  # fmt: skip
    assert total == pytest.approx(trace.wall_seconds, abs=1e-9)
    n = len(trace.llm_calls)
    assert n >= 3 and trace.n_cached_calls == 0
    # every answer took 0.1 s upstream: the model's part is those, not the calls' whole latency
    assert 0.1 * n <= trace.wall_model_s <= sum(c.latency_s for c in trace.llm_calls)
    assert trace.wall_model_s == pytest.approx(sum(c.upstream_s for c in trace.llm_calls))
    (call,) = trace.tool_calls
    assert call.ok and call.duration_s > 0 and 0 <= call.started_s <= trace.wall_seconds
    assert trace.wall_tools_s == pytest.approx(call.duration_s, abs=1e-6)
    assert trace.wall_protocol_s == 0.0  # standard: no protocol servers
    assert trace.wall_harness_s > 0
    assert trace.wall_setup_s > 0  # the graph, its model clients and tools were built
    assert (trace.request_timeout_s, trace.timeout_s) == (20, 60)


def test_request_timeout_fails_a_call_not_the_run_budget(tmp_path, fake_model_config):
    cfg = fake_model_config("http://unused", request_timeout_s=0.5, timeout_s=30)
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 3}) as srv:
        cfg["models"]["fake"]["base_url"] = srv.base_url
        t0 = time.perf_counter()
        (trace,) = run_stack(cfg, tmp_path, framework="langgraph")
        took = time.perf_counter() - t0
    # the gateway's 504 reached the framework: a provider error, well before timeout_s
    assert trace.status == "error" and trace.error_class == "provider_error"
    (call,) = trace.llm_calls
    assert call.http_status == 504 and "request_timeout_s=0.5" in call.error
    assert trace.wall_seconds < 2.5 and took < 20
    assert trace.wall_model_s == pytest.approx(call.upstream_s)


@pytest.mark.slow
def test_timeout_s_is_the_run_budget_and_its_last_call_still_counts(tmp_path, fake_model_config):
    # 2 s: the run's first model call starts after the framework's set-up, which in the
    # stack's fresh worker process (its framework's environment) took up to 0.25 s in CI
    cfg = fake_model_config("http://unused", request_timeout_s=30, timeout_s=2)
    with ScriptedChatServer(lambda p: {"content": "slow", "sleep": 5}) as srv:
        cfg["models"]["fake"]["base_url"] = srv.base_url
        (trace,) = run_stack(cfg, tmp_path, framework="langgraph")
    assert trace.status == "timeout" and trace.llm_calls == []  # the call never finished
    assert 1.9 < trace.wall_seconds < 3.5
    assert trace.wall_model_s >= 1.5  # yet its time in the model is the run's

"""The wire meter shared by the MCP server and the A2A agents."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route

from mastif.protocols.wire import (
    LoopbackKey,
    WireMeter,
    WireStats,
    count_jsonrpc,
    metered_client,
    scope_run,
    serve_asgi,
)


def test_count_jsonrpc_in_json_batches_and_event_streams():
    assert count_jsonrpc(b'{"jsonrpc": "2.0", "id": 1, "method": "x"}', "application/json") == 1
    batch = b'[{"jsonrpc": "2.0", "id": 1}, {"jsonrpc": "2.0", "id": 2}, {"other": 1}]'
    assert count_jsonrpc(batch, "application/json") == 2
    sse = (
        b'event: message\r\ndata: {"jsonrpc": "2.0", "id": 1, "result": {}}\r\n\r\n'
        b": keep-alive\n\n"
        b'data: {"jsonrpc": "2.0", "method": "notifications/x"}\n\n'
    )
    assert count_jsonrpc(sse, "text/event-stream") == 2
    assert count_jsonrpc(b"", "application/json") == 0
    assert count_jsonrpc(b"not json", "application/json") == 0
    assert count_jsonrpc(b'{"no": "rpc"}', "application/json") == 0


def test_meter_attributes_strips_prefix_and_counts():
    async def rpc(request):
        body = await request.json()
        await asyncio.sleep(0.02)
        meter.add_inner(scope_run(request.scope)[0], 0.01)
        return JSONResponse(
            {"jsonrpc": "2.0", "id": body["id"], "result": scope_run(request.scope)}
        )

    async def plain(request):
        with pytest.raises(LookupError):
            scope_run(request.scope)
        return PlainTextResponse("unattributed")

    app = Starlette(routes=[Route("/rpc", rpc, methods=["POST"]), Route("/health", plain)])
    meter = WireMeter(app)

    async def main():
        key = LoopbackKey()
        async with serve_asgi(meter, "test", key) as url:
            async with metered_client(meter, key) as client:
                one = {"jsonrpc": "2.0", "id": 1, "method": "m"}
                a = await client.post(f"{url}/r/run-a/node-1/rpc", json=one)
                b = await client.post(f"{url}/r/run-b/node-2/rpc", json=one)
                c = await client.get(f"{url}/health")
        return url, a.json()["result"], b.json()["result"], c.text

    url, a, b, c = asyncio.run(main())
    assert (a, b, c) == (["run-a", "node-1"], ["run-b", "node-2"], "unattributed")
    stats = meter.pop("run-a")
    assert (stats.requests, stats.messages) == (1, 2)
    assert stats.bytes_in > 0 and stats.bytes_out > 0
    # the client timed its one exchange, which holds the handler's 20 ms
    assert (
        stats.exchanges == 1 and stats.exchange_s >= 0.02 and stats.inner_s == pytest.approx(0.01)
    )
    assert stats.protocol_s == pytest.approx(stats.exchange_s - 0.01)
    assert set(meter.stats) == {"run-b"}  # unattributed traffic counts for no run
    assert meter.pop("run-b").exchanges == 1
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health")


def test_protocol_seconds_are_exchanges_minus_work_and_unknown_when_negative():
    # hand-computed: 0.5 s waited over 3 exchanges, 0.375 s of it the peer's work
    assert WireStats(exchanges=3, exchange_s=0.5, inner_s=0.375).protocol_s == 0.125
    assert WireStats().protocol_s == 0.0  # no traffic: no cost (protocol standard)
    # the peer worked longer than any client waited: an exchange went untimed -> unknown
    assert WireStats(exchanges=1, exchange_s=0.25, inner_s=0.5).protocol_s is None
    assert WireStats(exchanges=0, exchange_s=0.0, inner_s=0.001).protocol_s is None


def test_an_event_stream_opened_by_get_is_not_an_exchange():
    async def stream(request):
        async def events():
            yield b"data: {}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    meter = WireMeter(Starlette(routes=[Route("/s", stream)]))

    async def main():
        key = LoopbackKey()
        async with serve_asgi(meter, "test", key) as url, metered_client(meter, key) as client:
            await client.get(f"{url}/r/run-a/n/s")  # the notification channel: not waited on
            await client.post(f"{url}/r/run-a/n/s")  # 405, still an exchange the client waited on

    asyncio.run(main())
    stats = meter.pop("run-a")
    assert (stats.requests, stats.exchanges) == (2, 1)

"""Responses WebSocket mode: each turn's phases against the fake server's own log (±3 ms), sync and
async; TPOT with a caller slower than the server; the span's parent and link."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from tests.support.retry import retry_timing, retry_timing_async
from tests.support.span_checks import (
    MS,
    Captured,
    assert_close_ns,
    assert_same_instant,
    assert_tiles,
    attrs,
    end_mono,
    start_mono,
)
from tests.websocket.support import create, drain, drain_async, record_of, require_responses_ws, script

require_responses_ws()

TURN = script(delay_ms=120, ttft_ms=60, chunks=6, chunk_delay_ms=15)
REASONING = script(
    delay_ms=80, ttft_ms=40, reasoning_tokens=4, reasoning_delay_ms=20, chunks=5, chunk_delay_ms=10
)


def _check_shape(captured: Captured, op: ReadableSpan, server: Any, reasoning: bool) -> None:
    """What does not depend on the scheduler: the phases, their tiling, the attributes."""
    record = record_of(server, op)
    phases = captured.phases(op)
    expected = ["openai.request_build", "openai.network_wait", "openai.first_token"]
    expected += ["openai.reasoning", "openai.stream_drain"] if reasoning else ["openai.stream_drain"]
    assert [p.name for p in phases] == expected
    assert_tiles(op, phases)
    assert record.first_token_ns is not None and record.first_content_ns is not None
    a = attrs(op)
    assert a["openai_latency.transport"] == "websocket"
    assert a["openai_latency.stream.end_state"] == "completed"
    assert a["gen_ai.usage.output_tokens"] == len(record.token_event_ns)
    assert a["gen_ai.response.finish_reasons"] == ("completed",)
    assert a["openai_latency.websocket.handover_delay.max"] >= 0


def _check_timing(captured: Captured, op: ReadableSpan, server: Any, reasoning: bool) -> None:
    """Each phase boundary, TTFT and TPOT against the server's log (±3 ms, TPOT ±1 ms)."""
    record = record_of(server, op)
    assert record.first_token_ns is not None and record.first_content_ns is not None
    by_name = {p.name: p for p in captured.phases(op)}
    # request_build ends when send() returned: the frame written, the server reading it meanwhile
    assert_same_instant(end_mono(by_name["openai.request_build"]), record.received_ns, "frame written")
    created = record.event_ns("event:response.created")[0]
    assert_same_instant(end_mono(by_name["openai.network_wait"]), created, "response.created")
    assert_same_instant(end_mono(by_name["openai.first_token"]), record.first_token_ns, "first token")
    if reasoning:
        assert_same_instant(end_mono(by_name["openai.reasoning"]), record.first_content_ns, "first answer")
    completed = record.event_ns("event:response.completed")[0]
    assert_same_instant(end_mono(op), completed, "response.completed")
    a = attrs(op)
    assert_close_ns(
        round(a["openai_latency.time_to_first_token"] * 1e9), record.first_token_ns - start_mono(op), "ttft"
    )
    answer = record.content_event_ns
    tpot = (answer[-1] - answer[0]) / (len(answer) - 1)
    if not reasoning:
        assert_close_ns(round(a["openai_latency.time_per_output_token"] * 1e9), round(tpot), "tpot", abs_ms=1)


def _shaped(captured: Captured, server: Any) -> tuple[ReadableSpan, ReadableSpan]:
    """The two turns just run (an answer, then one with reasoning), their shapes checked."""
    first, second = captured.operations()[-2:]
    _check_shape(captured, first, server, reasoning=False)
    _check_shape(captured, second, server, reasoning=True)
    assert attrs(second)["openai_latency.reasoning.visibility"] == "streamed"
    return first, second


def _timed(captured: Captured, server: Any) -> Callable[[tuple[ReadableSpan, ReadableSpan]], None]:
    def timing(turns: tuple[ReadableSpan, ReadableSpan]) -> None:
        _check_timing(captured, turns[0], server, reasoning=False)
        _check_timing(captured, turns[1], server, reasoning=True)

    return timing


def test_sync_turn_phases_match_the_server_log(
    instrument: Callable[..., Captured], timing_server: Any
) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test")
    with client.responses.connect() as connection:
        connection.send(create(metadata=script(chunks=2, reasoning_tokens=1)))  # warm-up: lazy model builds
        drain(connection)

        def run() -> tuple[ReadableSpan, ReadableSpan]:
            captured.clear()
            connection.send(create(metadata=TURN))
            drain(connection)
            connection.send(create(metadata=REASONING))
            drain(connection)
            return _shaped(captured, timing_server)

        retry_timing(run, _timed(captured, timing_server))


def test_async_turn_phases_match_the_server_log(
    instrument: Callable[..., Captured], timing_server: Any
) -> None:
    captured = instrument()

    async def main() -> None:
        client = openai.AsyncOpenAI(base_url=timing_server.base_url, api_key="sk-test")
        async with client.responses.connect() as connection:
            await connection.send(create(metadata=script(chunks=2, reasoning_tokens=1)))
            await drain_async(connection)

            async def run() -> tuple[ReadableSpan, ReadableSpan]:
                captured.clear()
                await connection.send(create(metadata=TURN))
                await drain_async(connection)
                await connection.send(create(metadata=REASONING))
                await drain_async(connection)
                return _shaped(captured, timing_server)

            await retry_timing_async(run, _timed(captured, timing_server))

    asyncio.run(main())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_slow_caller_reads_the_servers_pace(
    instrument: Callable[..., Captured], timing_server: Any, mode: str
) -> None:
    """30 ms of the caller's work per event against a server pacing 10 ms: TPOT reads 10 ms, since
    arrivals are stamped in the websockets reader; the caller's lag shows as the hand-over delay."""
    captured = instrument()
    slow = script(ttft_ms=20, chunks=6, chunk_delay_ms=10)

    def sync_run() -> None:
        client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test")
        with client.responses.connect() as connection:
            connection.send(create(metadata=script(chunks=2)))
            drain(connection)
            captured.clear()
            connection.send(create(metadata=slow))
            for event in connection:
                time.sleep(0.03)
                if event.type == "response.completed":
                    break

    async def async_run() -> None:
        client = openai.AsyncOpenAI(base_url=timing_server.base_url, api_key="sk-test")
        async with client.responses.connect() as connection:
            await connection.send(create(metadata=script(chunks=2)))
            await drain_async(connection)
            captured.clear()
            await connection.send(create(metadata=slow))
            async for event in connection:
                await asyncio.sleep(0.03)
                if event.type == "response.completed":
                    break

    def run() -> ReadableSpan:
        if mode == "sync":
            sync_run()
        else:
            asyncio.run(async_run())
        op = captured.operation()
        assert attrs(op)["openai_latency.stream.end_state"] == "completed"
        assert attrs(op)["openai_latency.websocket.handover_delay.max"] > 0.1  # 13 events x 30 ms: far behind
        return op

    def timing(op: ReadableSpan) -> None:
        record = record_of(timing_server, op)
        answer = record.content_event_ns
        server_pace = (answer[-1] - answer[0]) / (len(answer) - 1)
        tpot = round(attrs(op)["openai_latency.time_per_output_token"] * 1e9)
        assert_close_ns(tpot, round(server_pace), "tpot", abs_ms=1)
        assert 9 * MS <= server_pace <= 14 * MS
        assert_same_instant(
            end_mono(op), record.event_ns("event:response.completed")[0], "response.completed"
        )

    retry_timing(run, timing)


def test_parent_is_the_span_current_at_send_and_the_link_is_the_handshake(
    instrument: Callable[..., Captured], server: Any, tracer_provider: TracerProvider
) -> None:
    captured = instrument()
    tracer = tracer_provider.get_tracer("test")
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-secret-key")
    with client.responses.connect() as connection:
        with tracer.start_as_current_span("agent step 1") as first_parent:
            connection.send(create(metadata=script(chunks=2)))
        drain(connection)
        with tracer.start_as_current_span("agent step 2") as second_parent:
            connection.send(create(metadata=script(chunks=2)))
        drain(connection)
    [handshake] = [s for s in captured.spans() if s.name == "openai.websocket.connect"]
    assert attrs(handshake)["http.response.status_code"] == 101
    assert attrs(handshake)["server.address"] == "127.0.0.1"
    assert attrs(handshake)["openai_latency.websocket.reconnect_attempt"] == 0
    assert "sk-secret-key" not in repr(captured.spans()[0].to_json()) + "".join(
        s.to_json() for s in captured.spans()
    )
    turns = [s for s in captured.operations() if s.name.startswith("chat ")]
    assert len(turns) == 2
    for turn, parent in zip(turns, (first_parent, second_parent), strict=True):
        assert turn.parent is not None and turn.parent.span_id == parent.get_span_context().span_id
        assert [link.context.span_id for link in turn.links] == [handshake.context.span_id]
        assert turn.name == "chat gpt-4o-mini" and turn.kind == trace.SpanKind.CLIENT

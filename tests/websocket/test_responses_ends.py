"""Responses WebSocket mode: how a turn ends (completed, error, closed_early, abandoned, cancelled
reads), every fault of the fake server sync and async, malformed frames, interleaved lanes, and
``uninstrument()``. The caller sees exactly what it sees without the instrumentation."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from opentelemetry.trace import StatusCode

from openai_latency import OpenAILatencyInstrumentor, _guard
from openai_latency.call import deferred
from openai_latency.fake_server import Canned, FakeServer
from openai_latency.websocket import arrivals
from tests.support.retry import retry_timing
from tests.support.span_checks import Captured, assert_same_instant, attrs, end_mono
from tests.websocket.support import (
    create,
    drain,
    drain_async,
    record_of,
    require_responses_ws,
    script,
    ws_patched_callables,
)

require_responses_ws()


@pytest.fixture
def fresh_reports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_guard, "_reported", set())
    yield


def _uninstrumented() -> None:
    instrumentor = OpenAILatencyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


def _turns(captured: Captured) -> list[Any]:
    return [s for s in captured.operations() if s.name != "openai.websocket.connect"]


def _sync_turn(server: Any, metadata: dict[str, str]) -> tuple[list[str], str | None]:
    """One turn on a new connection: the event types the caller got and the exception's type name."""
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    got: list[str] = []
    try:
        with client.responses.connect() as connection:
            connection.send(create(metadata=metadata))
            got = [event.type for event in drain(connection)]
    except Exception as exc:
        return got, type(exc).__qualname__
    return got, None


async def _async_turn(server: Any, metadata: dict[str, str]) -> tuple[list[str], str | None]:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    got: list[str] = []
    try:
        async with client.responses.connect() as connection:
            await connection.send(create(metadata=metadata))
            got = [event.type for event in await drain_async(connection)]
    except Exception as exc:
        return got, type(exc).__qualname__
    return got, None


FAULTS = {
    "error_event": (script(error="rate_limit_exceeded", delay_ms=30), "rate_limit_exceeded", "rate_limit"),
    "stream_error": (script(stream_error_after=2), "server_error", "server"),
    "response_failed": (script(response_status="failed"), "server_error", "server"),
    "disconnect": (script(disconnect_after=2), "websockets.exceptions.ConnectionClosedError", "connection"),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_fault_ends_the_turn_as_an_error_and_the_caller_sees_the_same(
    instrument: Callable[..., Captured], server: FakeServer, fault: str, mode: str
) -> None:
    metadata, error_type, _category = FAULTS[fault]

    def run() -> tuple[list[str], str | None]:
        if mode == "sync":
            return _sync_turn(server, metadata)
        return asyncio.run(_async_turn(server, metadata))

    _uninstrumented()
    baseline = run()
    captured = instrument()
    assert run() == baseline  # the same events and the same exception
    [turn] = _turns(captured)
    a = attrs(turn)
    assert a["openai_latency.stream.end_state"] == "error"
    assert a["error.type"] == error_type
    assert turn.status.status_code is StatusCode.ERROR
    if fault == "disconnect":
        assert baseline[1] == "ConnectionClosedError"
    else:
        record = record_of(server, turn) if fault != "error_event" else server.last_record()
        assert_same_instant(end_mono(turn), record.events[-1][1], "the turn's last event", abs_ms=10)


def test_the_caller_closing_mid_turn_ends_it_closed_early_once(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    with client.responses.connect() as connection:
        connection.send(create(metadata=script(chunks=20, chunk_delay_ms=10)))
        for event in connection:
            if event.type == "response.output_text.delta":
                break
    [turn] = _turns(captured)
    assert attrs(turn)["openai_latency.stream.end_state"] == "closed_early"
    assert turn.status.status_code is StatusCode.UNSET
    assert [p.name for p in captured.phases(turn)][-1] == "openai.stream_drain"


async def test_a_cancelled_recv_leaves_the_turn_open_until_the_close(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
    async with client.responses.connect() as connection:
        await connection.send(create(metadata=script(chunks=3, ttft_ms=500)))
        task = asyncio.ensure_future(drain_async(connection))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert _turns(captured) == []  # cancel-safe: the SDK's recv loses nothing, nor do we
    [turn] = _turns(captured)
    assert attrs(turn)["openai_latency.stream.end_state"] == "closed_early"


def test_a_connection_collected_mid_turn_ends_it_abandoned(
    instrument: Callable[..., Captured], timing_server: Any
) -> None:
    """It ends at its last activity: the arrival of the last delta the caller got (the fifth: four of
    them counted by the fused path, settled when the collector ends the turn). A second turn of its
    connection (the first builds the SDK's models) on a server in its own process."""
    captured = instrument()
    client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test")

    def run() -> tuple[Any, int]:
        captured.clear()
        connection = client.responses.connect().enter()
        ws = connection._connection
        connection.send(create(metadata=script(chunks=2)))
        drain(connection)
        connection.send(create(metadata=script(chunks=20, chunk_delay_ms=10)))
        deltas = 0
        for event in connection:
            deltas += event.type == "response.output_text.delta"
            if deltas == 5:
                break
        del connection, event
        gc.collect()
        assert deferred.flush(5)
        ws.close()
        turn = _turns(captured)[-1]
        assert attrs(turn)["openai_latency.stream.end_state"] == "abandoned"
        return turn, record_of(timing_server, turn).content_event_ns[4]

    def timing(result: tuple[Any, int]) -> None:
        turn, fifth = result
        assert_same_instant(end_mono(turn), fifth, "the end: the fifth delta's arrival")

    retry_timing(run, timing)


MALFORMED = [
    b"{not json",
    b'{"type": "response.brand_new_event", "x": 1}',
    b'{"type": "response.created"}',
    b'{"type": "response.output_text.delta"}',
    b'{"no_type": true}',
    b"[1, 2, 3]",
    b'{"type": "response.completed", "response": "not an object"}',
]


@pytest.mark.parametrize("binary", [False, True])
def test_malformed_frames_change_nothing_for_the_caller(
    instrument: Callable[..., Captured],
    server: FakeServer,
    caplog: pytest.LogCaptureFixture,
    fresh_reports: None,
    binary: bool,
) -> None:
    content_type = "application/octet-stream" if binary else "application/json"

    def run() -> list[str]:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
        outcomes: list[str] = []
        with client.responses.connect() as connection:
            server.enqueue(Canned(pieces=MALFORMED, content_type=content_type))
            connection.send(create())
            for _ in MALFORMED:
                try:
                    outcomes.append(repr(connection.recv()))
                except Exception as exc:
                    outcomes.append(type(exc).__qualname__)
        return outcomes

    _uninstrumented()
    baseline = run()
    caplog.set_level(logging.WARNING, logger="openai_latency")
    captured = instrument()
    assert run() == baseline
    assert [r.getMessage() for r in caplog.records if r.name == "openai_latency"] == []
    assert len(_turns(captured)) == 1  # the last frame ended it (a completed turn without a response)


def test_interleaved_lanes_match_events_to_their_turn(
    instrument: Callable[..., Captured], timing_server: Any
) -> None:
    """Two ``stream_id`` lanes run side by side on one connection; the server interleaves their
    events. Each event goes to its lane's turn: each span's phases match its own record."""
    captured = instrument()
    client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test")
    with client.responses.connect() as connection:
        connection.send(create(metadata=script(chunks=2)))
        drain(connection)
        retry_timing(lambda: _interleaved(captured, connection), _timed_lanes(captured, timing_server))


def _interleaved(captured: Captured, connection: Any) -> list[Any]:
    """Two turns on lanes ``a`` and ``b``, their events interleaved by the server: their spans."""
    captured.clear()
    a_script = script(delay_ms=40, ttft_ms=30, chunks=8, chunk_delay_ms=20)
    connection.send(create(stream_id="a", metadata=a_script))
    connection.send(
        create(stream_id="b", metadata=script(delay_ms=70, ttft_ms=10, chunks=8, chunk_delay_ms=15))
    )
    done = 0
    lanes = []
    for event in connection:
        lanes.append(event.stream_id)
        done += event.type == "response.completed"
        if done == 2:
            break
    assert lanes != sorted(lanes)  # interleaved
    turns = _turns(captured)
    assert len(turns) == 2
    assert [attrs(turn)["gen_ai.usage.output_tokens"] for turn in turns] == [8, 8]
    return turns


def _timed_lanes(captured: Captured, timing_server: Any) -> Callable[[list[Any]], None]:
    """Each turn's ``response.created`` and end against its own record (±3 ms)."""

    def timing(turns: list[Any]) -> None:
        for turn in turns:
            record = record_of(timing_server, turn)
            created = record.event_ns("event:response.created")[0]
            network_wait = next(p for p in captured.phases(turn) if p.name == "openai.network_wait")
            assert_same_instant(end_mono(network_wait), created, "response.created")
            assert_same_instant(end_mono(turn), record.event_ns("event:response.completed")[0], "completed")

    return timing


def test_http_calls_say_http_and_metrics_carry_the_transport(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    client.responses.create(model="gpt-4o-mini", input="hi")
    with client.responses.connect() as connection:
        connection.send(create(metadata=script(chunks=2)))
        drain(connection)
    transports = sorted(attrs(s)["openai_latency.transport"] for s in captured.operations())
    assert transports == ["http", "websocket", "websocket"]  # the call, the handshake, the turn
    data = captured.metric_reader.get_metrics_data()
    seen = {
        point.attributes.get("openai_latency.transport")
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "gen_ai.client.operation.duration"
        for point in metric.data.data_points
    }
    assert seen == {"http", "websocket"}


def test_a_rejected_upgrade_is_a_failed_handshake_span(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=server.origin + "/nowhere", api_key="sk-test")
    with pytest.raises(Exception) as caught:
        client.responses.connect().enter()
    [span] = captured.spans()
    assert span.name == "openai.websocket.connect"
    assert attrs(span)["error.type"] == "404" and attrs(span)["http.response.status_code"] == 404
    assert type(caught.value).__name__ == "InvalidStatus"


def test_uninstrument_restores_every_patched_callable(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    _uninstrumented()
    before = ws_patched_callables()
    instrument()
    during = ws_patched_callables()
    assert all(during[key] is not before[key] for key in before)
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    connection = client.responses.connect().enter()
    ws = connection._connection
    assert "process_event" in vars(ws)
    OpenAILatencyInstrumentor().uninstrument()
    assert ws_patched_callables() == before
    assert "process_event" not in vars(ws) and arrivals.ATTRIBUTE not in vars(ws)
    connection.send(create(metadata=script(chunks=2)))
    assert drain(connection)[-1].type == "response.completed"  # the live connection still works
    connection.close()


def test_a_reconnect_by_the_sdk_gets_its_handshake_span_with_the_attempt(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    """The connection drops mid-turn; with ``on_reconnecting`` the SDK reconnects: the turn ended as an
    error, the reconnect has its own ``openai.websocket.connect`` (attempt 1), the next turn links to it."""
    captured = instrument()
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    attempts: list[int] = []

    def on_reconnecting(event: Any) -> None:
        attempts.append(event.attempt)

    connection = client.responses.connect(on_reconnecting=on_reconnecting, initial_delay=0.01).enter()
    try:
        connection.send(create(metadata=script(disconnect_after=2)))
        resend = threading.Timer(1.0, lambda: connection.send(create(metadata=script(chunks=2))))
        resend.start()
        types = [event.type for event in drain(connection)]
        resend.join()
    finally:
        connection.close()
    assert attempts == [1] and types[-1] == "response.completed"
    handshakes = [s for s in captured.spans() if s.name == "openai.websocket.connect"]
    assert [attrs(h)["openai_latency.websocket.reconnect_attempt"] for h in handshakes] == [0, 1]
    first, second = _turns(captured)
    assert attrs(first)["openai_latency.stream.end_state"] == "error"
    assert attrs(second)["openai_latency.stream.end_state"] == "completed"
    assert [link.context.span_id for link in second.links] == [handshakes[1].context.span_id]

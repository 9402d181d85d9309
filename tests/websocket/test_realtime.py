"""Realtime (``client.realtime.connect()``, and the beta API's ``client.beta.realtime.connect()``): one
span per model response, its trigger, phases and time to first audio against the fake server's own log
(±3 ms), sync and async; server VAD; barge-in."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry.trace import StatusCode

from tests.support.retry import retry_timing, retry_timing_async
from tests.support.span_checks import (
    Captured,
    assert_close_ns,
    assert_same_instant,
    assert_tiles,
    attrs,
    end_mono,
    start_mono,
)
from tests.websocket.support import record_of, require_realtime, ws_url

require_realtime()

MODEL = "gpt-realtime"
VAD = {
    "type": "session.update",
    "session": {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad"}}}},
}
APPEND = {"type": "input_audio_buffer.append", "audio": "AAAA"}
AUDIO_DELTAS = ("response.output_audio.delta", "response.audio.delta")  # GA, beta
APIS = pytest.mark.parametrize("api", ["ga", "beta"])
SCRIPTED = {
    "x-fake-delay-ms": "60",
    "x-fake-ttft-ms": "40",
    "x-fake-chunks": "6",
    "x-fake-chunk-delay-ms": "15",
}


def _realtime(client: Any, api: str) -> Any:
    """``client.realtime`` (GA) or ``client.beta.realtime`` (the beta API: its own classes and names)."""
    return client.realtime if api == "ga" else client.beta.realtime


def _until_done(connection: Any) -> list[Any]:
    events = []
    for event in connection:
        events.append(event)
        if event.type == "response.done":
            return events
    return events


async def _until_done_async(connection: Any) -> list[Any]:
    events = []
    async for event in connection:
        events.append(event)
        if event.type == "response.done":
            return events
    return events


def _turns(captured: Captured) -> list[Any]:
    return [s for s in captured.operations() if s.name.startswith("realtime")]


def _shaped(captured: Captured, server: Any, trigger: str) -> Any:
    """The one turn just run, what does not depend on the scheduler checked: its phases, their
    tiling, its attributes."""
    [turn] = _turns(captured)
    record = record_of(server, turn)
    phases = captured.phases(turn)
    assert [p.name for p in phases] == ["openai.network_wait", "openai.first_token", "openai.stream_drain"]
    assert_tiles(turn, phases)
    a = attrs(turn)
    assert a["openai_latency.realtime.trigger"] == trigger
    assert a["openai_latency.time_to_first_token"] == a["openai_latency.time_to_first_audio"]
    assert a["gen_ai.operation.name"] == "realtime" and a["gen_ai.request.model"] == MODEL
    assert turn.name == f"realtime {MODEL}"
    assert a["openai_latency.transport"] == "websocket"
    assert a["gen_ai.usage.output_tokens"] == len(record.content_event_ns)
    assert a["openai_latency.stream.end_state"] == "completed"
    return turn


def _check_timing(captured: Captured, turn: Any, server: Any, start_ns: int) -> None:
    """The turn's boundaries and time to first audio against the server's log (±3 ms); ``start_ns``:
    the trigger on the server's clock (the frame received, or speech_stopped sent)."""
    record = record_of(server, turn)
    phases = captured.phases(turn)
    assert_same_instant(start_mono(turn), start_ns, "the trigger")
    assert_same_instant(end_mono(phases[0]), record.event_ns("event:response.created")[0], "response.created")
    first_audio = record.content_event_ns[0]
    assert_same_instant(end_mono(phases[1]), first_audio, "first audio delta")
    assert_same_instant(end_mono(turn), record.event_ns("event:response.done")[0], "response.done")
    ttfa = round(attrs(turn)["openai_latency.time_to_first_audio"] * 1e9)
    assert_close_ns(ttfa, first_audio - start_ns, "ttfa")


def _from_its_frame(captured: Captured, server: Any) -> Callable[[Any], None]:
    """The timing of a turn the client triggered with ``response.create`` (from the frame received)."""

    def timing(turn: Any) -> None:
        _check_timing(captured, turn, server, record_of(server, turn).received_ns)

    return timing


@APIS
def test_response_create_sync(instrument: Callable[..., Captured], timing_server: Any, api: str) -> None:
    captured = instrument()
    client = openai.OpenAI(
        base_url=timing_server.base_url, websocket_base_url=ws_url(timing_server), api_key="sk-test"
    )
    with _realtime(client, api).connect(model=MODEL, extra_headers={"x-fake-chunks": "2"}) as connection:
        connection.send({"type": "response.create"})  # warm-up: lazy model builds
        _until_done(connection)

        def run() -> Any:
            captured.clear()
            connection.send({"type": "response.create", "response": {"metadata": SCRIPTED}})
            _until_done(connection)
            return _shaped(captured, timing_server, "response.create")

        retry_timing(run, _from_its_frame(captured, timing_server))
    metric_names = {
        m.name
        for rm in captured.metric_reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert "openai_latency.time_to_first_audio" in metric_names


@APIS
def test_response_create_async(instrument: Callable[..., Captured], timing_server: Any, api: str) -> None:
    captured = instrument()

    async def main() -> None:
        client = openai.AsyncOpenAI(
            base_url=timing_server.base_url, websocket_base_url=ws_url(timing_server), api_key="sk-test"
        )
        async with _realtime(client, api).connect(model=MODEL) as connection:
            await connection.send(
                {"type": "response.create", "response": {"metadata": {"x-fake-chunks": "2"}}}
            )
            await _until_done_async(connection)

            async def run() -> Any:
                captured.clear()
                await connection.send({"type": "response.create", "response": {"metadata": SCRIPTED}})
                await _until_done_async(connection)
                return _shaped(captured, timing_server, "response.create")

            await retry_timing_async(run, _from_its_frame(captured, timing_server))

    asyncio.run(main())


def test_commit_then_response_create_is_one_turn_from_the_commit(
    instrument: Callable[..., Captured], timing_server: Any
) -> None:
    captured = instrument()
    client = openai.OpenAI(
        base_url=timing_server.base_url, websocket_base_url=ws_url(timing_server), api_key="sk-test"
    )
    with client.realtime.connect(model=MODEL) as connection:
        connection.send({"type": "response.create", "response": {"metadata": {"x-fake-chunks": "2"}}})
        _until_done(connection)

        def run() -> tuple[Any, int]:
            captured.clear()
            connection.send(APPEND)
            connection.send({"type": "input_audio_buffer.commit"})
            committed = next(e for e in connection if e.type == "input_audio_buffer.committed")
            assert committed is not None
            connection.send({"type": "response.create", "response": {"metadata": SCRIPTED}})
            _until_done(connection)
            turn = _shaped(captured, timing_server, "commit")
            session = next(  # the session is still open: its record so far, no wait for its end
                r for r in reversed(timing_server.records(wait=0)) if r.event_ns("event:session.created")
            )
            return turn, session.event_ns("event:input_audio_buffer.committed")[-1]

        retry_timing(run, lambda ran: _check_timing(captured, ran[0], timing_server, ran[1]))


def test_server_vad_starts_the_turn_at_speech_stopped(
    instrument: Callable[..., Captured], timing_server: Any
) -> None:
    captured = instrument()
    client = openai.OpenAI(
        base_url=timing_server.base_url, websocket_base_url=ws_url(timing_server), api_key="sk-test"
    )
    script = {**SCRIPTED, "x-fake-vad-speech-ms": "120"}
    with client.realtime.connect(model=MODEL, extra_headers=script) as connection:
        connection.send(VAD)
        connection.send({"type": "response.create"})  # warm-up
        _until_done(connection)

        def run() -> Any:
            captured.clear()
            for _ in range(3):
                connection.send(APPEND)
            _until_done(connection)
            return _shaped(captured, timing_server, "speech_stopped")

        def timing(turn: Any) -> None:
            stopped = record_of(timing_server, turn).event_ns("event:input_audio_buffer.speech_stopped")[0]
            _check_timing(captured, turn, timing_server, stopped)

        retry_timing(run, timing)
    assert [s.name for s in captured.operations()] == [f"realtime {MODEL}"]  # session events: no span


@APIS
@pytest.mark.parametrize("how", ["barge_in", "response_cancel"])
def test_a_barge_in_ends_the_turn_cancelled_not_as_an_error(
    instrument: Callable[..., Captured], server: Any, how: str, api: str
) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=server.base_url, websocket_base_url=ws_url(server), api_key="sk-test")
    script = {"x-fake-chunks": "30", "x-fake-chunk-delay-ms": "10"}
    if how == "barge_in":
        script["x-fake-barge-in-after"] = "3"
    with _realtime(client, api).connect(model=MODEL, extra_headers=script) as connection:
        connection.send({"type": "response.create"})
        audio = 0
        for event in connection:
            audio += event.type in AUDIO_DELTAS
            if how == "response_cancel" and audio == 3 and event.type in AUDIO_DELTAS:
                connection.send({"type": "response.cancel"})
            if event.type == "response.done":
                assert event.response.status == "cancelled"
                break
    [turn] = _turns(captured)
    a = attrs(turn)
    assert a["openai_latency.stream.end_state"] == "cancelled"
    assert turn.status.status_code is StatusCode.UNSET
    assert "error.type" not in a
    assert a["openai_latency.time_to_first_audio"] > 0
    assert a["gen_ai.response.finish_reasons"] == ("cancelled",)


def test_closing_mid_response_ends_it_closed_early(instrument: Callable[..., Captured], server: Any) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=server.base_url, websocket_base_url=ws_url(server), api_key="sk-test")
    with client.realtime.connect(
        model=MODEL, extra_headers={"x-fake-chunks": "30", "x-fake-chunk-delay-ms": "10"}
    ) as connection:
        connection.send({"type": "response.create"})
        for event in connection:
            if event.type == "response.output_audio.delta":
                break
    [turn] = _turns(captured)
    assert attrs(turn)["openai_latency.stream.end_state"] == "closed_early"
    # the handshake's span (an SDK that connects without _connect_ws, openai 1.x, makes none)
    assert [s.name for s in captured.spans()].count("openai.websocket.connect") <= 1

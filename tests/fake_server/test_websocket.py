"""The fake server's WebSocket side: ``/v1/responses`` and ``/v1/realtime`` upgraded on the HTTP port,
driven by the ``websockets`` client directly (the SDK's own use of it: tests/websocket/)."""

from __future__ import annotations

import http.client
import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("websockets")

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openai_latency.fake_server import FakeServer, RequestRecord

MS = 1_000_000
SLACK_MS = 25  # upper bounds only: scheduling noise on a loaded 2-core machine; lower bounds are exact


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


def _ws(server: FakeServer, path: str, **headers: str) -> ClientConnection:
    return connect(f"ws://127.0.0.1:{server.port}{path}", additional_headers=headers, open_timeout=5)


def _events(ws: ClientConnection, until: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    while True:
        event = json.loads(ws.recv(timeout=5))
        out.append(event)
        if event["type"] in until:
            return out


def _create(**fields: Any) -> str:
    return json.dumps({"type": "response.create", "model": "gpt-4o-mini", "input": "hi there", **fields})


TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")


def test_a_responses_turn_is_the_sse_stream_as_frames_and_logged(server: FakeServer) -> None:
    server.clear()
    script = {
        "x-fake-delay-ms": "40",
        "x-fake-ttft-ms": "30",
        "x-fake-chunks": "4",
        "x-fake-chunk-delay-ms": "15",
    }
    with _ws(server, "/v1/responses", **script) as ws:
        ws.send(_create())
        events = _events(ws, TERMINAL)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds.count("response.output_text.delta") == 4
    assert kinds[-1] == "response.completed"
    assert events[-1]["response"]["usage"]["output_tokens"] == 4
    [record] = server.records()
    assert (record.method, record.path, record.outcome) == ("WS", "/v1/responses", "ok")
    assert [kind.removeprefix("event:") for kind, _ in record.events] == kinds
    assert "authorization" not in record.headers
    created = record.event_ns("event:response.created")[0]
    deltas = record.content_event_ns
    assert 40 * MS <= created - record.received_ns <= (40 + SLACK_MS) * MS
    assert 30 * MS <= deltas[0] - created <= (30 + SLACK_MS) * MS
    assert all(15 * MS <= b - a <= (15 + SLACK_MS) * MS for a, b in itertools.pairwise(deltas))
    assert events[0]["response"]["id"] == f"resp_{record.request_id[4:28]}"


def test_turns_take_their_script_from_the_query_and_from_metadata(server: FakeServer) -> None:
    server.clear()
    with connect(f"ws://127.0.0.1:{server.port}/v1/responses?x-fake-chunks=2", open_timeout=5) as ws:
        ws.send(_create())
        first = _events(ws, TERMINAL)
        ws.send(_create(metadata={"x-fake-chunks": "3", "x-fake-reasoning-tokens": "2"}))
        second = _events(ws, TERMINAL)
    assert sum(e["type"] == "response.output_text.delta" for e in first) == 2
    assert sum(e["type"] == "response.output_text.delta" for e in second) == 3
    assert sum(e["type"] == "response.reasoning_text.delta" for e in second) == 2
    records = server.records()
    assert [r.connection_request_index for r in records] == [0, 1]
    assert len({r.connection_id for r in records}) == 1


def test_an_error_script_sends_an_error_event_with_the_code(server: FakeServer) -> None:
    server.clear()
    with _ws(server, "/v1/responses") as ws:
        ws.send(_create(metadata={"x-fake-error": "rate_limit_exceeded", "x-fake-delay-ms": "20"}))
        [event] = _events(ws, TERMINAL)
        ws.send(_create(metadata={"x-fake-stream-error-after": "2"}))
        mid = _events(ws, TERMINAL)
    assert event["error"]["code"] == "rate_limit_exceeded" and event["status"] == 429
    assert mid[-1]["type"] == "error" and mid[-1]["error"]["code"] == "server_error"
    assert sum(e["type"] == "response.output_text.delta" for e in mid) == 2
    first, second = server.records()
    assert first.outcome == "error" and first.event_ns("event:error")
    assert second.outcome == "error" and second.events[-1][0] == "error_event"


def test_disconnect_drops_the_tcp_connection_mid_turn(server: FakeServer) -> None:
    server.clear()
    with _ws(server, "/v1/responses") as ws:
        ws.send(_create(metadata={"x-fake-disconnect-after": "2"}))
        received = []
        with pytest.raises(ConnectionClosed) as caught:
            while True:
                received.append(json.loads(ws.recv(timeout=5))["type"])
    assert caught.value.rcvd is None  # no close frame: the TCP connection went away
    assert received.count("response.output_text.delta") == 2
    record = server.last_record()
    assert record.outcome == "disconnected" and record.events[-1][0] == "disconnect"


def test_malformed_frames_and_unknown_events(server: FakeServer) -> None:
    server.clear()
    with _ws(server, "/v1/responses") as ws:
        ws.send(_create(metadata={"x-fake-malformed-after": "1"}))
        frames = []
        while True:
            frame = ws.recv(timeout=5)
            frames.append(frame)
            if frame == "{not json":
                break
        ws.send("not json")
        assert json.loads(ws.recv(timeout=5))["error"]["code"] == "invalid_json"
        ws.send(json.dumps({"type": "response.nonsense"}))
        assert json.loads(ws.recv(timeout=5))["error"]["code"] == "unknown_event"


def test_stream_id_lanes_are_echoed(server: FakeServer) -> None:
    with _ws(server, "/v1/responses") as ws:
        ws.send(_create(stream_id="lane-a", metadata={"x-fake-chunks": "2"}))
        events = _events(ws, TERMINAL)
    assert {e.get("stream_id") for e in events} == {"lane-a"}


def test_http_still_served_on_the_same_port(server: FakeServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/v1/models")
    assert conn.getresponse().status == 200
    conn.close()


# -- Realtime ----------------------------------------------------------------------------------------


def _realtime(server: FakeServer, **headers: str) -> ClientConnection:
    ws = _ws(server, "/v1/realtime?model=gpt-realtime", **headers)
    assert json.loads(ws.recv(timeout=5))["type"] == "session.created"
    return ws


def test_realtime_response_create_streams_audio_and_transcript(server: FakeServer) -> None:
    server.clear()
    with _realtime(
        server, **{"x-fake-chunks": "3", "x-fake-delay-ms": "30", "x-fake-chunk-delay-ms": "10"}
    ) as ws:
        ws.send(json.dumps({"type": "response.create"}))
        events = _events(ws, ("response.done",))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created"
    assert (
        kinds.count("response.output_audio.delta")
        == kinds.count("response.output_audio_transcript.delta")
        == 3
    )
    done = events[-1]["response"]
    assert done["status"] == "completed" and done["usage"]["output_tokens"] == 3
    record = server.last_record()
    assert record.path == "/v1/realtime" and record.outcome == "ok"
    created = record.event_ns("event:response.created")[0]
    assert 30 * MS <= created - record.received_ns <= (30 + SLACK_MS) * MS
    assert len(record.content_event_ns) == 3


def test_realtime_server_vad_then_an_automatic_response(server: FakeServer) -> None:
    server.clear()
    with _realtime(server, **{"x-fake-vad-speech-ms": "80", "x-fake-chunks": "2"}) as ws:
        turn_detection = {"audio": {"input": {"turn_detection": {"type": "server_vad"}}}}
        ws.send(json.dumps({"type": "session.update", "session": {"type": "realtime", **turn_detection}}))
        assert json.loads(ws.recv(timeout=5))["type"] == "session.updated"
        for _ in range(3):
            ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": "AAAA"}))
        events = _events(ws, ("response.done",))
    kinds = [e["type"] for e in events]
    assert kinds[:4] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "response.created",
    ]
    record = server.last_record()
    started = record.event_ns("event:input_audio_buffer.speech_started")[0]
    stopped = record.event_ns("event:input_audio_buffer.speech_stopped")[0]
    assert 80 * MS <= stopped - started <= (80 + SLACK_MS) * MS
    assert record.event_ns("event:response.done")


@pytest.mark.parametrize("how", ["client_cancel", "barge_in"])
def test_realtime_cancel_ends_the_response_cancelled(server: FakeServer, how: str) -> None:
    server.clear()
    script = {"x-fake-chunks": "20", "x-fake-chunk-delay-ms": "10"}
    if how == "barge_in":
        script["x-fake-barge-in-after"] = "3"
    with _realtime(server, **script) as ws:
        ws.send(json.dumps({"type": "response.create"}))
        events: list[dict[str, Any]] = []
        while not events or events[-1]["type"] != "response.done":
            events.append(json.loads(ws.recv(timeout=5)))
            deltas = sum(e["type"] == "response.output_audio.delta" for e in events)
            if how == "client_cancel" and deltas == 3 and events[-1]["type"] == "response.output_audio.delta":
                ws.send(json.dumps({"type": "response.cancel"}))
    assert events[-1]["response"]["status"] == "cancelled"
    assert 3 <= sum(e["type"] == "response.output_audio.delta" for e in events) < 20
    if how == "barge_in":
        assert "input_audio_buffer.speech_started" in [e["type"] for e in events]
    record: RequestRecord = server.last_record()
    assert record.events[-1][0] == "event:response.done" and record.outcome == "ok"


def test_spawned_server_serves_websockets_too() -> None:
    with FakeServer.spawn({"chunks": 2}) as srv:
        with connect(f"ws://127.0.0.1:{srv.port}/v1/responses", open_timeout=5) as ws:
            ws.send(_create())
            start = time.perf_counter_ns()
            events = _events(ws, TERMINAL)
        record = srv.last_record()
    assert events[-1]["type"] == "response.completed"
    assert record.received_ns <= start + 50 * MS and record.method == "WS"

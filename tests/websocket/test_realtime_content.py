"""A Realtime turn's *input* content (issue 31, item 5): what the client added to the conversation since
the previous response (``conversation.item.create``), the user's audio as its transcript when the
server sends one, the session's and the response's instructions and tools, with the HTTP path's
attribute and event shape and size limit; nothing of it with capture off; audio bytes never."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from openai_latency.content.bounded_json import TRUNCATION_MARKER
from openai_latency.content.capture import EVENT_NAME
from openai_latency.fake_server import FakeServer
from openai_latency.fake_server.ws_realtime import INPUT_TRANSCRIPT, TRANSCRIBED
from tests.support.otel_capture import Full
from tests.support.span_checks import attrs
from tests.websocket.support import require_realtime, ws_url

require_realtime()

MODEL = "gpt-realtime"
MARKER = "zq8-rt-input"
# audio the client sends: base64 of bytes no other payload has, so "never exported" can be searched
AUDIO = base64.b64encode(b"\x07\x11\x13" * 160).decode()
APPEND = {"type": "input_audio_buffer.append", "audio": AUDIO}
TOOL = {"type": "function", "name": "lookup_weather", "description": "weather", "parameters": {}}
SESSION = {
    "type": "session.update",
    "session": {"type": "realtime", "instructions": f"Be brief {MARKER}-session", "tools": [TOOL]},
}
VAD_TRANSCRIBED = {
    "type": "session.update",
    "session": {
        "type": "realtime",
        "audio": {
            "input": {
                "turn_detection": {"type": "server_vad"},
                "transcription": {"model": "gpt-4o-transcribe"},
            }
        },
    },
}


def _user_text(text: str, audio: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "input_text", "text": text}]
    if audio:
        content.append({"type": "input_audio", "audio": AUDIO})
    return {
        "type": "conversation.item.create",
        "item": {"type": "message", "role": "user", "content": content},
    }


def _until_done(connection: Any, seen: list[str] | None = None) -> None:
    for event in connection:
        if seen is not None:
            seen.append(event.type)
        if event.type == "response.done":
            return


def _turns(cap: Full) -> list[Any]:
    return [s for s in cap.captured.operations() if s.name.startswith("realtime")]


def _input(turn: Any) -> Any:
    return json.loads(attrs(turn)["gen_ai.input.messages"])


def _client(server: FakeServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, websocket_base_url=ws_url(server), api_key="sk-test")


def _text_session(server: FakeServer) -> None:
    """Two turns: items, then a response; more items, then a response with its own instructions."""
    with _client(server).realtime.connect(model=MODEL, extra_headers={"x-fake-chunks": "2"}) as connection:
        connection.send(SESSION)
        connection.send(_user_text(f"first {MARKER}-1", audio=True))
        connection.send(
            {
                "type": "conversation.item.create",
                "item": {"type": "function_call_output", "call_id": "call_1", "output": '{"t": 21}'},
            }
        )
        connection.send({"type": "response.create"})
        _until_done(connection)
        connection.send(_user_text(f"second {MARKER}-2"))
        connection.send({"type": "response.create", "response": {"instructions": f"Now {MARKER}-response"}})
        _until_done(connection)


def test_items_sent_since_the_last_response_are_the_turns_input(
    full: Callable[..., Full], server: FakeServer
) -> None:
    cap = full(capture_content="span_only")
    _text_session(server)
    first, second = _turns(cap)
    assert _input(first) == [
        {
            "role": "user",
            "parts": [{"type": "text", "content": f"first {MARKER}-1"}, {"type": "input_audio"}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": '{"t": 21}'}]},
    ]
    assert json.loads(attrs(first)["gen_ai.system_instructions"]) == [
        {"type": "text", "content": f"Be brief {MARKER}-session"}
    ]
    assert json.loads(attrs(first)["gen_ai.tool.definitions"]) == [TOOL]
    # the second turn: only what came after the first response began; the response's own instructions
    assert _input(second) == [{"role": "user", "parts": [{"type": "text", "content": f"second {MARKER}-2"}]}]
    assert json.loads(attrs(second)["gen_ai.system_instructions"]) == [
        {"type": "text", "content": f"Now {MARKER}-response"}
    ]
    assert AUDIO not in cap.everything_exported()


@pytest.mark.parametrize("transcript_ms", [0, 150], ids=["before_created", "mid_turn"])
def test_server_vad_audio_is_its_transcript_when_the_server_sends_one(
    full: Callable[..., Full], server: FakeServer, transcript_ms: int
) -> None:
    cap = full(capture_content="span_and_event")
    script = {
        "x-fake-vad-speech-ms": "30",
        "x-fake-delay-ms": "40",
        "x-fake-chunks": "12",
        "x-fake-chunk-delay-ms": "20",
        "x-fake-transcribe-ms": str(transcript_ms),
    }
    seen: list[str] = []
    with _client(server).realtime.connect(model=MODEL, extra_headers=script) as connection:
        connection.send(VAD_TRANSCRIBED)
        for _ in range(3):
            connection.send(APPEND)
        _until_done(connection, seen)
    # the transcript came when scripted: before the response, or inside it
    created, transcribed = seen.index("response.created"), seen.index(TRANSCRIBED)
    assert (transcribed < created) if transcript_ms == 0 else (created < transcribed < len(seen) - 1)
    [turn] = _turns(cap)
    assert attrs(turn)["openai_latency.realtime.trigger"] == "speech_stopped"
    expected = [{"role": "user", "parts": [{"type": "text", "content": INPUT_TRANSCRIPT}]}]
    assert _input(turn) == expected
    [record] = [r for r in cap.log_records() if r.log_record.event_name == EVENT_NAME]
    assert json.loads(record.log_record.attributes["gen_ai.input.messages"]) == expected
    assert AUDIO not in cap.everything_exported()


def test_a_committed_buffer_is_its_turns_input(full: Callable[..., Full], server: FakeServer) -> None:
    cap = full(capture_content="span_only")
    script = {"x-fake-transcribe-ms": "0", "x-fake-chunks": "2", "x-fake-delay-ms": "80"}
    with _client(server).realtime.connect(model=MODEL, extra_headers=script) as connection:
        connection.send(_user_text(f"typed {MARKER}"))
        connection.send(APPEND)
        connection.send({"type": "input_audio_buffer.commit"})  # the turn starts here
        connection.send({"type": "response.create"})
        seen: list[str] = []
        _until_done(connection, seen)
    assert seen.index(TRANSCRIBED) < seen.index("response.done")
    [turn] = _turns(cap)
    assert attrs(turn)["openai_latency.realtime.trigger"] == "commit"
    assert _input(turn) == [
        {"role": "user", "parts": [{"type": "text", "content": f"typed {MARKER}"}]},
        {"role": "user", "parts": [{"type": "text", "content": INPUT_TRANSCRIPT}]},
    ]


def test_a_transcript_after_its_turn_ended_is_dropped_and_the_audio_only_named(
    full: Callable[..., Full], server: FakeServer
) -> None:
    cap = full(capture_content="span_and_event")
    script = {"x-fake-chunks": "2", "x-fake-transcribe-ms": "300"}
    with _client(server).realtime.connect(model=MODEL, extra_headers=script) as connection:
        connection.send(APPEND)
        connection.send({"type": "input_audio_buffer.commit"})
        connection.send({"type": "response.create"})
        first: list[str] = []
        _until_done(connection, first)
        connection.send(_user_text(f"typed {MARKER}"))
        connection.send({"type": "response.create", "response": {"metadata": {"x-fake-delay-ms": "600"}}})
        second: list[str] = []
        _until_done(connection, second)
    assert TRANSCRIBED not in first and second.index(TRANSCRIBED) < second.index("response.created")
    one, two = _turns(cap)
    assert _input(one) == [{"role": "user", "parts": [{"type": "input_audio"}]}]
    assert _input(two) == [{"role": "user", "parts": [{"type": "text", "content": f"typed {MARKER}"}]}]
    exported = cap.everything_exported()
    assert INPUT_TRANSCRIPT not in exported and AUDIO not in exported


def test_the_size_limit_holds_on_the_input(full: Callable[..., Full], server: FakeServer) -> None:
    limit = 160
    cap = full(capture_content="span_only", content_max_length=limit)
    with _client(server).realtime.connect(model=MODEL, extra_headers={"x-fake-chunks": "2"}) as connection:
        for n in range(2):
            connection.send(_user_text(f"{n} {MARKER} " + "word " * 200))
        connection.send({"type": "response.create"})
        _until_done(connection)
    [turn] = _turns(cap)
    value = attrs(turn)["gen_ai.input.messages"]
    assert len(value) <= limit and TRUNCATION_MARKER in value
    first, second = json.loads(value)  # still valid JSON
    assert first["parts"][0]["content"].startswith(f"0 {MARKER} word")
    assert second["role"] == "user"


def test_async_items_are_the_turns_input(full: Callable[..., Full], server: FakeServer) -> None:
    cap = full(capture_content="span_only")

    async def run() -> None:
        client = openai.AsyncOpenAI(
            base_url=server.base_url, websocket_base_url=ws_url(server), api_key="sk-test"
        )
        async with client.realtime.connect(model=MODEL, extra_headers={"x-fake-chunks": "2"}) as connection:
            await connection.send(_user_text(f"async {MARKER}"))
            await connection.send({"type": "response.create"})
            async for event in connection:
                if event.type == "response.done":
                    break

    asyncio.run(run())
    [turn] = _turns(cap)
    assert _input(turn) == [{"role": "user", "parts": [{"type": "text", "content": f"async {MARKER}"}]}]


def test_off_nothing_of_the_input_is_read_or_exported(full: Callable[..., Full], server: FakeServer) -> None:
    cap = full()  # the default: no_content
    _text_session(server)
    script = {"x-fake-vad-speech-ms": "30", "x-fake-chunks": "2", "x-fake-delay-ms": "60"}
    with _client(server).realtime.connect(model=MODEL, extra_headers=script) as connection:
        connection.send(VAD_TRANSCRIBED)
        connection.send(APPEND)
        seen: list[str] = []
        _until_done(connection, seen)
        assert TRANSCRIBED in seen  # the server did send the transcript
    turns = _turns(cap)
    assert len(turns) == 3
    exported = cap.everything_exported()
    for needle in (MARKER, INPUT_TRANSCRIPT, AUDIO, "gen_ai.input.messages", "gen_ai.system_instructions"):
        assert needle not in exported, needle
    assert [r for r in cap.log_records() if r.log_record.event_name == EVENT_NAME] == []

"""Content on WebSocket turns (issue 31, item 5): it follows the content-capture setting, off by default,
within ``content_max_length``; Realtime gives the output's text and transcript, never the audio (its
input: test_realtime_content.py); the API
key and the handshake's Authorization header are never recorded, whatever the setting.

"Nowhere" is checked by scanning the JSON of every exported span, log record and metric."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from openai_latency.content.bounded_json import TRUNCATION_MARKER
from openai_latency.content.capture import EVENT_NAME
from openai_latency.fake_server import FakeServer
from tests.support.otel_capture import Full
from tests.support.span_checks import attrs
from tests.websocket.support import create, drain, require_responses_ws, script, ws_url

require_responses_ws()

MARKER = "zq7-ws-marker"
API_KEY = "sk-ws-secret-5f1c9a"
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
)
REALTIME = "gpt-realtime"


def _responses_turn(server: FakeServer, chunks: int = 4) -> str:
    """One Responses WebSocket turn with a marked input and instructions; the text it streamed."""
    client = openai.OpenAI(base_url=server.base_url, api_key=API_KEY)
    with client.responses.connect() as connection:
        connection.send(
            create(
                input=f"Say it {MARKER}-user",
                instructions=f"Be terse {MARKER}-system",
                metadata=script(chunks=chunks),
            )
        )
        events = drain(connection)
    assert events[-1].type == "response.completed"
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def _realtime_turn(server: FakeServer) -> tuple[str, list[str]]:
    """One Realtime response: its transcript, and the audio deltas' payloads."""
    client = openai.OpenAI(base_url=server.base_url, websocket_base_url=ws_url(server), api_key=API_KEY)
    transcript, audio = [], []
    with client.realtime.connect(model=REALTIME, extra_headers={"x-fake-chunks": "3"}) as connection:
        connection.send({"type": "response.create", "response": {"instructions": f"Hi {MARKER}-rt"}})
        for event in connection:
            if event.type == "response.output_audio_transcript.delta":
                transcript.append(event.delta)
            elif event.type == "response.output_audio.delta":
                audio.append(event.delta)
            elif event.type == "response.done":
                break
    return "".join(transcript), audio


def _turn(cap: Full) -> Any:
    [op] = [s for s in cap.captured.operations() if s.name != "openai.websocket.connect"]
    return op


def test_off_by_default_nothing_of_the_turn_is_exported(
    full: Callable[..., Full], server: FakeServer
) -> None:
    cap = full()
    text = _responses_turn(server)
    realtime_text, _ = _realtime_turn(server)
    exported = cap.everything_exported()
    assert text and realtime_text
    for needle in (MARKER, *CONTENT_KEYS, text, realtime_text):
        assert needle not in exported, needle
    assert [r for r in cap.log_records() if r.log_record.event_name == EVENT_NAME] == []


def test_span_only_puts_the_turns_messages_on_its_span(full: Callable[..., Full], server: FakeServer) -> None:
    cap = full(capture_content="span_only")
    text = _responses_turn(server)
    a = attrs(_turn(cap))
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": f"Say it {MARKER}-user"}]}
    ]
    assert json.loads(a["gen_ai.system_instructions"]) == [
        {"type": "text", "content": f"Be terse {MARKER}-system"}
    ]
    output = json.loads(a["gen_ai.output.messages"])
    assert [p["content"] for p in output[0]["parts"] if p["type"] == "text"] == [text]
    assert cap.log_records() == []  # span_only: no log record


def test_event_only_emits_the_log_record_not_span_attributes(
    full: Callable[..., Full], server: FakeServer
) -> None:
    cap = full(capture_content="event_only")
    _responses_turn(server)
    assert not set(CONTENT_KEYS) & set(attrs(_turn(cap)))
    [record] = [r for r in cap.log_records() if r.log_record.event_name == EVENT_NAME]
    assert MARKER in record.log_record.attributes["gen_ai.input.messages"]


def test_the_size_limit_holds_on_a_turn(full: Callable[..., Full], server: FakeServer) -> None:
    limit = 120
    cap = full(capture_content="span_only", content_max_length=limit)
    _responses_turn(server, chunks=40)
    a = attrs(_turn(cap))
    output = a["gen_ai.output.messages"]
    assert len(output) <= limit and TRUNCATION_MARKER in output
    json.loads(output)  # still valid JSON
    assert all(len(a[key]) <= limit for key in CONTENT_KEYS if key in a)


def test_realtime_text_and_transcript_never_the_audio(full: Callable[..., Full], server: FakeServer) -> None:
    cap = full(capture_content="span_and_event")
    transcript, audio = _realtime_turn(server)
    turn = _turn(cap)
    assert turn.name == f"realtime {REALTIME}"
    output = json.loads(attrs(turn)["gen_ai.output.messages"])
    assert output == [{"role": "assistant", "parts": [{"type": "text", "content": transcript}]}]
    exported = cap.everything_exported()
    assert audio and all(chunk not in exported for chunk in set(audio))
    # the response's own instructions are its system instructions; no item was sent: no input messages
    # (the input side: test_realtime_content.py)
    assert json.loads(attrs(turn)["gen_ai.system_instructions"]) == [
        {"type": "text", "content": f"Hi {MARKER}-rt"}
    ]
    assert "gen_ai.input.messages" not in attrs(turn)


@pytest.mark.parametrize("setting", ["no_content", "span_and_event"])
def test_the_api_key_and_authorization_header_are_never_recorded(
    full: Callable[..., Full], server: FakeServer, setting: str
) -> None:
    cap = full(capture_content=setting)
    _responses_turn(server)
    _realtime_turn(server)
    names = [s.name for s in cap.captured.spans()]
    assert names.count("openai.websocket.connect") == 2  # the handshakes, which sent the header
    exported = cap.everything_exported()
    assert API_KEY not in exported
    assert "Bearer" not in exported and "authorization" not in exported.lower()

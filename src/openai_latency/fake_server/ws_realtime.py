"""``/v1/realtime`` over WebSocket: a Realtime session with scripted timing, in the GA event names, or the
beta API's when the handshake says ``OpenAI-Beta: realtime=v1`` (``client.beta.realtime.connect()``:
``response.audio.delta`` for ``response.output_audio.delta``, ``response.audio_transcript.*`` for
``response.output_audio_transcript.*``).

- ``session.created`` on connect; ``session.update`` -> ``session.updated`` (turn detection
  ``server_vad`` turns server VAD on, as the ``vad`` script key does);
- ``input_audio_buffer.append``: with server VAD, the first append of a user turn is answered with
  ``input_audio_buffer.speech_started``; ``vad-speech-ms`` later ``speech_stopped``, ``committed`` and
  an automatic response;
- ``input_audio_buffer.commit`` -> ``input_audio_buffer.committed``;
- input transcription (the ``transcribe-ms`` script key, or a ``session.update`` that configures
  ``audio.input.transcription``, beta ``input_audio_transcription``): that long after each
  ``committed``, ``conversation.item.input_audio_transcription.completed`` with :data:`INPUT_TRANSCRIPT`;
  every user audio turn has its own item id (``item_user_N``);
- ``response.create`` -> a response; ``response.cancel`` -> the response in flight ends with
  ``response.done`` of status ``cancelled`` (``barge-in-after`` N does the same by itself after N
  audio deltas, after a ``speech_started``: the user talked over the model).

A response is a stream plan run by the stream engine like any other (``delay-ms`` before
``response.created``, ``ttft-ms`` before the first delta, ``chunk-delay-ms`` between deltas, the faults);
each of its ``chunks`` is one ``response.output_audio.delta`` and one
``response.output_audio_transcript.delta`` written together (logged as the audio delta). Each response
is one record (method ``WS``, path ``/v1/realtime``); the VAD events of the user turn that triggered it
are in that record too. Events outside a response (``session.*``, ``committed`` of a manual commit,
errors) go to the session's own record, the first of the connection.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any, Final

from . import payloads, stream_engine
from .payloads import Event, Output, StreamPlan
from .records import Outcome, RequestRecord
from .script import Script, ScriptError
from .ws_session import Session, TurnWriter, finish_turn, metadata_script, ws_error

AUDIO_DELTA: Final = "response.output_audio.delta"
TRANSCRIPT_DELTA: Final = "response.output_audio_transcript.delta"
BETA_NAMES: Final = {
    AUDIO_DELTA: "response.audio.delta",
    TRANSCRIPT_DELTA: "response.audio_transcript.delta",
    "response.output_audio.done": "response.audio.done",
    "response.output_audio_transcript.done": "response.audio_transcript.done",
}
"""The beta API's names of the GA events that were renamed (the others are the same)."""
_AUDIO: Final = base64.b64encode(bytes(480)).decode()  # 10 ms of 24 kHz pcm16 silence
INPUT_TRANSCRIPT: Final = "what the user said"
TRANSCRIBED: Final = "conversation.item.input_audio_transcription.completed"


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _event(kind: str, data: dict[str, Any]) -> Event:
    return f"event:{kind}", f"event: {kind}\ndata: {_dumps({'type': kind, **data})}\n\n".encode()


def _response(out: Output, status: str, done: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"resp_{out.id}",
        "object": "realtime.response",
        "status": status,
        "output": [],
        "conversation_id": "conv_fake",
        "output_modalities": ["audio"],
        "usage": None,
    }
    if done:
        body["usage"] = {
            "total_tokens": out.prompt_tokens + out.completion_tokens,
            "input_tokens": out.prompt_tokens,
            "output_tokens": out.completion_tokens,
            "input_token_details": {"text_tokens": out.prompt_tokens, "audio_tokens": 0, "cached_tokens": 0},
            "output_token_details": {"text_tokens": 0, "audio_tokens": out.completion_tokens},
        }
    return body


def realtime_plan(out: Output, beta: bool = False) -> StreamPlan:
    """A response's events; ``beta``: in the beta API's names (:data:`BETA_NAMES`)."""

    def name(kind: str) -> str:
        return BETA_NAMES.get(kind, kind) if beta else kind

    item = f"item_{out.id}"
    ids = {"response_id": f"resp_{out.id}", "item_id": item, "output_index": 0, "content_index": 0}
    preamble = [
        _event("response.created", {"response": _response(out, "in_progress", False)}),
        _event(
            "response.output_item.added",
            {
                "response_id": f"resp_{out.id}",
                "output_index": 0,
                "item": {"id": item, "type": "message", "role": "assistant"},
            },
        ),
        _event("response.content_part.added", {**ids, "part": {"type": "audio", "transcript": ""}}),
    ]
    content = []
    for word in out.words:
        audio = _event(name(AUDIO_DELTA), {**ids, "delta": _AUDIO})
        transcript = _event(name(TRANSCRIPT_DELTA), {**ids, "delta": word})
        content.append((audio[0], audio[1] + transcript[1]))
    epilogue = [
        _event(name("response.output_audio.done"), ids),
        _event(name("response.output_audio_transcript.done"), {**ids, "transcript": out.text}),
        _event("response.content_part.done", {**ids, "part": {"type": "audio", "transcript": out.text}}),
        _event(
            "response.output_item.done",
            {
                "response_id": f"resp_{out.id}",
                "output_index": 0,
                "item": {"id": item, "type": "message", "role": "assistant"},
            },
        ),
        _event("response.done", {"response": _response(out, "completed", True)}),
    ]

    def error_event(_sent: int) -> bytes:
        return _event("error", {"code": "server_error", "message": payloads.STREAM_ERROR_MESSAGE})[1]

    return StreamPlan(preamble, content, epilogue, error_event)


class RealtimeSession:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.record = session.new_record("/v1/realtime")  # the session's own events
        self.beta = session.req.headers.get("openai-beta", "").startswith("realtime=")
        script = session.script()
        self.vad = script.vad
        self.transcribe = script.transcribe
        self.items = 0  # user audio items so far
        self.speech: RequestRecord | None = None  # the user turn being spoken (server VAD)
        self.response: tuple[asyncio.Task[None], RequestRecord, Output] | None = None
        self.cancelled = False

    async def serve(self) -> None:
        sent = await self.send(
            self.record, "session.created", {"session": {"id": "sess_fake", "type": "realtime"}}
        )
        if sent:
            await self.session.run(self.on_message)
        self.session.log.finish(self.record, "ok", time.perf_counter_ns())

    async def send(self, record: RequestRecord, kind: str, data: dict[str, Any]) -> bool:
        sent = await self.session.send_text(
            _dumps({"type": kind, "event_id": f"event_{kind}", **data}).encode()
        )
        record.events.append((f"event:{kind}", time.perf_counter_ns()))
        return sent

    async def on_message(self, message: dict[str, Any], received_ns: int) -> None:
        kind = message["type"]
        if kind == "session.update":
            session = message.get("session") or {}
            detection = ((session.get("audio") or {}).get("input") or {}).get(
                "turn_detection"
            ) or session.get("turn_detection")
            if isinstance(detection, dict):
                self.vad = detection.get("type") == "server_vad"
            transcription = ((session.get("audio") or {}).get("input") or {}).get(
                "transcription"
            ) or session.get("input_audio_transcription")
            if isinstance(transcription, dict) and self.transcribe is None:
                self.transcribe = 0.0
            await self.send(self.record, "session.updated", {"session": session})
        elif kind == "input_audio_buffer.append":
            if self.vad and self.speech is None:
                self.speech = self.session.new_record("/v1/realtime", {"type": "server_vad"})
                self.speech.received_ns = received_ns
                await self.send(
                    self.speech,
                    "input_audio_buffer.speech_started",
                    {"audio_start_ms": 0, "item_id": self._next_item()},
                )
                self.session.start_turn(self._speech)
        elif kind == "input_audio_buffer.commit":
            await self._committed(self.record, self._next_item())
        elif kind == "response.create":
            record = self.session.new_record("/v1/realtime", message)
            record.received_ns = received_ns
            self._respond(record, metadata_script(message.get("response") or {}))
        elif kind == "response.cancel":
            self._cancel()
        elif kind not in (
            "conversation.item.create",
            "conversation.item.truncate",
            "input_audio_buffer.clear",
        ):
            await self.send(
                self.record,
                "error",
                {
                    "error": {
                        "type": "invalid_request_error",
                        "code": "unknown_event",
                        "message": f"unsupported event {kind!r}",
                    }
                },
            )

    async def _speech(self) -> None:
        record = self.speech
        assert record is not None
        try:
            script = self.session.script()
        except ScriptError:
            return
        await asyncio.sleep(script.vad_speech)
        item = f"item_user_{self.items}"
        if not await self.send(
            record, "input_audio_buffer.speech_stopped", {"audio_end_ms": 300, "item_id": item}
        ):
            return
        await self._committed(record, item)
        self.speech = None
        self._respond(record, {})

    def _next_item(self) -> str:
        self.items += 1
        return f"item_user_{self.items}"

    async def _committed(self, record: RequestRecord, item: str) -> None:
        """``committed``, and the item's transcript later when transcription is on."""
        await self.send(record, "input_audio_buffer.committed", {"item_id": item})
        delay = self.transcribe
        if delay is None:
            return

        async def transcribed() -> None:
            await asyncio.sleep(delay)
            data = {"item_id": item, "content_index": 0, "transcript": INPUT_TRANSCRIPT}
            await self.send(record, TRANSCRIBED, data)

        self.session.start_turn(transcribed)

    def _respond(self, record: RequestRecord, extra: dict[str, str]) -> None:
        try:
            script = self.session.script(extra)
        except ScriptError as exc:
            message = str(exc)
            self.session.start_turn(lambda: self._script_error(record, message))
            return
        out = payloads.make_output(record.request_id[4:], "gpt-realtime", "hello", script)
        self.cancelled = False
        task = self.session.start_turn(
            lambda: finish_turn(self.session.log, record, self._turn(record, script, out))
        )
        self.response = (task, record, out)

    async def _script_error(self, record: RequestRecord, message: str) -> None:
        await self.send(
            record,
            "error",
            {"error": {"type": "invalid_request_error", "code": "invalid_fake_script", "message": message}},
        )
        self.session.log.finish(record, "error", time.perf_counter_ns())

    async def _turn(self, record: RequestRecord, script: Script, out: Output) -> Outcome:
        writer = _RealtimeWriter(self, record, script)
        try:
            if not await writer.sleep(script.delay):
                return "client_closed"
            return await stream_engine.send_stream(writer, record, script, 200, realtime_plan(out, self.beta))
        except asyncio.CancelledError:
            if not self.cancelled or self.session.conn.peer_gone:
                raise
            done = _response(out, "cancelled", True)
            await self.send(record, "response.done", {"response": done})
            return "ok"
        finally:
            if self.response is not None and self.response[1] is record:
                self.response = None

    def _cancel(self) -> None:
        if self.response is not None and not self.cancelled:
            self.cancelled = True
            self.response[0].cancel()


class _RealtimeWriter(TurnWriter):
    """A response's writer: counts audio deltas for ``barge-in-after``."""

    def __init__(self, realtime: RealtimeSession, record: RequestRecord, script: Script) -> None:
        super().__init__(realtime.session, record.connection_request_index)
        self._realtime = realtime
        self._record = record
        self._barge_in = script.barge_in_after
        self._audio = 0
        delta = BETA_NAMES[AUDIO_DELTA] if realtime.beta else AUDIO_DELTA
        self._audio_event = f"event: {delta}\n".encode()

    async def send_body(self, data: bytes, end: bool = False) -> bool:
        sent = await super().send_body(data, end)
        if self._barge_in is not None:
            self._audio += data.count(self._audio_event)
            if self._audio >= self._barge_in:
                self._barge_in = None
                # the engine logs the deltas after this returns: the user's speech follows them
                asyncio.get_running_loop().call_soon(lambda: self._realtime.session.start_turn(self._barge))
        return sent

    async def _barge(self) -> None:
        item = self._realtime._next_item()
        await self._realtime.send(
            self._record, "input_audio_buffer.speech_started", {"audio_start_ms": 0, "item_id": item}
        )
        self._realtime._cancel()


__all__ = ["RealtimeSession", "realtime_plan", "ws_error"]

"""Realtime sessions (``client.realtime.connect()``, and ``client.beta.realtime.connect()``, whose
connection classes are its own): one operation span per model response.

A turn starts at its trigger (``openai_latency.realtime.trigger``): the client's ``response.create``
or ``input_audio_buffer.commit`` (when ``send`` is called), or, with server VAD, the arrival of
``input_audio_buffer.speech_stopped``. A trigger while another waits for its ``response.created``
starts nothing (``commit`` then ``response.create`` is one turn, from the commit). A response the
client did not see triggered (a trigger before the instrumentation) starts at its ``response.created``,
without a trigger attribute. Phases: ``network_wait`` (trigger -> ``response.created``), ``first_token``
(-> the first output delta: audio, transcript, text or function-call arguments), ``stream_drain``
(-> ``response.done``). ``openai_latency.time_to_first_audio``: trigger -> the first
``response.output_audio.delta`` (``response.audio.delta`` in the beta API). Usage and status from
``response.done``; status ``cancelled`` (a barge-in, ``response.cancel``) ends the turn ``cancelled``,
not as an error; ``failed`` as an error. Session events (``session.*``, audio appends) make no span;
``error`` events end no turn (they are about client events).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .. import semconv as sc
from .._guard import guarded
from ..call import deferred
from ..content.realtime_input import CLIENT_EVENTS, SERVER_EVENTS, RealtimeInput
from ..model import ANSWER, Attributes, OperationKind, StreamStats, Telemetry
from ..read.attributes import response_attributes
from . import arrivals, handshake
from .responses import STATE, event_fields
from .turns import Turn, Turns, capture_content, created, end, feed, frame_written, open_operation

REALTIME: Final = OperationKind(operation="realtime", api_type="realtime", stream_kind="any")
AUDIO_DELTAS: Final = frozenset({"response.output_audio.delta", "response.audio.delta"})
OUTPUT_DELTAS: Final = AUDIO_DELTAS | {
    "response.output_audio_transcript.delta",
    "response.audio_transcript.delta",
    "response.output_text.delta",
    "response.text.delta",
    "response.function_call_arguments.delta",
}
TRIGGERS: Final = {"response.create": "response.create", "input_audio_buffer.commit": "commit"}


def observe(st: StreamStats, event: Any) -> int:
    kind = event.type
    if kind in OUTPUT_DELTAS:
        return ANSWER if getattr(event, "delta", True) else 0
    if kind == "response.created":
        st.first_attributes = response_attributes(getattr(event, "response", None))
    elif kind == "response.done":
        response = getattr(event, "response", None)
        st.final_item = response
        st.usage = getattr(response, "usage", None)
        status = getattr(response, "status", None)
        if isinstance(status, str):
            st.finish_reasons = [status]
            if status == "failed":
                details = getattr(response, "status_details", None)
                st.error_item = getattr(details, "error", None) or details or response
    return 0


class RealtimeTurns(Turns):
    """A session's turns, and what a turn started by a server event needs from the connection."""

    def __init__(self, telemetry: Telemetry) -> None:
        super().__init__(observe)
        self.telemetry = telemetry
        self.info: dict[str, Any] = {}
        """The handshake's span context, client attributes and model (:mod:`.handshake`)."""
        settings = telemetry.settings
        self.input = (
            RealtimeInput(settings.content_max_length) if settings.capture_content != "no_content" else None
        )
        """The session's input content, for the next turn (content capture on; else None)."""

    def waiting(self) -> Turn | None:
        """The turn whose ``response.created`` has not come yet."""
        return next((t for t in self.lanes.get(None, ()) if t.response_id is None), None)

    def open(self, start_ns: int, trigger: str | None) -> Turn:
        info = self.info
        model = info.get(handshake.MODEL) or ""
        attributes: Attributes = {sc.GEN_AI_OPERATION_NAME: REALTIME.operation, "openai.api.type": "realtime"}
        if model:
            attributes[sc.GEN_AI_REQUEST_MODEL] = model
        attributes.update(info.get(handshake.CLIENT) or {})
        if trigger is not None:
            attributes[sc.OPENAI_LATENCY_REALTIME_TRIGGER] = trigger
        name = f"realtime {model}" if model else "realtime"
        op = open_operation(
            self.telemetry, REALTIME, name, attributes, start_ns, info.get(handshake.LINK), True
        )
        frame_written(op, start_ns)
        turn = Turn(op)
        capture_content(turn, self.telemetry, observe, None)
        if self.input is not None and turn.op.content is not None:
            turn.input = self.input.take(trigger)
        self.add(None, turn)
        return turn


def turns_of(connection: Any, telemetry: Telemetry) -> RealtimeTurns:
    found = connection.__dict__.get(STATE)
    turns = found if isinstance(found, RealtimeTurns) else RealtimeTurns(telemetry)
    ws = getattr(connection, "_connection", None)
    if found is not turns:
        connection.__dict__[STATE] = turns
        deferred.watch(connection, turns)
        if ws is not None and hasattr(ws, "__dict__"):
            arrivals.own(ws, connection, turns)
    store = getattr(ws, "__dict__", None)
    if store and handshake.LINK in store:
        turns.info = store
    elif ws is not None and not turns.info:  # connected without the handshake hook (openai 1.x)
        turns.info = {handshake.MODEL: handshake.query_model(ws)}
    return turns


def receiving(connection: Any, telemetry: Telemetry) -> Turns:
    """A session's turns from its first event on: a server event (speech_stopped) may start one."""
    turns = connection.__dict__.get(STATE)
    if isinstance(turns, RealtimeTurns):
        return turns
    return turns_of(connection, telemetry)


def begin(
    telemetry: Telemetry, connection: Any, event: Any, start_ns: int
) -> tuple[Turns, Turn, object] | None:
    kind = event.get("type") if isinstance(event, dict) else getattr(event, "type", None)
    if kind == "response.cancel":
        turns = turns_of(connection, telemetry)
        open_turns = turns.lanes.get(None)
        if open_turns:
            open_turns[-1].cancelled = True
        return None
    trigger = TRIGGERS.get(kind) if isinstance(kind, str) else None
    if trigger is None:
        if kind in CLIENT_EVENTS and telemetry.settings.capture_content != "no_content":
            _input_sent(turns_of(connection, telemetry), kind, event)
        return None
    turns = turns_of(connection, telemetry)
    waiting = turns.waiting()
    turn = waiting or turns.open(start_ns, trigger)
    if kind == "response.create" and turn.input is not None:
        _response_sent(turn, event)
    return None if waiting is not None else (turns, turn, None)


@guarded()
def _input_sent(turns: RealtimeTurns, kind: str, event: Any) -> None:
    """A client event that adds to the next turn's input (content capture on)."""
    fields = event_fields(event)
    if turns.input is not None and fields is not None:
        turns.input.client_event(kind, fields)


@guarded()
def _response_sent(turn: Turn, event: Any) -> None:
    """A ``response.create``'s own instructions, tools and input, for its turn (content capture on)."""
    fields = event_fields(event)
    response = fields.get("response") if fields is not None else None
    if turn.input is not None and isinstance(response, Mapping):
        turn.input.response(response)


def sent(started: tuple[Turns, Turn, object], now: int) -> None:
    """Nothing: a Realtime turn's network_wait starts at its trigger."""


def send_failed(started: tuple[Turns, Turn, object], exc: BaseException, now: int) -> None:
    turns, turn, lane = started
    turns.remove(turn, lane)
    end(turn, now, "error", exc)


def on_event(turns: Turns, event: Any, arrival: int, handover: int) -> None:
    fields = getattr(event, "__dict__", None) or {}
    kind = fields.get("type")
    if not isinstance(kind, str) or not isinstance(turns, RealtimeTurns):
        return
    if kind in SERVER_EVENTS:
        if turns.input is not None:
            turns.input.server_event(kind, fields)
        if kind == "input_audio_buffer.speech_stopped" and turns.waiting() is None:
            turns.open(arrival, "speech_stopped")
        return
    if kind == "response.created":
        turn = turns.waiting() or turns.open(arrival, None)
        response_id = getattr(fields.get("response"), "id", None)
        turn.response_id = response_id if isinstance(response_id, str) else ""
        created(turn, arrival)
    else:
        if not kind.startswith("response."):
            return
        response_id = fields.get("response_id")
        if response_id is None:
            response_id = getattr(fields.get("response"), "id", None)
        queue = turns.lanes.get(None) or ()
        turn_or_none = next((t for t in queue if t.response_id and t.response_id == response_id), None)
        if turn_or_none is None:
            turn_or_none = next((t for t in queue if t.response_id is not None), None)
        if turn_or_none is None:
            return
        turn = turn_or_none
        if kind in AUDIO_DELTAS and not turn.first_audio_ns:
            turn.first_audio_ns = arrival
    feed(turns, turn, event, arrival, handover)
    if kind == "response.done":
        turns.remove(turn, None)
        status = turn.op.stream.finish_reasons
        end(turn, arrival, "cancelled" if status == ["cancelled"] else "completed")

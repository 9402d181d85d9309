"""Responses WebSocket mode (``client.responses.connect()``): one operation span per ``response.create``.

- ``send(response.create)``: the turn starts when ``send`` is called, its span a child of the span
  current there, linked to the connection's handshake; ``request_build`` lasts until ``send``
  returned (the frame written), then ``network_wait`` until ``response.created`` arrives.
- Events go to the turn they belong to: the protocol runs one turn at a time per lane (the
  ``stream_id`` a ``response.create`` names, echoed on its events; no lane is a lane too), so an
  event goes to the oldest open turn of its lane; ``response.created`` names the turn's response id,
  and a final event (``response.completed | failed | incomplete``) ends the turn of its response id.
- The turn ends at the arrival of its final event, of an ``error`` event (the provider's code is
  ``error.type``), when the connection is lost (``error``), closed by the caller (``closed_early``) or
  collected (``abandoned``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any, Final

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from .. import semconv as sc
from .._guard import report
from ..call import deferred
from ..clock import clock
from ..hooks.streams import BLOCKED_NS, OBSERVERS, _add_gap, _on_chunk, _token_gap
from ..model import StreamStats, Telemetry
from ..read.attributes import request_attributes
from ..read.routing import RESPONSES
from . import arrivals, handshake
from .arrivals import Stamps
from .turns import Turn, Turns, capture_content, created, end, frame_written, open_operation, settle

STATE: Final = "_openai_latency_turns"
"""Where an SDK connection keeps its :class:`.turns.Turns` (its ``__dict__``)."""
FINAL: Final = frozenset({"response.completed", "response.failed", "response.incomplete"})
_observe_responses = OBSERVERS["responses"]
_TOKEN_KINDS: Final = (
    "response.output_text.delta",
    "response.refusal.delta",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
    "response.mcp_call_arguments.delta",
    "response.code_interpreter_call_code.delta",
    "response.audio.delta",
    "response.audio.transcript.delta",
    "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta",
)
DELTA_CHANNELS: Final = {
    kind: _observe_responses(StreamStats(), SimpleNamespace(type=kind, delta="x")) for kind in _TOKEN_KINDS
}
"""The token channel of the usual delta events, as the SSE observer itself decides it (asked once here):
:func:`event_parser`'s fast path. Any other delta type takes the general path, which decides the same."""
_NO_LANE: Final = object()


def observe(st: StreamStats, event: Any) -> int:
    """The SSE observer, and the WebSocket ``error`` event's code, one level down (``event.error``)."""
    channel = _observe_responses(st, event)
    if st.error_item is event:
        _error_code(st, event)
    return channel


def _error_code(st: StreamStats, event: Any) -> None:
    inner = getattr(event, "error", None)
    if isinstance(inner, Mapping):  # an SDK without the WebSocket error model keeps it a dict
        inner = SimpleNamespace(code=inner.get("code"), message=inner.get("message"))
    if inner is not None:
        st.error_item = inner


def turns_of(connection: Any) -> Turns:
    """The connection's turns, made at its first use (watched for the collector from then on)."""
    turns: Turns | None = connection.__dict__.get(STATE)
    if turns is None:
        # the SSE observer itself (one call less per event): on_event looks one level down for an
        # ``error`` event's code
        turns = connection.__dict__[STATE] = Turns(_observe_responses)
        deferred.watch(connection, turns)
        ws = getattr(connection, "_connection", None)
        if ws is not None and hasattr(ws, "__dict__"):
            arrivals.own(ws, connection, turns)
    return turns


def receiving(connection: Any, telemetry: Telemetry) -> Turns | None:
    """The turns an event received now may belong to: none before the first ``response.create``."""
    turns: Turns | None = connection.__dict__.get(STATE)
    return turns


def event_fields(event: Any) -> Mapping[str, Any] | None:
    """A client event as a mapping (a dict param, or the SDK's model), or None."""
    if isinstance(event, Mapping):
        return event
    to_dict = getattr(event, "to_dict", None)
    if to_dict is None:
        return None
    fields = to_dict()
    return fields if isinstance(fields, Mapping) else None


def begin(
    telemetry: Telemetry, connection: Any, event: Any, start_ns: int
) -> tuple[Turns, Turn, object] | None:
    """A ``response.create`` is being sent: its turn, registered before the frame leaves."""
    fields = event_fields(event)
    if fields is None or fields.get("type") != "response.create":
        return None
    ws = getattr(connection, "_connection", None)
    store = ws.__dict__ if ws is not None and hasattr(ws, "__dict__") else {}
    kwargs = {k: v for k, v in fields.items() if k != "type"}
    attributes = request_attributes(kwargs, RESPONSES.operation, RESPONSES.api_type)
    attributes[gen_ai.GEN_AI_REQUEST_STREAM] = True  # a turn always streams its events
    attributes.update(store.get(handshake.CLIENT) or {})
    model = attributes.get(sc.GEN_AI_REQUEST_MODEL)
    name = f"{RESPONSES.operation} {model}" if model else RESPONSES.operation
    op = open_operation(telemetry, RESPONSES, name, attributes, start_ns, store.get(handshake.LINK), False)
    turn = Turn(op)
    capture_content(turn, telemetry, observe, kwargs)
    lane = fields.get("stream_id")
    turns = turns_of(connection)
    turns.add(lane, turn)
    return turns, turn, lane


def sent(started: tuple[Turns, Turn, object], now: int) -> None:
    frame_written(started[1].op, now)


def send_failed(started: tuple[Turns, Turn, object], exc: BaseException, now: int) -> None:
    turns, turn, lane = started
    turns.remove(turn, lane)
    end(turn, now, "error", exc)


def on_event(turns: Turns, event: Any, arrival: int, handover: int) -> None:
    """One event the caller received: to its turn, which it may end. The event's fields are read from
    its ``__dict__`` (the SDK's models keep them there): a missing one costs no exception."""
    fields = getattr(event, "__dict__", None) or {}
    kind = fields.get("type")
    if not isinstance(kind, str):
        return
    lane = fields.get("stream_id", _NO_LANE)
    if lane is _NO_LANE:
        lane = _extra_lane(event)
    queue = turns.lanes.get(lane)
    if not queue:
        return
    turn = queue[0]
    final = kind in FINAL  # once per event: read again below
    if final:
        response_id = getattr(fields.get("response"), "id", None)
        if isinstance(response_id, str):
            turn = next((t for t in queue if t.response_id == response_id), turn)
    elif kind == "response.created":
        turn = next((t for t in queue if t.response_id is None), turn)
        response_id = getattr(fields.get("response"), "id", None)
        turn.response_id = response_id if isinstance(response_id, str) else ""
        created(turn, arrival)
    # turns.feed, inlined (once per event), after the events the fused path counted (settle)
    settle(turn)
    op = turn.op
    st = op.stream
    delay = handover - arrival
    turn.handover_total += delay
    if delay > turn.handover_max:
        turn.handover_max = delay
    _on_chunk(op, turn.observe or turns.observe, event, st.last_activity_ns or arrival, arrival)
    turn.last = st.last_activity_ns
    turn.fast = st.channels if turn.observe is None else 0
    if final or kind == "error":
        if st.error_item is event:
            _error_code(st, event)
        turns.remove(turn, lane)
        end(turn, arrival, "completed")  # an error item makes it "error" (Operation.finish)


def _extra_lane(event: Any) -> object:
    """The lane of an event whose model has no ``stream_id`` field (an SDK before the field, openai
    < 3): the server's ``stream_id`` kept as a pydantic extra, else no lane (None). A model with the
    field has it in its ``__dict__`` (None when absent), and then no extra is looked up."""
    extra = getattr(event, "__pydantic_extra__", None)
    return extra.get("stream_id") if extra else None


def event_parser(
    gate: Any, parse: Callable[[Any, Any], Any], connection: Callable[[], Any], stamps: Stamps, turns: Turns
) -> Callable[[Any], Any]:
    """The connection's own ``parse_event`` (:func:`.hooks._fast_path`): the stamp's pairing, the
    SDK's parse, then the event to its turn, a token event of the usual kind in this frame.

    The usual event of a turn is a delta of a channel the turn has already seen (its first token is
    past), without content capture (``Turn.fast``): for that one, :func:`.streams._on_chunk` with the
    observer comes down to a few sums, because a WebSocket turn's events are timed by their arrivals
    (asked for at the previous arrival, handed over at this one: ``doubt_ns`` stays 0 and with it every
    ``*_doubt_ns``) and no body read is counted (``reads``, ``read_ns`` stay 0). Those sums are kept on
    the turn and settled into its stream state before anything reads it (:func:`.turns.settle`); an
    observed gap (the server's pace) is recorded at once. Any other event goes to
    :func:`on_event`. The two paths are pinned to the same results by tests/websocket/test_fused_events.py."""
    lanes = turns.lanes
    channels = DELTA_CHANNELS
    popleft, appendleft = stamps.popleft, stamps.appendleft
    blocked_ns = BLOCKED_NS

    def parse_event(data: Any) -> Any:
        owner = connection()
        if not gate._active or owner is None:
            return parse(owner, data)
        arrival = 0
        if stamps:  # arrivals.pop, inlined (once per event): the oldest stamp, if it is this message's
            try:
                arrival, size = popleft()
                if size != len(data):  # a message without a stamp (queued before install): a later one's
                    appendleft((arrival, size))
                    arrival = 0
            except Exception:
                arrival = 0
        event = parse(owner, data)
        handover = clock()
        if not arrival:
            arrival = handover
        try:  # the usual event: a delta of a token channel the turn has seen, on an open turn's lane
            fields = event.__dict__
            channel = channels[fields["type"]]
            fused = 0
            if fields["delta"]:
                lane = fields.get("stream_id", _NO_LANE)
                turn = lanes[_extra_lane(event) if lane is _NO_LANE else lane][0]
                fused = channel & turn.fast
        except Exception:  # another type, not a model, a field missing, no open turn: on_event decides
            fused = 0
        try:
            if fused:
                delay = handover - arrival
                turn.handover_total += delay
                if delay > turn.handover_max:
                    turn.handover_max = delay
                wait = arrival - turn.last
                if wait > blocked_ns:  # an observed gap (the last arrival is the last mark, a token's)
                    op = turn.op
                    st = op.stream
                    _add_gap(st, wait)
                    _token_gap(op, st, st.chunks + turn.pending, wait, arrival)
                    turn.paced += 1
                turn.last = arrival
                turn.pending += 1
                return event
            on_event(turns, event, arrival, handover)
        except Exception:
            report("websocket event")
        return event

    return parse_event

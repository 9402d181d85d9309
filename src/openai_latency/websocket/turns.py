"""Turns on a WebSocket connection: each one an :class:`~..operation.Operation` fed by the events the
caller receives, timed by their arrival.

A turn (a Responses ``response.create``, a Realtime model response) is an ordinary streaming
operation: its :class:`~..timeline.Timeline` gets one attempt that starts when its frame was written
(the start of ``network_wait``) and whose "headers" are ``response.created``; its events go through
the SSE streams' own chunk bookkeeping (:func:`..streams._on_chunk`, the observers of
:data:`..streams.OBSERVERS`) with each event's *arrival* (stamped in the websockets reader:
:mod:`.arrivals`) as its hand-over, and the previous arrival as the moment it was asked for. So every
arrival is observed, no doubt is ever added, and TTFT, the first answer token, reasoning, TPOT, gaps
and stalls follow the stream rules unchanged (:mod:`..token_times`), whatever the caller's pace. The
time from arrival to the caller's hand-over is summed apart (``openai_latency.websocket.handover_delay.*``).

:class:`Turns` holds one connection's turns in lanes (Responses ``stream_id``, FIFO within a lane). It
is also what :func:`..deferred.watch` ends when the connection is garbage collected: its open turns
then end ``abandoned`` at their last activity, on deferred's worker thread.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.trace import Link, SpanContext

from .. import semconv as sc
from .._guard import guarded
from ..call.operation import Operation
from ..call.summary import measurements
from ..call.timeline import Phase, Timeline
from ..clock import seconds
from ..content.capture import ContentCapture, capture_request
from ..content.realtime_input import TurnInput
from ..hooks.streams import _on_chunk  # the SSE streams' per-chunk bookkeeping, reused as it is
from ..model import Attributes, Observer, OperationKind, StreamStats, Telemetry


class WsTimeline(Timeline):
    """A turn's phases: the stream's, without the HTTP attempt's ``http.request.resend_count``; with
    ``build`` False (Realtime) no ``request_build``: the turn starts at its trigger."""

    __slots__ = ()
    build = True

    def phases(self, http_subphases: bool) -> list[Phase]:
        out = []
        for phase in Timeline.phases(self, False):
            if phase.name == "request_build" and not self.build:
                continue
            phase.attributes.pop(sc.HTTP_REQUEST_RESEND_COUNT, None)
            out.append(phase)
        return out


class TriggeredTimeline(WsTimeline):
    __slots__ = ()
    build = False


class WsOperation(Operation):
    """An operation that also records ``openai_latency.time_to_first_audio`` (Realtime)."""

    time_to_first_audio: float | None = None

    def _record_metrics(self, phases: list[Phase], summary: Attributes) -> None:
        metrics = self.telemetry.metrics
        if metrics is None:
            return
        phase_metrics = self.telemetry.settings.phase_metrics
        m = measurements(self.timeline, self.stream, phases, summary, self.attributes, phase_metrics)
        if self.time_to_first_audio is not None:
            m.server = [*m.server, ("time_to_first_audio", self.time_to_first_audio)]
        metrics.record(m, self.context)


class Turn:
    __slots__ = (
        "cancelled",
        "fast",
        "first_audio_ns",
        "handover_max",
        "handover_total",
        "input",
        "last",
        "observe",
        "op",
        "paced",
        "pending",
        "response_id",
    )

    def __init__(self, op: WsOperation) -> None:
        self.op = op
        self.observe: Observer | None = None
        """The connection's observer extended to collect the turn's text (content capture on)."""
        self.response_id: str | None = None
        self.first_audio_ns = 0
        self.handover_max = 0
        self.handover_total = 0
        self.cancelled = False
        self.input: TurnInput | None = None
        """A Realtime turn's input content (content capture on: :mod:`..content.realtime_input`)."""
        self.fast = 0
        """The token channels whose further events :func:`.responses.event_parser` counts in its own
        frame: the stream's channels once a token came, 0 with content capture (its observer reads
        every event)."""
        self.pending = 0
        self.paced = 0
        self.last = 0
        """Token events counted there and not yet in the stream's state (:func:`settle`), those of
        them that came after an observed gap (the others were buffered), and the latest arrival."""


def open_operation(
    telemetry: Telemetry,
    kind: OperationKind,
    name: str,
    attributes: Attributes,
    start_ns: int,
    link: SpanContext | None,
    triggered: bool,
) -> WsOperation:
    """A turn's operation, its span a child of the current span, linked to its handshake's."""
    attributes[sc.OPENAI_LATENCY_TRANSPORT] = "websocket"
    links: Sequence[Link] = (Link(link),) if link is not None and link.is_valid else ()
    op = WsOperation(telemetry, kind, name, attributes, start_ns, links=links)
    op.timeline = (TriggeredTimeline if triggered else WsTimeline)(start_ns=start_ns)
    op.timeline.streaming = True
    return op


@guarded()
def capture_content(
    turn: Turn, telemetry: Telemetry, observe: Observer, request: Mapping[str, Any] | None
) -> None:
    """Content capture for the turn when the setting is on (off by default: nothing here runs): the
    request's values (a Responses ``response.create``'s fields, as for ``responses.create``) and its
    output text, within ``content_max_length``. Realtime (``request`` None): the output's text and
    transcript (never audio); its input is the session's (:mod:`..content.realtime_input`, set on
    ``Turn.input`` by the session)."""
    settings = telemetry.settings
    if settings.capture_content == "no_content":
        return
    op = turn.op
    if request is not None:
        op.content = capture_request(telemetry, op.kind, request)
        stream_kind = "responses"
    else:
        op.content = ContentCapture(
            settings.capture_content, settings.content_max_length, telemetry.logger, op.kind.api_type
        )
        stream_kind = "realtime"
    if op.content is not None:
        turn.observe = op.content.observer(observe, stream_kind)


def frame_written(op: Operation, now: int) -> None:
    """The turn's frame left at ``now``: its network_wait starts (at most once)."""
    timeline = op.timeline
    if not timeline.attempts:
        timeline.begin_attempt(now, None)
        timeline.returned_ns = now
        op.stream.last_activity_ns = now


def settle(turn: Turn) -> None:
    """The token events :func:`.responses.event_parser` counted on the turn, into its stream state, as
    :func:`..streams._on_chunk` would have put them one by one: anything that reads the state settles
    it first. Their waits add up to the last arrival minus the one before them."""
    pending = turn.pending
    if pending:
        st = turn.op.stream
        st.chunks += pending
        st.token_chunks += pending
        st.buffered_chunks += pending - turn.paced
        st.wait_ns += turn.last - st.last_activity_ns
        st.last_activity_ns = st.last_mark_ns = st.last_token_ns = turn.last
        turn.pending = turn.paced = 0


def end(turn: Turn, end_ns: int, end_state: str, error: BaseException | None = None) -> None:
    """The turn is over: its handover figures, then the operation's one finish."""
    settle(turn)
    op = turn.op
    results = op.result_attributes
    results[sc.OPENAI_LATENCY_WEBSOCKET_HANDOVER_MAX] = seconds(turn.handover_max)
    results[sc.OPENAI_LATENCY_WEBSOCKET_HANDOVER_TOTAL] = seconds(turn.handover_total)
    if turn.first_audio_ns:
        ttfa = seconds(turn.first_audio_ns - op.timeline.start_ns)
        results[sc.OPENAI_LATENCY_TIME_TO_FIRST_AUDIO] = ttfa
        op.time_to_first_audio = ttfa
    if turn.input is not None and op.content is not None:
        _apply_input(turn.input, op.content)
    op.finish(end_ns=end_ns, error=error, end_state=end_state)


@guarded()
def _apply_input(turn_input: TurnInput, content: ContentCapture) -> None:
    turn_input.apply(content)


class Turns:
    """One connection's open turns, by lane; the connection's :class:`..deferred.Ending` too."""

    def __init__(self, observe: Observer) -> None:
        self.lanes: dict[object, deque[Turn]] = {}
        self.lock = threading.Lock()
        self.observe = observe
        self.stream = StreamStats()  # deferred's "last activity": unused, each turn keeps its own

    # -- deferred.Ending ----------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return not any(self.lanes.values())

    def finish(self, end_ns: int, *, end_state: str) -> None:
        """The connection was collected (or the process exits): every open turn ends ``end_state``."""
        for turn in self.drain():
            settle(turn)
            end(turn, turn.op.stream.last_activity_ns or end_ns, end_state)

    # -- turns --------------------------------------------------------------------------------------

    def add(self, lane: object, turn: Turn) -> None:
        with self.lock:
            self.lanes.setdefault(lane, deque()).append(turn)

    def remove(self, turn: Turn, lane: object) -> None:
        with self.lock:
            turns = self.lanes.get(lane)
            if turns is not None and turn in turns:
                turns.remove(turn)

    def drain(self) -> list[Turn]:
        with self.lock:
            turns = [turn for lane in self.lanes.values() for turn in lane]
            self.lanes.clear()
        return turns

    def end_all(self, end_ns: int, end_state: str, error: BaseException | None = None) -> None:
        for turn in self.drain():
            if turn.cancelled:  # the caller asked for a cancel (a barge-in): not an error
                end(turn, end_ns, "cancelled")
            else:
                end(turn, end_ns, end_state, error)


def feed(turns: Turns, turn: Turn, event: Any, arrival: int, handover: int) -> None:
    """One event of ``turn``: arrived at ``arrival``, handed to the caller at ``handover``."""
    op = turn.op
    st = op.stream
    delay = handover - arrival
    turn.handover_total += delay
    if delay > turn.handover_max:
        turn.handover_max = delay
    _on_chunk(op, turn.observe or turns.observe, event, st.last_activity_ns or arrival, arrival)


def created(turn: Turn, arrival: int) -> None:
    """``response.created`` arrived: network_wait ends (the stream state settled first: the frame's
    write may set its last activity)."""
    settle(turn)
    frame_written(turn.op, turn.op.timeline.start_ns)  # handed over before send() returned: no build
    attempt = turn.op.timeline.attempts[-1]
    if not attempt.headers_ns:
        attempt.headers_ns = arrival
        attempt.end_ns = arrival

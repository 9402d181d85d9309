"""Responses WebSocket mode: a connection's own ``parse_event`` (:func:`.responses.event_parser`, a
token event's bookkeeping in its own frame) gives exactly what the general path gives
(:func:`.responses.on_event`: ``streams._on_chunk`` with the SSE observer) for the same events at the
same instants: the turn's stream state, its span (attributes, phases, events) and its metric points."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openai_latency.config import load_settings
from openai_latency.metrics import Metrics
from openai_latency.model import Telemetry
from openai_latency.websocket import responses
from openai_latency.websocket.turns import Turns, settle
from tests.websocket.support import require_responses_ws

require_responses_ws()

MS = 1_000_000
T0 = 5_000_000_000_000  # a clock reading of a machine up for a while (big integers, as in real runs)

Step = tuple[dict[str, Any] | str, int, int]
"""A message (its JSON fields, or raw text), its arrival stamp (0: none) and its hand-over."""


def _parse(owner: Any, data: Any) -> Any:
    """The SDK's own parse of a Responses server event (``ResponsesConnection.parse_event``)."""
    from openai._models import construct_type_unchecked
    from openai.types.responses import ResponsesServerEvent

    return construct_type_unchecked(value=json.loads(data), type_=ResponsesServerEvent)


class _Connection:
    """What the turns use of an SDK connection (weakly referenced: collected, its turns end)."""

    def __init__(self) -> None:
        self._connection = SimpleNamespace()


class Side:
    """One connection with its own telemetry: its turns fed by one of the two paths."""

    def __init__(self, fused: bool, content: str = "no_content") -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider(shutdown_on_exit=False)  # no atexit hold: collected after the test
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        meter = MeterProvider(metric_readers=[self.metrics], shutdown_on_exit=False).get_meter("test")
        settings = load_settings({"stall_threshold": 0.05, "capture_content": content}, environ={})
        self.telemetry = Telemetry(tracer_provider.get_tracer("test"), Metrics(meter), settings)
        self.connection = _Connection()
        self.fused = fused
        self.stamps: deque[tuple[int, int]] = deque()
        self.turns: Turns | None = None
        self.parser: Any = None
        self.now = 0

    def create(self, at: int, **fields: Any) -> None:
        event = {"type": "response.create", "model": "gpt-4o-mini", "input": "hi", **fields}
        started = responses.begin(self.telemetry, self.connection, event, at)
        assert started is not None
        responses.sent(started, at + MS)
        self.turns = started[0]
        if self.parser is None:
            gate = SimpleNamespace(_active=True)
            self.parser = responses.event_parser(
                gate, _parse, lambda: self.connection, self.stamps, self.turns
            )

    def receive(self, message: dict[str, Any] | str, arrival: int, handover: int) -> None:
        data = (message if isinstance(message, str) else json.dumps(message)).encode()
        assert self.turns is not None
        if not self.fused:
            responses.on_event(self.turns, _parse(None, data), arrival or handover, handover)
            return
        if arrival:
            self.stamps.append((arrival, len(data)))
        self.now = handover
        self.parser(data)

    def state(self) -> list[Any]:
        """Each open turn's stream state and figures (before the end), settled as any reader of it
        settles it (the fused path keeps its sums on the turn until then)."""
        assert self.turns is not None
        for lane in self.turns.lanes.values():
            for turn in lane:
                settle(turn)
        return [
            (t.op.stream, t.response_id, t.handover_total, t.handover_max, t.op.timeline.first_token_ns)
            for lane in self.turns.lanes.values()
            for t in lane
        ]

    def ended(self, end_ns: int) -> tuple[list[Any], list[Any]]:
        """Every turn ended (open ones ``closed_early``): the spans and metric points."""
        assert self.turns is not None
        self.turns.end_all(end_ns, "closed_early")
        return [_span(s) for s in self.spans.get_finished_spans()], _points(self.metrics)


def _no_doubt(side: Side) -> None:
    """A WebSocket turn's arrivals are all observed: no doubt, which the fused path does not keep."""
    for stream, *_ in side.state():
        assert stream.doubt_ns == stream.first_token_doubt_ns == stream.last_token_doubt_ns == 0


def _span(span: ReadableSpan) -> tuple[Any, ...]:
    events = [
        (e.name, {k: v for k, v in (e.attributes or {}).items() if k != "exception.stacktrace"})
        for e in span.events
    ]
    return (
        span.name,
        dict(span.attributes or {}),
        span.start_time,
        span.end_time,
        span.status.status_code,
        events,
    )


def _points(reader: InMemoryMetricReader) -> list[Any]:
    data = reader.get_metrics_data()
    points = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    values = {
                        k: v for k, v in vars(point).items() if k not in ("exemplars", "start_time_unix_nano")
                    }
                    values.pop("time_unix_nano", None)
                    points.append((metric.name, json.dumps(values, default=str, sort_keys=True)))
    return sorted(points)


def _delta(kind: str = "response.output_text.delta", text: str = " tok", **extra: Any) -> dict[str, Any]:
    fields = {"sequence_number": 1, "item_id": "msg_1", "output_index": 0, "content_index": 0, "logprobs": []}
    return {"type": kind, **fields, "delta": text, **extra}


def _created(response_id: str = "resp_1", **extra: Any) -> dict[str, Any]:
    response = {"id": response_id, "status": "in_progress", "model": "gpt-4o-mini"}
    return {"type": "response.created", "sequence_number": 0, "response": response, **extra}


def _final(status: str = "completed", response_id: str = "resp_1", **extra: Any) -> dict[str, Any]:
    usage = {"input_tokens": 3, "output_tokens": 9, "total_tokens": 12}
    response: dict[str, Any] = {"id": response_id, "status": status, "model": "gpt-4o-mini", "usage": usage}
    if status == "failed":
        response["error"] = {"code": "server_error", "message": "boom"}
    return {"type": f"response.{status}", "sequence_number": 99, "response": response, **extra}


def _paced(events: list[dict[str, Any] | str], gaps_ms: list[float], start: int = T0) -> Iterator[Step]:
    """``events`` arriving ``gaps_ms`` apart (cycled), each handed over 40 µs to 3 ms later."""
    at = start
    for index, event in enumerate(events):
        at += int(gaps_ms[index % len(gaps_ms)] * MS)
        yield event, at, at + 40_000 + (index * 7_919 % 3_000_000)


REASONING = "response.reasoning_text.delta"
SUMMARY = "response.reasoning_summary_text.delta"
SCENARIOS: dict[str, list[Step]] = {
    "answer_buffered": list(_paced([_created(), *[_delta()] * 30, _final()], [0.01, 0.3, 1.9])),
    "answer_paced_with_stalls": list(_paced([_created(), *[_delta()] * 30, _final()], [25, 3, 0.2, 80, 2.5])),
    "reasoning_summary_answer": list(
        _paced(
            [_created(), *[_delta(REASONING)] * 8, *[_delta(SUMMARY)] * 5, *[_delta()] * 8, _final()],
            [0.5, 12, 60, 0.01],
        )
    ),
    "answer_then_reasoning_again": list(
        _paced([_created(), _delta(), _delta(REASONING), _delta(), _delta(REASONING), _final()], [3, 0.1])
    ),
    "odd_events": list(
        _paced(
            [
                _delta(),  # before response.created
                _created(),
                _delta(text=""),  # an empty delta: no token
                '{"type": "response.output_text.delta"}',  # no delta field
                _delta(),
                _delta("response.brand_new.delta"),  # an unknown delta type: the general path
                _delta(stream_id="elsewhere"),  # a lane without turns
                '{"type": ["not", "a", "string"], "delta": "x"}',
                "[1, 2, 3]",
                '{"no_type": true}',
                _delta("response.function_call_arguments.delta"),
                _delta("response.audio.transcript.delta"),
                _delta(),
                _final("incomplete"),
                _delta(),  # after the turn's end
            ],
            [4, 0.05],
        )
    ),
    "out_of_order_and_unstamped": [
        (_created(), T0 + 10 * MS, T0 + 11 * MS),
        (_delta(), T0 + 20 * MS, T0 + 21 * MS),
        (_delta(), T0 + 15 * MS, T0 + 22 * MS),  # stamped before the previous one
        (_delta(), 0, T0 + 30 * MS),  # no stamp: the hand-over
        (_delta(), T0 + 29 * MS, T0 + 31 * MS),
        (_delta(), T0 + 29 * MS, T0 + 31 * MS),  # the same instant
        (_delta(), T0 + 200 * MS, T0 + 200 * MS),
        (_final(), T0 + 210 * MS, T0 + 211 * MS),
    ],
    "error_event_mid_turn": list(
        _paced(
            [
                _created(),
                *[_delta()] * 5,
                {
                    "type": "error",
                    "sequence_number": 7,
                    "error": {"type": "rate_limit_exceeded", "code": "x"},
                },
            ],
            [6, 0.2],
        )
    ),
    "response_failed": list(_paced([_created(), *[_delta()] * 4, _final("failed")], [1, 30])),
    "left_open": list(_paced([_created(), *[_delta(REASONING)] * 3, *[_delta()] * 3], [2.5, 1.5])),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("content", ["no_content", "span_only"])
@pytest.mark.parametrize("every", [1, 5])
def test_the_fused_path_gives_what_the_general_path_gives(
    name: str, content: str, every: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The states compared after every event, or after every fifth (the fused path's sums settled
    from several events at once)."""
    general, fused = Side(fused=False, content=content), Side(fused=True, content=content)
    monkeypatch.setattr(responses, "clock", lambda: fused.now)
    for side in (general, fused):
        side.create(T0)
    for index, (message, arrival, handover) in enumerate(SCENARIOS[name]):
        for side in (general, fused):
            side.receive(message, arrival, handover)
        if index % every == every - 1:
            assert fused.state() == general.state()
        _no_doubt(general)
    end_ns = SCENARIOS[name][-1][2] + MS
    spans, points = general.ended(end_ns)
    assert fused.ended(end_ns) == (spans, points)
    assert spans and points


def test_two_lanes_and_two_turns_in_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turns of two lanes interleaved, then a second turn on the first lane."""
    general, fused = Side(fused=False), Side(fused=True)
    monkeypatch.setattr(responses, "clock", lambda: fused.now)
    a = [
        _created("resp_a", stream_id="a"),
        *[_delta(stream_id="a")] * 6,
        _final(response_id="resp_a", stream_id="a"),
    ]
    b = [_created("resp_b", stream_id="b"), *[_delta(REASONING, stream_id="b")] * 7]
    for side in (general, fused):
        side.create(T0, stream_id="a")
        side.create(T0 + MS, stream_id="b")
    steps = list(_paced([x for pair in zip(a, b, strict=True) for x in pair], [0.3, 5, 0.02]))
    for side in (general, fused):
        side.create(steps[-1][2] + MS, stream_id="a")
    steps += _paced(
        [_created("resp_c", stream_id="a"), *[_delta(stream_id="a")] * 4], [3], steps[-1][2] + 2 * MS
    )
    for message, arrival, handover in steps:
        for side in (general, fused):
            side.receive(message, arrival, handover)
        assert fused.state() == general.state()
    end_ns = steps[-1][2] + MS
    assert fused.ended(end_ns) == general.ended(end_ns)


def test_the_fused_path_takes_the_usual_token_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a vacuous equality: the fused side's deltas after the first never reach ``on_event``."""
    side = Side(fused=True)
    seen: list[str] = []
    real = responses.on_event
    monkeypatch.setattr(
        responses, "on_event", lambda turns, event, *a: (seen.append(event.type), real(turns, event, *a))
    )
    monkeypatch.setattr(responses, "clock", lambda: side.now)
    side.create(T0)
    for message, arrival, handover in _paced(
        [_created(), *[_delta()] * 5, _delta(REASONING), _delta(REASONING)], [1]
    ):
        side.receive(message, arrival, handover)
    assert seen == ["response.created", "response.output_text.delta", REASONING]
    assert side.state()[0][0].token_chunks == 7

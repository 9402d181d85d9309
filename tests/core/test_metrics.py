"""Metrics (README "Metrics") read back from an InMemoryMetricReader, checked against the exported spans.

Bucket boundaries are written out here from the GenAI semantic conventions (gen-ai-metrics.md), not
imported from the code under test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint, Metric, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan

from openai_latency.call.summary import MAX_GAP_POINTS
from tests.support.otel_capture import Full
from tests.support.span_checks import attrs

SEMCONV_DURATION = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
SEMCONV_TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
SERVER_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
SERVER_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]

# name -> (unit, bucket boundaries or None for the counter)
INSTRUMENTS: dict[str, tuple[str, list[float] | None]] = {
    "gen_ai.client.operation.duration": ("s", SEMCONV_DURATION),
    "gen_ai.client.token.usage": ("{token}", SEMCONV_TOKENS),
    "gen_ai.client.operation.time_to_first_chunk": ("s", SEMCONV_DURATION),
    "gen_ai.client.operation.time_per_output_chunk": ("s", SEMCONV_DURATION),
    "openai_latency.time_to_first_token": ("s", SERVER_TTFT),
    "openai_latency.time_to_first_answer_token": ("s", SERVER_TTFT),
    "openai_latency.reasoning.duration": ("s", SEMCONV_DURATION),
    "openai_latency.time_per_output_token": ("s", SERVER_TPOT),
    "openai_latency.phase.duration": ("s", None),
    "openai_latency.retries": ("{retry}", None),
}
NOT_RECORDED = {"openai_latency.retries", "openai_latency.reasoning.duration"}
"""What a plain stream and a plain call without a retry record no point in: no retry, no thinking."""
LOW_CARDINALITY = {
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "server.address",
    "server.port",
    "error.type",
    "gen_ai.token.type",
    "openai_latency.phase",
    "openai_latency.transport",  # http or websocket (DESIGN §11)
}
MESSAGES = [{"role": "user", "content": "hello there"}]
STREAM_SCRIPT = {"x-fake-chunks": "6", "x-fake-chunk-delay-ms": "15", "x-fake-ttft-ms": "20"}
EPS = 1e-9


def _client(server: Any, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", **kwargs)


def _stream_then_plain(client: openai.OpenAI) -> None:
    """A scripted stream (gpt-4o-mini, with usage) and a non-stream call (gpt-4o): two attribute sets."""
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=STREAM_SCRIPT,
    )
    for _ in stream:
        pass
    client.chat.completions.create(model="gpt-4o", messages=MESSAGES)


def _points(metric: Metric, model: str) -> list[Any]:
    return [
        p for p in metric.data.data_points if p.attributes and p.attributes["gen_ai.request.model"] == model
    ]


def _one(metric: Metric, model: str, **extra: str) -> HistogramDataPoint:
    points = [p for p in _points(metric, model) if all(p.attributes[k] == v for k, v in extra.items())]
    assert len(points) == 1, (metric.name, model, extra, points)
    point = points[0]
    assert isinstance(point, HistogramDataPoint)
    return point


def _span_seconds(span: ReadableSpan) -> float:
    assert span.start_time is not None and span.end_time is not None
    return (span.end_time - span.start_time) / 1e9


def _phase_spans(full_: Full, op: ReadableSpan) -> list[ReadableSpan]:
    """The phase spans of ``op`` and their http.* children."""
    phases = full_.captured.phases(op)
    return phases + [child for phase in phases for child in full_.captured.children(phase)]


LINKED = {
    "gen_ai.client.operation.duration",
    "gen_ai.client.operation.time_to_first_chunk",
    "openai_latency.time_to_first_token",
    "openai_latency.time_to_first_answer_token",
    "openai_latency.reasoning.duration",
    "openai_latency.time_per_output_token",
    "openai_latency.phase.duration",
}
"""The instruments whose points carry an exemplar (the operation span's trace and span id)."""


def _linked(metric: Metric) -> bool:
    """Some point of ``metric`` has an exemplar that links to a trace (the fixture's meter offers
    every point to the reservoir: AlwaysOnExemplarFilter; only a point recorded in a span's context
    links to it)."""
    return any(e.trace_id is not None for point in metric.data.data_points for e in point.exemplars)


def _check_exemplars(metric: Metric, op: ReadableSpan) -> None:
    model = attrs(op)["gen_ai.request.model"]
    for point in _points(metric, model):
        assert point.exemplars, (metric.name, dict(point.attributes))
        for exemplar in point.exemplars:
            assert exemplar.trace_id == op.context.trace_id, metric.name
            assert exemplar.span_id == op.context.span_id, metric.name


def test_every_instrument_after_a_stream_and_a_non_stream_call(
    full: Callable[..., Full], server: Any
) -> None:
    cap = full(phase_spans="detailed", phase_metrics=True)  # everything on
    _stream_then_plain(_client(server, max_retries=0))
    stream_op, plain_op = cap.captured.operations()
    s, p = attrs(stream_op), attrs(plain_op)
    assert s["gen_ai.request.stream"] is True and p["gen_ai.request.stream"] is False
    metrics = cap.metrics()

    # units and bucket boundaries
    assert set(metrics) == set(INSTRUMENTS) - NOT_RECORDED  # no retry happened, nothing was reasoned
    for name, metric in metrics.items():
        unit, buckets = INSTRUMENTS[name]
        assert metric.unit == unit, name
        if buckets is not None:
            for point in metric.data.data_points:
                assert list(point.explicit_bounds) == buckets, name
    phase_bounds = list(metrics["openai_latency.phase.duration"].data.data_points[0].explicit_bounds)
    assert phase_bounds[-len(SEMCONV_DURATION) :] == SEMCONV_DURATION and phase_bounds[0] < 0.001

    # low-cardinality attributes only: never ids, never content
    forbidden = {
        s["gen_ai.response.id"],
        s["openai_latency.request_id"],
        p["gen_ai.response.id"],
        "hello there",
    }
    for metric in metrics.values():
        for point in metric.data.data_points:
            assert set(point.attributes) <= LOW_CARDINALITY, (metric.name, dict(point.attributes))
            assert not forbidden & {str(v) for v in point.attributes.values()}
            assert point.attributes["gen_ai.operation.name"] == "chat"
            assert point.attributes["gen_ai.provider.name"] == "openai"
            assert point.attributes["server.address"] == "127.0.0.1"

    # operation.duration: one point per call, sum = the span's duration
    duration = metrics["gen_ai.client.operation.duration"]
    for op in (stream_op, plain_op):
        point = _one(duration, attrs(op)["gen_ai.request.model"])
        assert point.count == 1
        assert point.sum == pytest.approx(_span_seconds(op), abs=EPS)
        assert point.attributes["gen_ai.response.model"] == attrs(op)["gen_ai.response.model"]

    # token usage: input and output of both calls, equal to the span's usage attributes
    usage = metrics["gen_ai.client.token.usage"]
    for op in (stream_op, plain_op):
        a = attrs(op)
        for token_type, key in (
            ("input", "gen_ai.usage.input_tokens"),
            ("output", "gen_ai.usage.output_tokens"),
        ):
            point = _one(usage, a["gen_ai.request.model"], **{"gen_ai.token.type": token_type})
            assert point.count == 1 and point.sum == a[key] > 0
    assert s["gen_ai.usage.output_tokens"] == 6

    # stream-only instruments: nothing for the non-stream call
    for name, key in (
        ("gen_ai.client.operation.time_to_first_chunk", "gen_ai.response.time_to_first_chunk"),
        ("openai_latency.time_to_first_token", "openai_latency.time_to_first_token"),
        ("openai_latency.time_per_output_token", "openai_latency.time_per_output_token"),
    ):
        assert not _points(metrics[name], "gpt-4o"), name
        point = _one(metrics[name], "gpt-4o-mini")
        assert point.count == 1 and point.sum == pytest.approx(s[key], abs=EPS), name

    # time_per_output_chunk: observed server-side gaps (at most MAX_GAP_POINTS per stream, spread
    # evenly), never the caller's time
    chunk = metrics["gen_ai.client.operation.time_per_output_chunk"]
    assert not _points(chunk, "gpt-4o")
    point = _one(chunk, "gpt-4o-mini")
    observed = s["openai_latency.stream.chunks"] - 1 - s["openai_latency.stream.buffered_chunks"]
    assert point.count == min(observed, MAX_GAP_POINTS)
    assert point.count >= 5  # 15 ms between content chunks: each next() blocked
    # semconv: a point per chunk after the first, so the role-only chunk -> first token wait is one;
    # stream.max_gap is the pace between tokens only (issue 25): the first token's wait is first_token's
    assert point.max <= max(s["openai_latency.stream.max_gap"], s["openai_latency.phase.first_token"]) + EPS
    assert point.sum <= s["openai_latency.stream.wait_time"] + s["openai_latency.stream.consumer_time"] + EPS

    # phase.duration: one point per phase span (http.* sub-phases included), sums = span durations
    phase_metric = metrics["openai_latency.phase.duration"]
    for op in (stream_op, plain_op):
        model = attrs(op)["gen_ai.request.model"]
        expected: dict[str, list[float]] = {}
        for span in _phase_spans(cap, op):
            expected.setdefault(attrs(span)["openai_latency.phase"], []).append(_span_seconds(span))
        assert {"request_build", "network_wait", "send", "server_wait"} <= set(expected)
        got = {pt.attributes["openai_latency.phase"]: pt for pt in _points(phase_metric, model)}
        assert set(got) == set(expected), model
        for phase, seconds in expected.items():
            assert got[phase].count == len(seconds), (model, phase)
            assert got[phase].sum == pytest.approx(sum(seconds), abs=EPS), (model, phase)
            top = attrs(op).get(f"openai_latency.phase.{phase}")
            if top is not None:  # the span's per-phase summary attribute
                assert got[phase].sum == pytest.approx(top, abs=EPS)
    assert "stream_drain" in {
        pt.attributes["openai_latency.phase"] for pt in _points(phase_metric, "gpt-4o-mini")
    }
    assert "response_read" in {
        pt.attributes["openai_latency.phase"] for pt in _points(phase_metric, "gpt-4o")
    }

    # the latency points link to each call's operation span (exemplars); the others offer none
    for name, metric in metrics.items():
        if name in LINKED:
            _check_exemplars(metric, stream_op)
            _check_exemplars(metric, plain_op)
        else:
            assert not _linked(metric), name


# the fake server's bodies for these statuses carry OpenAI's codes
@pytest.mark.parametrize(("status", "error_type"), [("429", "rate_limit_exceeded"), ("503", "overloaded")])
def test_retries_are_counted_with_the_retried_attempts_error_type(
    full: Callable[..., Full], server: Any, status: str, error_type: str
) -> None:
    cap = full()
    client = _client(server, max_retries=3)
    script = {"x-fake-fail-attempts": "2", "x-fake-fail-status": status, "x-fake-retry-after-ms": "5"}
    client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, extra_headers=script)
    op = cap.captured.operation()
    assert attrs(op)["http.request.resend_count"] == 2
    failed = [attrs(s) for s in cap.captured.phases(op) if s.name == "openai.network_wait"][:-1]
    assert [a["error.type"] for a in failed] == [error_type, error_type]

    retries = cap.metrics()["openai_latency.retries"]
    assert retries.unit == "{retry}"
    points = retries.data.data_points
    assert len(points) == 1
    point = points[0]
    assert isinstance(point, NumberDataPoint)
    assert point.value == 2
    assert point.attributes["error.type"] == error_type
    assert set(point.attributes) <= LOW_CARDINALITY
    assert not _linked(retries)  # a retry count links to no trace worth opening
    # the call succeeded: its duration point carries no error.type
    (duration,) = cap.metrics()["gen_ai.client.operation.duration"].data.data_points
    assert "error.type" not in duration.attributes


def test_failed_call_duration_carries_error_type(full: Callable[..., Full], server: Any) -> None:
    cap = full()
    with pytest.raises(openai.NotFoundError):
        _client(server, max_retries=0).chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, extra_headers={"x-fake-error": "model_not_found"}
        )
    (point,) = cap.metrics()["gen_ai.client.operation.duration"].data.data_points
    assert (
        point.attributes["error.type"] == attrs(cap.captured.operation())["error.type"] == "model_not_found"
    )


def test_default_records_no_phase_points(full: Callable[..., Full], server: Any) -> None:
    """phase.duration is opt-in (OPENAI_LATENCY_PHASE_METRICS): the phase spans and the operation
    span's openai_latency.phase.* attributes carry the same durations at a fraction of the cost."""
    cap = full()
    _stream_then_plain(_client(server, max_retries=0))
    assert set(cap.metrics()) == set(INSTRUMENTS) - NOT_RECORDED - {"openai_latency.phase.duration"}
    for op in cap.captured.operations():
        assert attrs(op)["openai_latency.phase.network_wait"] > 0


def test_phase_metrics_from_the_environment(
    full: Callable[..., Full], server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_LATENCY_PHASE_METRICS", "true")
    cap = full()
    _client(server, max_retries=0).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert "openai_latency.phase.duration" in cap.metrics()


@pytest.mark.parametrize("phase_spans", ["off", "phases"])
def test_phase_span_setting_keeps_every_metric(
    full: Callable[..., Full], server: Any, phase_spans: str
) -> None:
    cap = full(phase_spans=phase_spans, phase_metrics=True)
    _stream_then_plain(_client(server, max_retries=0))
    stream_op, plain_op = cap.captured.operations()
    if phase_spans == "off":
        assert len(cap.captured.spans()) == 2  # the two operation spans, no phase spans
    else:
        assert not any(s.name.startswith("http.") for s in cap.captured.spans())
    metrics = cap.metrics()
    assert set(metrics) == set(INSTRUMENTS) - NOT_RECORDED
    phase_metric = metrics["openai_latency.phase.duration"]
    for op, last in ((stream_op, "stream_drain"), (plain_op, "response_read")):
        model = attrs(op)["gen_ai.request.model"]
        names = {pt.attributes["openai_latency.phase"] for pt in _points(phase_metric, model)}
        # one point per phase; http.* sub-phase points wherever they are measured (not with off)
        assert {"request_build", "network_wait", last} <= names
        subs = names & {"pool_wait", "connect", "send", "server_wait"}
        if phase_spans == "off":
            assert not subs, names
        else:
            assert {"pool_wait", "send", "server_wait"} <= subs, names
        for name in ("request_build", "network_wait", last):
            point = _one(phase_metric, model, **{"openai_latency.phase": name})
            assert point.sum == pytest.approx(attrs(op)[f"openai_latency.phase.{name}"], abs=EPS)
        _check_exemplars(phase_metric, op)
    assert _one(metrics["gen_ai.client.operation.time_per_output_chunk"], "gpt-4o-mini").count >= 5

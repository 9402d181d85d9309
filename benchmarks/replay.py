"""The OpenTelemetry SDK's own cost of exactly what openai-latency emits for one call, without our code.

``overhead.py --modes ... replay`` runs a worker that makes each call uninstrumented and then replays,
through the same tracer and meter providers, the spans and metric points that one call of that
workload produced under ``phase_spans=phases`` (the default): the operation span with its attributes
(request attributes at start, the rest at the end), every phase span under it (``http.*`` spans under
their ``openai.network_wait``), the ``traceparent`` injection of each attempt, the context attach and
detach around the call and around each send, and every metric point with the same attributes and the
same context (the operation span's for the points that carry an exemplar, a span-less one for the
others). Ours minus replay is then what our own code costs; replay alone against the official
package's whole overhead is the floor any implementation emitting the same telemetry pays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

_START_PREFIXES = ("gen_ai.operation.", "gen_ai.request.", "gen_ai.provider.", "server.", "openai.api.")


@dataclass
class _Span:
    name: str
    attributes: dict[str, Any]
    children: list[_Span]


@dataclass
class _Point:
    instrument: str
    histogram: bool
    value: float
    attributes: dict[str, Any]
    linked: bool


@dataclass
class Template:
    """What one instrumented call emitted: the operation span's tree and the metric points."""

    name: str
    start_attributes: dict[str, Any]
    end_attributes: dict[str, Any]
    phases: list[_Span]
    points: list[_Point]


def capture(job: Callable[[], None]) -> Template:
    """Runs ``job`` once instrumented (phase_spans=phases) and keeps what it emitted."""
    from opentelemetry.sdk.metrics import AlwaysOnExemplarFilter

    from openai_latency import OpenAILatencyInstrumentor

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], exemplar_filter=AlwaysOnExemplarFilter())
    instrumentor = OpenAILatencyInstrumentor()
    instrumentor.instrument(
        tracer_provider=tracer_provider, meter_provider=meter_provider, phase_spans="phases"
    )
    try:
        job()
    finally:
        instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    (op,) = [s for s in spans if s.parent is None]
    attributes = dict(op.attributes or {})
    start = {k: v for k, v in attributes.items() if k.startswith(_START_PREFIXES)}
    end = {k: v for k, v in attributes.items() if k not in start}
    return Template(op.name, start, end, _tree(spans, op), _points(reader))


def _tree(spans: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[_Span]:
    assert parent.context is not None
    children = [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]
    children.sort(key=lambda s: s.start_time or 0)
    return [_Span(s.name, dict(s.attributes or {}), _tree(spans, s)) for s in children]


def _points(reader: InMemoryMetricReader) -> list[_Point]:
    points: list[_Point] = []
    data = reader.get_metrics_data()
    assert data is not None
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    linked = any(e.trace_id is not None for e in getattr(point, "exemplars", ()) or ())
                    attrs = dict(point.attributes or {})
                    if isinstance(point, HistogramDataPoint):
                        for _ in range(point.count):
                            points.append(_Point(metric.name, True, point.sum / point.count, attrs, linked))
                    elif isinstance(point, NumberDataPoint):
                        points.append(_Point(metric.name, False, point.value, attrs, linked))
    return points


class Replayer:
    """Replays a :class:`Template` through the given providers; one :meth:`replay` per call."""

    def __init__(
        self, template: Template, tracer_provider: TracerProvider, meter_provider: MeterProvider
    ) -> None:
        self.template = template
        self.tracer = tracer_provider.get_tracer("openai_latency")
        meter = meter_provider.get_meter("openai_latency")
        self.instruments: dict[str, Any] = {}
        for point in template.points:
            if point.instrument not in self.instruments:
                create = meter.create_histogram if point.histogram else meter.create_counter
                self.instruments[point.instrument] = create(point.instrument)
        self.unlinked = trace.set_span_in_context(trace.INVALID_SPAN)

    def replay(self) -> None:
        t = self.template
        op = self.tracer.start_span(t.name, kind=SpanKind.CLIENT, attributes=t.start_attributes)
        context = trace.set_span_in_context(op)
        token = otel_context.attach(context)  # the call runs in the operation's context
        ended = []
        for phase in t.phases:
            span = self.tracer.start_span(phase.name, context=context, attributes=phase.attributes)
            if phase.name == "openai.network_wait":  # an attempt: traceparent, and the send's context
                attempt = trace.set_span_in_context(span, context)
                propagate.inject({}, context=attempt)
                otel_context.detach(otel_context.attach(attempt))
                parent = attempt
                for child in phase.children:
                    self.tracer.start_span(child.name, context=parent, attributes=child.attributes).end()
            ended.append(span)
        otel_context.detach(token)
        for span in ended:
            span.end()
        op.set_attributes(t.end_attributes)
        op.end()
        for point in t.points:
            instrument = self.instruments[point.instrument]
            ctx = context if point.linked else self.unlinked
            if point.histogram:
                instrument.record(point.value, point.attributes, context=ctx)
            else:
                instrument.add(point.value, point.attributes, context=ctx)

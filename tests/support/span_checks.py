"""Reading exported spans back as the operation/phase tree the README draws."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openai_latency.clock import to_monotonic_ns

MS = 1_000_000


@dataclass
class Captured:
    exporter: InMemorySpanExporter
    metric_reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def operations(self) -> list[ReadableSpan]:
        """Spans that are not phases (the operation spans)."""
        return [s for s in self.spans() if s.attributes is None or "openai_latency.phase" not in s.attributes]

    def operation(self) -> ReadableSpan:
        ops = self.operations()
        assert len(ops) == 1, [s.name for s in ops]
        return ops[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        parent_id = parent.context.span_id
        return [s for s in self.spans() if s.parent is not None and s.parent.span_id == parent_id]

    def phases(self, op: ReadableSpan | None = None) -> list[ReadableSpan]:
        return self.children(op or self.operation())

    def phase_names(self, op: ReadableSpan | None = None) -> list[str]:
        return [s.name for s in self.phases(op)]

    def clear(self) -> None:
        self.exporter.clear()


def calls_in_metrics(reader: MetricReader) -> int:
    """How many calls ``reader`` has counted: the ``gen_ai.client.operation.duration`` points' counts
    (cumulative: what earlier calls recorded stays counted)."""
    data = reader.get_metrics_data()
    total = 0
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == "gen_ai.client.operation.duration":
                    total += sum(point.count for point in metric.data.data_points)
    return total


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def start_mono(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return to_monotonic_ns(span.start_time)


def end_mono(span: ReadableSpan) -> int:
    assert span.end_time is not None
    return to_monotonic_ns(span.end_time)


def duration_ns(span: ReadableSpan) -> int:
    assert span.start_time is not None and span.end_time is not None
    return span.end_time - span.start_time


def assert_close_ns(actual: int, expected: int, what: str, abs_ms: float = 3.0, rel: float = 0.03) -> None:
    """Within ±abs_ms or ±rel of expected, whichever is larger (the issue's tolerance), for durations.

    For two instants use :func:`assert_same_instant`: 3 % of a clock reading is no tolerance at all.
    """
    tolerance = max(abs_ms * MS, rel * abs(expected))
    assert abs(actual - expected) <= tolerance, (
        f"{what}: {actual / MS:.3f} ms, expected {expected / MS:.3f} ms ± {tolerance / MS:.3f} ms"
    )


def assert_same_instant(client_ns: int, server_ns: int, what: str, abs_ms: float = 3.0) -> None:
    """Two monotonic instants (client mark vs the server's log) within ±abs_ms of each other."""
    offset_ms = (client_ns - server_ns) / MS
    assert abs(offset_ms) <= abs_ms, f"{what}: the client's mark is {offset_ms:+.3f} ms from the server's"


def assert_tiles(op: ReadableSpan, phases: list[ReadableSpan], max_gap_ms: float = 0.5) -> None:
    """Phases do not overlap and cover the operation with gaps below max_gap_ms."""
    cursor = start_mono(op)
    for phase in phases:
        gap = start_mono(phase) - cursor
        assert gap >= 0, f"{phase.name} overlaps the previous phase by {-gap / MS:.3f} ms"
        assert gap < max_gap_ms * MS, f"gap of {gap / MS:.3f} ms before {phase.name}"
        cursor = end_mono(phase)
    tail = end_mono(op) - cursor
    assert 0 <= tail < max_gap_ms * MS, f"gap of {tail / MS:.3f} ms after the last phase"


def assert_same_shape(actual: Any, expected: Any, leaf: Callable[[Any, Any], None]) -> None:
    """Same dict keys and list lengths all the way down; ``leaf(actual, expected)`` checks the rest."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys()
        for key in expected:
            assert_same_shape(actual[key], expected[key], leaf)
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected)
        for item, other in zip(actual, expected, strict=True):
            assert_same_shape(item, other, leaf)
    else:
        leaf(actual, expected)

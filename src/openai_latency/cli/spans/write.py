"""Finished SDK spans -> the readers' :class:`~.span.Span`, and -> OTLP JSON lines on disk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .names import SERVICE_NAME
from .span import Span

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

#: Spans per line of the OTLP JSON file (one ExportTraceServiceRequest each), as a batch exporter writes.
BATCH = 512


class WriteError(Exception):
    """The span file could not be written (the exporter logged why)."""


def from_readable(span: ReadableSpan) -> Span:
    from opentelemetry.trace import StatusCode

    context = span.context
    parent = span.parent
    attributes: dict[str, Any] = {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in (span.attributes or {}).items()
    }
    service = span.resource.attributes.get(SERVICE_NAME) if span.resource else None
    return Span(
        trace_id=f"{context.trace_id:032x}" if context else "",
        span_id=f"{context.span_id:016x}" if context else "",
        parent_span_id=f"{parent.span_id:016x}" if parent else "",
        name=span.name,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        attributes=attributes,
        status_error=span.status.status_code is StatusCode.ERROR,
        service=None if service is None else str(service),
    )


def write_otlp_json(path: str, spans: Sequence[ReadableSpan]) -> None:
    """Append the spans to ``path`` as OTLP JSON lines (the project's file exporter), in batches;
    :class:`WriteError` when the exporter could not."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    from ...file_exporter import FileSpanExporter

    exporter = FileSpanExporter(path.replace("%", "%%"))  # the exporter's path is a strftime pattern
    try:
        for start in range(0, len(spans), BATCH):
            if exporter.export(spans[start : start + BATCH]) is not SpanExportResult.SUCCESS:
                raise WriteError(f"writing {path} failed (see the log above)")
    finally:
        exporter.shutdown()

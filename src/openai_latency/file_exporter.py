"""A span exporter that appends OTLP JSON lines to a file: traces without any backend.

``opentelemetry-instrument`` picks it by name (entry point ``opentelemetry_traces_exporter``:
``openai_latency_file``)::

    OTEL_TRACES_EXPORTER=openai_latency_file OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none \\
        opentelemetry-instrument python app.py
    openai-latency report out/otlp/

Each export (a batch of the BatchSpanProcessor) becomes one line, an ``ExportTraceServiceRequest`` in
the OTLP/JSON encoding, as the collector's file exporter writes it (hex ids, integer enums, 64-bit
integers as strings), so ``openai-latency report`` and other OTLP tools read it. The file is
``OPENAI_LATENCY_TRACES_FILE`` (default ``out/otlp/traces-%Y-%m-%d.jsonl``); ``strftime`` codes in it
are filled in at each export (local time), so the default starts a new file every day. Directories are
created. A write that fails is logged and dropped: the application never sees it.

Only the OpenTelemetry SDK is needed (no protobuf, no OTLP exporter package); the instrumentation
never imports this module. The official ``opentelemetry-exporter-otlp-json-file`` (``otlp_json_file``)
writes the same format, but under ``opentelemetry-instrument`` only to standard output, mixed with
the application's own output, and it pins an SDK release.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

ENV_FILE = "OPENAI_LATENCY_TRACES_FILE"
DEFAULT_FILE = "out/otlp/traces-%Y-%m-%d.jsonl"
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}
_logger = logging.getLogger(__name__)


class FileSpanExporter(SpanExporter):
    """Appends one OTLP JSON line per export to ``path`` (a ``strftime`` pattern)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._pattern = os.fspath(path) if path is not None else os.environ.get(ENV_FILE) or DEFAULT_FILE
        self._lock = threading.Lock()
        self._shutdown = False

    def path(self, now: float | None = None) -> Path:
        """The file an export at ``now`` (default: the current time) writes to."""
        return Path(time.strftime(self._pattern, time.localtime(now)))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            line = json.dumps(encode(spans), separators=(",", ":")) + "\n"
            path = self.path()
            with self._lock:
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a", encoding="utf-8") as handle:
                    handle.write(line)
        except Exception as exc:  # never the application's problem
            _logger.warning(
                "openai-latency: could not write %d span(s) to %s: %s", len(spans), self._pattern, exc
            )
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._shutdown = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export is written (and closed) before it returns


def encode(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` in the OTLP/JSON encoding: spans grouped by resource and scope."""
    resources: dict[int, tuple[Any, dict[tuple[str, str | None], list[dict[str, Any]]]]] = {}
    for span in spans:
        resource = span.resource
        _, scopes = resources.setdefault(id(resource), (resource, {}))
        scope = span.instrumentation_scope
        key = (scope.name, scope.version) if scope is not None else ("", None)
        scopes.setdefault(key, []).append(_span(span))
    resource_spans = []
    for resource, scopes in resources.values():
        scope_spans = []
        for (name, version), encoded in scopes.items():
            scope_json: dict[str, Any] = {"name": name}
            if version:
                scope_json["version"] = version
            scope_spans.append({"scope": scope_json, "spans": encoded})
        resource_spans.append(
            {"resource": {"attributes": _attributes(resource.attributes)}, "scopeSpans": scope_spans}
        )
    return {"resourceSpans": resource_spans}


def _span(span: ReadableSpan) -> dict[str, Any]:
    context = span.context
    result: dict[str, Any] = {
        "traceId": format(context.trace_id, "032x"),
        "spanId": format(context.span_id, "016x"),
    }
    if span.parent is not None:
        result["parentSpanId"] = format(span.parent.span_id, "016x")
    result["name"] = span.name
    result["kind"] = span.kind.value + 1  # OTLP: SPAN_KIND_INTERNAL = 1, SERVER = 2, CLIENT = 3, ...
    result["startTimeUnixNano"] = str(span.start_time or 0)
    result["endTimeUnixNano"] = str(span.end_time or span.start_time or 0)
    if span.attributes:
        result["attributes"] = _attributes(span.attributes)
    if span.events:
        result["events"] = [
            {
                "timeUnixNano": str(event.timestamp),
                "name": event.name,
                "attributes": _attributes(event.attributes),
            }
            for event in span.events
        ]
    if span.links:
        result["links"] = [
            {
                "traceId": format(link.context.trace_id, "032x"),
                "spanId": format(link.context.span_id, "016x"),
                "attributes": _attributes(link.attributes),
            }
            for link in span.links
        ]
    status: dict[str, Any] = {}
    if span.status.status_code is not StatusCode.UNSET:
        status["code"] = _STATUS[span.status.status_code]
    if span.status.description:
        status["message"] = span.status.description
    result["status"] = status
    return result


def _attributes(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in (attributes or {}).items()]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        return {"doubleValue": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [_value(item) for item in value]}}
    return {"stringValue": str(value)}

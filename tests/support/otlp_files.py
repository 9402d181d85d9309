"""Spans written as the collector's file exporter writes them, and as Jaeger's query API returns them."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode


def collector_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """What the collector's file exporter writes: protobuf JSON with hex ids and integer enums."""
    return request_json(encode_spans(spans))


def request_json(request: Message) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` (what an exporter sent) as the collector's file exporter
    writes it."""
    document: dict[str, Any] = MessageToDict(request, use_integers_for_enums=True)

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                    node[key] = base64.b64decode(value).hex()
                else:
                    fix(value)
        elif isinstance(node, list):
            for item in node:
                fix(item)

    fix(document)
    return document


def write_jsonl(
    path: Path, spans: Sequence[ReadableSpan], batch: int = 7, microseconds: bool = False
) -> Path:
    """Several export batches: an operation and its phases may land on different lines.
    ``microseconds``: times cut as Jaeger keeps them (see :func:`jaeger_times`)."""
    with path.open("w") as handle:
        for index in range(0, len(spans), batch):
            document = collector_json(spans[index : index + batch])
            if microseconds:
                for resource in document["resourceSpans"]:
                    for scope in resource["scopeSpans"]:
                        for span in scope["spans"]:
                            start, end = jaeger_times(
                                int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
                            )
                            span["startTimeUnixNano"] = str(start * 1000)
                            span["endTimeUnixNano"] = str((start + end) * 1000)
            handle.write(json.dumps(document) + "\n")
    return path


def jaeger_times(start_ns: int, end_ns: int) -> tuple[int, int]:
    """(startTime, duration) in microseconds as Jaeger stores a span: both truncated."""
    return start_ns // 1000, (end_ns - start_ns) // 1000


# ------------------------------------------------------------------------------------------- Jaeger


def _tag(key: str, value: Any) -> dict[str, Any]:
    """Jaeger's OTLP translation: typed tags; arrays become their JSON text."""
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, str):
        return {"key": key, "type": "string", "value": value}
    return {"key": key, "type": "string", "value": json.dumps(list(value))}


def jaeger_traces(spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
    """The spans as Jaeger stores and returns them (``model/json``): one trace object per trace id,
    microsecond times, CHILD_OF references, the resource as the process, status and kind as tags."""
    traces: dict[str, dict[str, Any]] = {}
    for span in spans:
        assert span.start_time is not None and span.end_time is not None
        trace_id = format(span.context.trace_id, "032x")
        trace = traces.setdefault(
            trace_id, {"traceID": trace_id, "spans": [], "processes": {}, "warnings": None}
        )
        resource = dict(span.resource.attributes)
        service = str(resource.pop("service.name", "unknown_service"))
        process = {"serviceName": service, "tags": [_tag(k, v) for k, v in sorted(resource.items())]}
        process_id = next((pid for pid, p in trace["processes"].items() if p == process), None)
        if process_id is None:
            process_id = f"p{len(trace['processes']) + 1}"
            trace["processes"][process_id] = process
        tags = [_tag(k, v) for k, v in (span.attributes or {}).items()]
        if span.kind is not SpanKind.INTERNAL:
            tags.append(_tag("span.kind", span.kind.name.lower()))
        if span.instrumentation_scope is not None:
            tags.append(_tag("otel.scope.name", span.instrumentation_scope.name))
        if span.status.status_code is StatusCode.ERROR:
            tags += [_tag("otel.status_code", "ERROR"), _tag("error", True)]
        references = []
        if span.parent is not None:
            references.append(
                {"refType": "CHILD_OF", "traceID": trace_id, "spanID": format(span.parent.span_id, "016x")}
            )
        start_us, duration_us = jaeger_times(span.start_time, span.end_time)
        trace["spans"].append({
            "traceID": trace_id,
            "spanID": format(span.context.span_id, "016x"),
            "operationName": span.name,
            "references": references,
            "startTime": start_us,
            "duration": duration_us,
            "tags": tags,
            "logs": [],
            "processID": process_id,
            "warnings": None,
        })  # fmt: skip
    return list(traces.values())


def otlp_span(name: str, start_ns: int, attributes: dict[str, Any], span_id: int) -> dict[str, Any]:
    """One span as an OTLP JSON object (400 ms long; trace and span id from ``span_id``)."""

    def value(item: Any) -> dict[str, Any]:
        if isinstance(item, bool):
            return {"boolValue": item}
        if isinstance(item, int):
            return {"intValue": str(item)}
        return {"stringValue": str(item)}

    return {
        "traceId": f"{span_id:032x}",
        "spanId": f"{span_id:016x}",
        "name": name,
        "kind": 3,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 400_000_000),
        "attributes": [{"key": k, "value": value(v)} for k, v in attributes.items()],
    }


def recorded_calls_file(folder: Path, recorded: list[tuple[float, int, int, bool]]) -> Path:
    """An OTLP JSON file of chat calls (offset, input tokens, output tokens, stream), their phase
    spans, and an embeddings call (not replayed)."""
    origin = 1_760_000_000_000_000_000
    spans = []
    for number, (offset, tokens_in, tokens_out, stream) in enumerate(reversed(recorded), start=1):
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "prod-model",
            "gen_ai.request.stream": stream,
            "gen_ai.usage.input_tokens": tokens_in,
            "gen_ai.usage.output_tokens": tokens_out,
        }
        start = origin + round(offset * 1e9)
        spans.append(otlp_span("chat prod-model", start, attributes, number))
        phase = {"openai_latency.phase": "network_wait", "gen_ai.operation.name": "chat"}
        spans.append(otlp_span("openai.network_wait", start, phase, 100 + number))
    embeddings = {"gen_ai.operation.name": "embeddings", "gen_ai.usage.input_tokens": 5}
    spans.append(otlp_span("embeddings m", origin, embeddings, 99))  # not replayed
    document = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}
    recorded = folder / "production.jsonl"
    recorded.write_text(json.dumps(document) + "\n")
    return recorded

"""The OTLP JSON reader's fast path when msgspec is installed (the ``cli`` extra): a line -> spans.

Each line is decoded straight into typed structs that hold only what a span needs (no dict per
attribute, unknown fields skipped inside the parser), then into :class:`Span`. A line of any other
shape (not JSON, a list, snake_case keys, base64 ids, no spans, a span without ids or with end before
start) returns None and is read by the general reader, so both paths give the same spans and the
same counts.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .decode import any_value, double
from .names import SERVICE_NAME
from .span import Span


class _AnyValue(msgspec.Struct):
    stringValue: str | None = None
    boolValue: bool | None = None
    intValue: int | str | None = None
    doubleValue: float | str | None = None
    arrayValue: Any = None
    kvlistValue: Any = None
    bytesValue: str | None = None


class _KeyValue(msgspec.Struct):
    key: str | None = None
    value: _AnyValue | None = None


class _Status(msgspec.Struct):
    code: int | str | None = None


class _Span(msgspec.Struct):
    traceId: str = ""
    spanId: str = ""
    parentSpanId: str = ""
    name: str = ""
    startTimeUnixNano: int | str | None = None
    endTimeUnixNano: int | str | None = None
    attributes: list[_KeyValue] = []
    status: _Status | None = None


class _ScopeSpans(msgspec.Struct):
    spans: list[_Span] = []


class _Resource(msgspec.Struct):
    attributes: list[_KeyValue] = []


class _ResourceSpans(msgspec.Struct):
    resource: _Resource | None = None
    scopeSpans: list[_ScopeSpans] = []


class _Request(msgspec.Struct):
    resourceSpans: list[_ResourceSpans] | None = None


_decode = msgspec.json.Decoder(_Request).decode


def decode_line(line: bytes) -> list[Span] | None:
    """The spans of one line (an ``ExportTraceServiceRequest``), or None: let the general reader."""
    try:
        request = _decode(line)
    except msgspec.DecodeError:  # also ValidationError: another shape
        return None
    if not request.resourceSpans:
        return None  # metrics, logs, an empty request: the general reader counts those
    result: list[Span] = []
    append = result.append
    for resource_spans in request.resourceSpans:
        service = None
        if resource_spans.resource is not None:
            for item in resource_spans.resource.attributes:
                if item.key == SERVICE_NAME:
                    found = _value(item.value)
                    service = found if isinstance(found, str) else None
        for scope in resource_spans.scopeSpans:
            for raw in scope.spans:
                trace_id, span_id, parent = raw.traceId, raw.spanId, raw.parentSpanId
                if len(trace_id) != 32 or len(span_id) != 16 or (parent and len(parent) != 16):
                    return None
                try:
                    start, end = int(raw.startTimeUnixNano), int(raw.endTimeUnixNano)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    return None
                if end < start:
                    return None
                attributes: dict[str, Any] = {}
                for item in raw.attributes:
                    key = item.key
                    if key is None:
                        continue
                    value = item.value
                    if value is None:
                        attributes[key] = None
                        continue
                    text = value.stringValue
                    if text is not None:
                        attributes[key] = text
                        continue
                    flag = value.boolValue
                    if flag is not None:
                        attributes[key] = flag
                        continue
                    whole = value.intValue  # tokens, ports, statuses: a string in OTLP JSON
                    if whole is None:
                        number = value.doubleValue  # the phases' seconds
                        attributes[key] = number if number.__class__ is float else _value(value)
                        continue
                    try:
                        attributes[key] = int(whole)
                    except ValueError:
                        attributes[key] = None
                code = raw.status.code if raw.status is not None else None
                append(
                    Span(
                        trace_id.lower(),
                        span_id.lower(),
                        parent.lower(),
                        raw.name,
                        start,
                        end,
                        attributes,
                        code == 2 or code == "STATUS_CODE_ERROR",
                        service,
                    )
                )
    return result


def _value(value: _AnyValue | None) -> Any:
    """:func:`any_value`'s answer, in its order of precedence."""
    if value is None:
        return None
    if value.stringValue is not None:
        return value.stringValue
    if value.boolValue is not None:
        return value.boolValue
    if value.intValue is not None:
        try:
            return int(value.intValue)
        except ValueError:
            return None
    if value.doubleValue is not None:
        return double(value.doubleValue)
    if value.arrayValue is not None:
        return any_value({"arrayValue": value.arrayValue})
    if value.kvlistValue is not None:
        return any_value({"kvlistValue": value.kvlistValue})
    if value.bytesValue is not None:
        return value.bytesValue
    return None

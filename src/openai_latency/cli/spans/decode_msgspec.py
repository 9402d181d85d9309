"""The OTLP JSON reader's fast path when msgspec is installed (the ``cli`` extra): a line -> spans.

Each line is decoded straight into typed structs that hold only what a span needs (no dict per
attribute, unknown fields skipped inside the parser), then into :class:`Span`. The structs are not
tracked by the cyclic garbage collector (``gc=False``: they hold no cycles), and the decoder is lax
(``strict=False``): OTLP JSON's integers written as strings (times, ``intValue``) and doubles
written as ``"NaN"``/``"Infinity"`` are parsed in C. A line of any other shape (not JSON, a list,
snake_case keys, base64 ids, no spans, a span without ids or with end before start, a string that
is no number, a ``kvlistValue`` or ``bytesValue``, an attribute without its key or its value)
returns None and is read by the general reader, so both paths give the same spans and the same
counts (tests/cli/spans/test_decode.py).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .names import SERVICE_NAME
from .span import Span


class _AnyValue(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """The values spans carry; a line with a ``kvlistValue`` or ``bytesValue`` (rare: fewer fields
    to fill in for every value) fails here and goes to the general reader."""

    stringValue: str | None = None
    boolValue: bool | None = None
    intValue: int | None = None
    doubleValue: float | None = None
    arrayValue: _ArrayValue | None = None


class _ArrayValue(msgspec.Struct, gc=False):
    """Typed, as the values are: no dict per element for :func:`.decode.any_value` to read."""

    values: list[_AnyValue] = []


class _KeyValue(msgspec.Struct, gc=False):
    """Both fields required: an attribute without either (rare) sends its line to the general reader,
    and the loop over every attribute of every span checks neither."""

    key: str
    value: _AnyValue


class _Status(msgspec.Struct, gc=False):
    code: int | str | None = None


class _Span(msgspec.Struct, gc=False):
    """The times required: a span without either (rare) sends its line to the general reader."""

    startTimeUnixNano: int
    endTimeUnixNano: int
    traceId: str = ""
    spanId: str = ""
    parentSpanId: str = ""
    name: str = ""
    attributes: list[_KeyValue] = []
    status: _Status | None = None


class _ScopeSpans(msgspec.Struct, gc=False):
    spans: list[_Span] = []


class _Resource(msgspec.Struct, gc=False):
    attributes: list[_KeyValue] = []


class _ResourceSpans(msgspec.Struct, gc=False):
    resource: _Resource | None = None
    scopeSpans: list[_ScopeSpans] = []


class _Request(msgspec.Struct, gc=False):
    resourceSpans: list[_ResourceSpans] | None = None


_decode = msgspec.json.Decoder(_Request, strict=False).decode


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
    # the spans of a line mostly share their trace: its id checked and lowered once, one object for
    # all (whose hash is then computed once, by the trace assembly)
    last_trace: str | None = None
    trace = ""
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
                if trace_id != last_trace:
                    if len(trace_id) != 32:
                        return None
                    last_trace, trace = trace_id, trace_id.lower()
                if len(span_id) != 16 or (parent and len(parent) != 16):
                    return None
                start, end = raw.startTimeUnixNano, raw.endTimeUnixNano
                if end < start:
                    return None
                attributes: dict[str, Any] = {}
                for item in raw.attributes:
                    value = item.value
                    text = value.stringValue
                    if text is not None:
                        attributes[item.key] = text
                        continue
                    flag = value.boolValue
                    if flag is not None:
                        attributes[item.key] = flag
                        continue
                    whole = value.intValue  # tokens, ports, statuses: a string in OTLP JSON
                    if whole is not None:
                        attributes[item.key] = whole
                        continue
                    number = value.doubleValue  # the phases' seconds
                    attributes[item.key] = number if number is not None else _value(value)
                status = raw.status
                code = status.code if status is not None else None
                append(
                    Span(
                        trace,
                        span_id.lower(),
                        parent.lower(),
                        raw.name,
                        start,
                        end,
                        attributes,
                        code is not None and (code == 2 or code == "STATUS_CODE_ERROR"),
                        service,
                    )
                )
    return result


def _value(value: _AnyValue | None) -> Any:
    """:func:`.decode.any_value`'s answer, in its order of precedence."""
    if value is None:
        return None
    if value.stringValue is not None:
        return value.stringValue
    if value.boolValue is not None:
        return value.boolValue
    if value.intValue is not None:
        return value.intValue
    if value.doubleValue is not None:
        return value.doubleValue
    if value.arrayValue is not None:
        return [_value(item) for item in value.arrayValue.values]
    return None

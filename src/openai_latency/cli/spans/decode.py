"""OTLP/JSON span objects -> :class:`~.span.Span`: the usual shape fast, any accepted shape checked.

:func:`fast_span` handles the usual shape (what the collector and the SDK encoders write) with few
checks and falls back to the checked decoding for anything else, so both give the same span.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any

from .span import Span

_STATUS_ERROR = 2


def objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def fast_span(raw: dict[str, Any], service: str | None) -> Span | None:
    """:func:`_span` for the usual shape (what the collector and the SDK's encoders write), without
    its checks; anything unexpected falls back to :func:`_span`, so both give the same result."""
    try:
        trace_id: str = raw["traceId"]
        span_id: str = raw["spanId"]
        parent: str = raw.get("parentSpanId") or ""
        if len(trace_id) != 32 or len(span_id) != 16 or (parent and len(parent) != 16):
            return _span(raw, service)
        start = int(raw["startTimeUnixNano"])
        end = int(raw["endTimeUnixNano"])
        if end < start:
            return None
        attributes: dict[str, Any] = {}
        for item in raw.get("attributes") or ():
            encoded = item["value"]
            value = encoded.get("stringValue")  # any_value's first choice too
            if value.__class__ is not str:  # exact types: see collect.collect
                ((kind, value),) = encoded.items()
                if kind == "intValue" and value.__class__ is str:  # int64: a decimal string
                    value = int(value)
                elif not (kind == "doubleValue" and value.__class__ is float) and not (
                    kind == "boolValue" and value.__class__ is bool
                ):
                    value = any_value(encoded)
            attributes[item["key"]] = value
        status = raw.get("status")
        code = status.get("code") if status else None
        name = raw.get("name", "")
        return Span(
            trace_id.lower(),
            span_id.lower(),
            parent.lower(),
            name if isinstance(name, str) else str(name),
            start,
            end,
            attributes,
            code == _STATUS_ERROR or code == "STATUS_CODE_ERROR",
            service,
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return _span(raw, service)


def _span(raw: dict[str, Any], service: str | None) -> Span | None:
    """A span of any accepted shape (hex or base64 ids, integer or named enums), checked."""
    trace_id = _id(raw.get("traceId"), 16)
    span_id = _id(raw.get("spanId"), 8)
    start = integer(raw.get("startTimeUnixNano"))
    end = integer(raw.get("endTimeUnixNano"))
    if not trace_id or not span_id or start is None or end is None or end < start:
        return None
    status = raw.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=_id(raw.get("parentSpanId"), 8),
        name=str(raw.get("name", "")),
        start_ns=start,
        end_ns=end,
        attributes=attributes(raw.get("attributes")),
        status_error=code == _STATUS_ERROR or code == "STATUS_CODE_ERROR",
        service=service,
    )


def _id(value: Any, size: int) -> str:
    """Lowercase hex; hex (OTLP/JSON) or base64 (plain protobuf JSON) in. Empty when absent."""
    if not isinstance(value, str) or not value:
        return ""
    if len(value) == 2 * size:
        try:
            bytes.fromhex(value)
        except ValueError:
            pass
        else:
            return value.lower()
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value.lower()
    return decoded.hex() if len(decoded) == size else value.lower()


def integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (str, float)):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def attributes(value: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for item in objects(value):
        key = item.get("key")
        if isinstance(key, str):
            result[key] = any_value(item.get("value"))
    return result


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` object -> str, int, float, bool, list, dict or None."""
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return integer(value["intValue"])
    if "doubleValue" in value:
        return double(value["doubleValue"])
    if "arrayValue" in value:
        array = value["arrayValue"]
        values = array.get("values") if isinstance(array, dict) else None
        return [any_value(item) for item in values] if isinstance(values, list) else []
    if "kvlistValue" in value:
        kvlist = value["kvlistValue"]
        return attributes(kvlist.get("values")) if isinstance(kvlist, dict) else {}
    if "bytesValue" in value:
        return str(value["bytesValue"])
    return None


def double(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # also "NaN", "Infinity", "-Infinity"
        except ValueError:
            return None
    return None

"""The OTLP JSON reader's fast path when msgspec is installed (the ``cli`` extra): a line -> spans.

Each line is decoded straight into typed structs that hold only what a span needs (no dict per
attribute, unknown fields skipped inside the parser), then into :class:`Span` (or what the reader's
``make`` builds of a span's fields). The structs are not tracked by the cyclic garbage collector
(``gc=False``: they hold no cycles), and the decoder is lax (``strict=False``): the times, integers
written as strings in OTLP JSON, are parsed in C. A line of any other shape (not JSON, a list,
snake_case keys, base64 ids, no spans, a span without ids or with end before start, a time that is
no number, a ``kvlistValue`` or ``bytesValue``, an attribute without its key or its value, a value's
``null`` field) returns None and is read by the general
reader, so both paths give the same spans and the same counts (tests/cli/spans/test_decode.py).

An attribute value's fields are read as the general reader reads them (:func:`.decode.any_value`),
whatever the lax parser would make of them: an absent field is :data:`~msgspec.UNSET` (a ``null``
one is another shape), and a boolean, integer or double written as a string is kept a string and
read as the general reader reads it (``bool("false")`` is True there; an ``intValue`` of ``"5.0"`` is
no integer; a ``doubleValue`` of ``"-0"`` is -0.0), so both readers agree on odd values too.

With ``lazy_values`` (``report --by trace``, which reads few attribute values), each attribute value
is left as its JSON text by the parser and decoded when read (:class:`LazyAttributes`), as the line
would have been: a value of a shape left to the general reader is decoded as the general reader does.
"""

from __future__ import annotations

import json
from typing import Any, Generic, TypeVar

import msgspec

from .decode import any_value, double, integer
from .names import SERVICE_NAME
from .span import Span, SpanMaker

T = TypeVar("T")


_UNSET = msgspec.UNSET


class _AnyValue(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """The values spans carry; a line with a ``kvlistValue`` or ``bytesValue`` (rare: fewer fields
    to fill in for every value) fails here and goes to the general reader, as does a ``null`` field.
    A string where a boolean or a number belongs is kept as written (:func:`_value` reads it as the
    general reader does): OTLP JSON's integers are strings, so ``intValue`` mostly is one."""

    stringValue: str | msgspec.UnsetType = _UNSET
    boolValue: bool | str | msgspec.UnsetType = _UNSET
    intValue: int | str | msgspec.UnsetType = _UNSET
    doubleValue: float | str | msgspec.UnsetType = _UNSET
    arrayValue: _ArrayValue | msgspec.UnsetType = _UNSET


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


class _RawKeyValue(msgspec.Struct, gc=False):
    """An attribute whose value is skipped by the parser, kept as its JSON text: decoded when read
    (:class:`LazyAttributes`). Its key and value required, as :class:`_KeyValue`'s."""

    key: str
    value: msgspec.Raw


#: A span's attributes: decoded (:class:`_KeyValue`) or left as JSON text (:class:`_RawKeyValue`).
A = TypeVar("A")


class _Span(msgspec.Struct, Generic[A], gc=False):
    """The times required: a span without either (rare) sends its line to the general reader."""

    startTimeUnixNano: int
    endTimeUnixNano: int
    traceId: str = ""
    spanId: str = ""
    parentSpanId: str = ""
    name: str = ""
    attributes: list[A] = []
    status: _Status | None = None


class _ScopeSpans(msgspec.Struct, Generic[A], gc=False):
    spans: list[_Span[A]] = []


class _Resource(msgspec.Struct, gc=False):
    attributes: list[_KeyValue] = []


class _ResourceSpans(msgspec.Struct, Generic[A], gc=False):
    resource: _Resource | None = None
    scopeSpans: list[_ScopeSpans[A]] = []


class _Request(msgspec.Struct, Generic[A], gc=False):
    resourceSpans: list[_ResourceSpans[A]] | None = None


_decode = msgspec.json.Decoder(_Request[_KeyValue], strict=False).decode
_decode_raw = msgspec.json.Decoder(_Request[_RawKeyValue], strict=False).decode
_decode_value = msgspec.json.Decoder(_AnyValue, strict=False).decode

_Raw = msgspec.Raw
_ABSENT = object()
_dict_get = dict.get


class LazyAttributes(dict[str, Any]):
    """A span's attributes whose values are decoded when first read (``attributes[key]``,
    ``attributes.get(key)``), each once, as the line's reader would have decoded it; keys, ``in``
    and ``len`` as a dict's. For a reader of a few of them: ``report --by trace`` reads ~10 of an
    operation span's ~40, and a decoded value cost more than the rest of its reading (msgspec's
    structs for each attribute and its value, then a dict entry)."""

    __slots__ = ()

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        value = _dict_get(self, key, _ABSENT)
        if value.__class__ is _Raw:
            text = bytes(value)
            value = _known_get(text, _ABSENT)
            if value is _ABSENT:
                value = _decoded(text)
            self[key] = value
        elif value is _ABSENT:
            return default
        return value

    def __getitem__(self, key: str) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    # every value decoded, so that no reader of the whole mapping sees JSON text (the report reads none)
    def values(self) -> list[Any]:  # type: ignore[override]
        return [self[key] for key in self]

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        return [(key, self[key]) for key in self]


#: Values decoded, by their JSON text: the values a report reads repeat (phase and operation names,
#: token counts), and a lookup costs less than a decode. Bounded: past :data:`MAX_KNOWN`, decoded each time.
_KNOWN: dict[bytes, Any] = {}
_known_get = _KNOWN.get
MAX_KNOWN = 4096
_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def _decoded(text: bytes) -> Any:
    """The value of an ``AnyValue``'s JSON text, as the line's reader would have decoded it;
    remembered (:data:`_KNOWN`) unless it is a list or a dict (a caller may change it)."""
    try:
        decoded = _decode_value(text)
    except msgspec.DecodeError:  # also ValidationError
        value = _general_value(text)
    else:
        value = decoded.stringValue  # _value's first answer, without the call: most are texts
        if value is _UNSET:
            value = _value(decoded)
    if value.__class__ in _IMMUTABLE and len(_KNOWN) < MAX_KNOWN:
        _KNOWN[text] = value
    return value


def _general_value(raw: bytes) -> Any:
    """The value of an ``AnyValue``'s JSON text of a shape the fast reader leaves to the general reader
    (a ``kvlistValue``, a string that is no number...): the general reader's
    (:func:`.decode.any_value`)."""
    return any_value(json.loads(raw.decode("utf-8", "replace")))


def decode_line(
    line: bytes,
    make: SpanMaker[T] = Span,  # type: ignore[assignment]
    lazy_values: bool = False,
) -> list[T] | None:
    """The spans of one line (an ``ExportTraceServiceRequest``), or None: let the general reader.
    Each span is ``make``'s (:class:`Span`, or what ``make`` builds from a span's fields);
    ``lazy_values``: its attributes are :class:`LazyAttributes`, for a ``make`` that reads few."""
    try:
        request: _Request[Any] = _decode_raw(line) if lazy_values else _decode(line)
    except msgspec.DecodeError:  # also ValidationError: another shape
        return None
    if not request.resourceSpans:
        return None  # metrics, logs, an empty request: the general reader counts those
    result: list[T] = []
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
                attributes: dict[str, Any]
                if lazy_values:  # each value its JSON text until read (the dict copied in C, as a whole)
                    attributes = LazyAttributes({item.key: item.value for item in raw.attributes})
                else:
                    attributes = {}
                    for item in raw.attributes:  # _value's answers, the usual ones inline
                        value = item.value
                        text = value.stringValue
                        if text is not _UNSET:
                            attributes[item.key] = text
                            continue
                        flag = value.boolValue
                        if flag.__class__ is bool:
                            attributes[item.key] = flag
                            continue
                        if flag is _UNSET:
                            whole = value.intValue  # tokens, ports, statuses: a string in OTLP JSON
                            if whole.__class__ is str:
                                try:
                                    attributes[item.key] = int(whole)  # integer()'s answer for a string
                                except ValueError:
                                    attributes[item.key] = None
                                continue
                            number = value.doubleValue  # the phases' seconds
                            if number.__class__ is float and whole is _UNSET:
                                attributes[item.key] = number
                                continue
                        attributes[item.key] = _value(value)
                status = raw.status
                code = status.code if status is not None else None
                append(
                    make(
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
    """:func:`.decode.any_value`'s answer, in its order of precedence and with its conversions of a
    string where a boolean or a number belongs."""
    if value is None:
        return None
    if value.stringValue is not _UNSET:
        return value.stringValue
    flag = value.boolValue
    if flag is not _UNSET:
        return flag if flag.__class__ is bool else bool(flag)
    whole = value.intValue
    if whole is not _UNSET:
        return whole if whole.__class__ is int else integer(whole)
    number = value.doubleValue
    if number is not _UNSET:
        return number if number.__class__ is float else double(number)
    if value.arrayValue is not _UNSET:
        return [_value(item) for item in value.arrayValue.values]
    return None

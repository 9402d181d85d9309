"""The msgspec fast path (``decode_msgspec.decode_line``) gives the general reader's spans for every
attribute value shape, and hands the shapes it does not take to the general reader."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from openai_latency.cli.spans import files
from openai_latency.cli.spans.decode_msgspec import LazyAttributes, decode_line
from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats, Span

TRACE = "0af7651916cd43dd8448eb211c80319c"


def _line(values: dict[str, Any], start: Any = "1000", end: Any = 2000) -> str:
    span = {
        "traceId": TRACE,
        "spanId": "b7ad6b7169203331",
        "name": "chat",
        "startTimeUnixNano": start,
        "endTimeUnixNano": end,
        "attributes": [{"key": key, "value": value} for key, value in values.items()],
        "status": {"code": 2},
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "app"}}]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]})


#: Attribute values as exporters write them (OTLP JSON: 64-bit integers as strings).
FAST = {
    "int.string": {"intValue": "123"},
    "int.number": {"intValue": 7},
    "double.number": {"doubleValue": 0.25},
    "double.string": {"doubleValue": "1.5"},
    "double.nan": {"doubleValue": "NaN"},
    "double.inf": {"doubleValue": "-Infinity"},
    "bool": {"boolValue": True},
    "text": {"stringValue": "x"},
    "array": {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"}]}},
    "empty": {},
    "int.not_a_number": {"intValue": "12x"},  # kept a string, read as the general reader does: None
}
#: Shapes the fast path leaves to the general reader (the whole line).
GENERAL = {
    "kvlist": {"kvlistValue": {"values": [{"key": "k", "value": {"intValue": "1"}}]}},
    "bytes": {"bytesValue": "AAE="},
}


def _comparable(spans: list[Span]) -> list[tuple[Any, ...]]:
    """The spans' fields, NaN as a string (it compares unequal to itself)."""
    fields = (
        "trace_id",
        "span_id",
        "parent_span_id",
        "name",
        "start_ns",
        "end_ns",
        "status_error",
        "service",
    )
    return [
        (
            *(getattr(span, name) for name in fields),
            {k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in span.attributes.items()},
        )
        for span in spans
    ]


def _read(path: Path, fast: bool, monkeypatch: pytest.MonkeyPatch) -> list[Span]:
    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(files, "_decode_line", None)
        return list(read_spans([path], ReadStats()))


CASES = [FAST, *({key: value} for key, value in GENERAL.items())]


@pytest.mark.parametrize("values", CASES, ids=["fast", *GENERAL])
def test_fast_path_and_general_reader_agree(
    values: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(_line(values) + "\n")
    fast = decode_line(path.read_bytes().rstrip())
    assert (fast is None) == (values is not FAST)  # the fast path took exactly the shapes it is for
    spans = _read(path, True, monkeypatch)
    assert len(spans) == 1 and _comparable(spans) == _comparable(_read(path, False, monkeypatch))
    attributes = spans[0].attributes
    if values is FAST:
        assert attributes["int.string"] == 123 and attributes["double.string"] == 1.5
        assert math.isnan(attributes["double.nan"]) and attributes["double.inf"] == -math.inf
        assert attributes["array"] == ["a", 2] and attributes["empty"] is None
        assert attributes["int.not_a_number"] is None


@pytest.mark.parametrize(("start", "end"), [("10", "20"), (10, 20), ("x", 20), (None, 20), (30, 20)])
def test_times_as_strings_or_numbers(
    start: Any, end: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(_line({}, start, end) + "\n")
    spans = _read(path, True, monkeypatch)
    if start in ("10", 10):
        assert [(s.start_ns, s.end_ns) for s in spans] == [(10, 20)]
        assert _comparable(spans) == _comparable(_read(path, False, monkeypatch))
    else:  # a bad span: neither reader makes one of it
        assert spans == [] == _read(path, False, monkeypatch)


def _spans_line(spans: list[dict[str, Any]]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def test_ids_of_any_case_read_lowercase_by_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line's spans share their trace id's lowering (the fast path lowers it once per trace); an id
    in capitals, or one trace after another in the line, still gives each span its own ids."""
    upper = TRACE.upper()
    other = "1" * 32
    spans = [
        {"traceId": upper, "spanId": "B7AD6B7169203331", "parentSpanId": "00F067AA0BA902B7"},
        {"traceId": TRACE, "spanId": "b7ad6b7169203332"},
        {"traceId": other, "spanId": "b7ad6b7169203333"},
        {"traceId": upper, "spanId": "b7ad6b7169203334"},
    ]
    for span in spans:
        span.update(name="s", startTimeUnixNano="1", endTimeUnixNano="2")
    path = tmp_path / "spans.jsonl"
    path.write_text(_spans_line(spans) + "\n")
    assert decode_line(path.read_bytes().rstrip()) is not None  # the fast path took it
    read = _read(path, True, monkeypatch)
    assert [(s.trace_id, s.span_id, s.parent_span_id) for s in read] == [
        (TRACE, "b7ad6b7169203331", "00f067aa0ba902b7"),
        (TRACE, "b7ad6b7169203332", ""),
        (other, "b7ad6b7169203333", ""),
        (TRACE, "b7ad6b7169203334", ""),
    ]
    assert _comparable(read) == _comparable(_read(path, False, monkeypatch))


NO_KEY_OR_VALUE = [{"key": "k"}, {"value": {"stringValue": "v"}}, {"key": "k", "value": None}]


@pytest.mark.parametrize("attribute", NO_KEY_OR_VALUE)
def test_an_attribute_without_key_or_value_goes_to_the_general_reader(
    attribute: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    span = {"traceId": TRACE, "spanId": "b7ad6b7169203331", "name": "s", "startTimeUnixNano": "1"}
    span.update(endTimeUnixNano="2", attributes=[attribute, {"key": "x", "value": {"intValue": "3"}}])
    path = tmp_path / "spans.jsonl"
    path.write_text(_spans_line([span]) + "\n")
    assert decode_line(path.read_bytes().rstrip()) is None
    read = _read(path, True, monkeypatch)
    assert len(read) == 1 and read[0].attributes["x"] == 3
    assert _comparable(read) == _comparable(_read(path, False, monkeypatch))


@pytest.mark.parametrize("values", [*CASES, {"null": None}], ids=["fast", *GENERAL, "null"])
def test_lazy_values_are_the_general_readers_of_any_shape(
    values: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lazy_values`` (``report --by trace``): the parser leaves each value as its JSON text, even
    of a shape the fast path leaves to the general reader; read by ``[key]`` or ``get``, it is the
    general reader's value, and the span's other fields are too."""
    path = tmp_path / "spans.jsonl"
    path.write_text(_line(values) + "\n")
    general = _comparable(_read(path, False, monkeypatch))
    for read in ("item", "get", "items"):
        spans = decode_line(path.read_bytes().rstrip(), Span, lazy_values=True)
        assert spans is not None and isinstance(spans[0].attributes, LazyAttributes)
        for span in spans:
            lazy = span.attributes
            keys = list(lazy)
            if read == "items":  # a reader of the whole mapping sees decoded values too
                assert [value for _, value in lazy.items()] == lazy.values()
                span.attributes = dict(lazy.items())
                continue
            span.attributes = {key: lazy[key] if read == "item" else lazy.get(key) for key in keys}
            assert span.attributes == {key: lazy[key] for key in keys}  # decoded once, then kept
        assert _comparable(spans) == general


#: Values of odd shapes (no exporter writes them): the lax parser would read some differently from
#: the general reader (``"false"`` as False where ``bool("false")`` is True, ``"5.0"`` as 5, ``"-0"``
#: as 0.0, a null field as absent); both readers, eager and lazy, give the general reader's value.
ODD = {
    "bool.false_text": {"boolValue": "false"},
    "bool.zero_text": {"boolValue": "0"},
    "bool.empty_text": {"boolValue": ""},
    "bool.zero": {"boolValue": 0},
    "bool.null": {"boolValue": None},
    "int.float_text": {"intValue": "5.0"},
    "int.exponent_text": {"intValue": "1e3"},
    "int.spaced_text": {"intValue": " 7"},
    "int.float": {"intValue": 5.0},
    "int.null_then_double": {"intValue": None, "doubleValue": 1.5},
    "double.minus_zero_text": {"doubleValue": "-0"},
    "double.minus_zero": {"doubleValue": -0.0},
    "double.inf_text": {"doubleValue": "inf"},
    "string.null": {"stringValue": None},
    "string.null_then_int": {"stringValue": None, "intValue": "3"},
    "string_and_int": {"stringValue": "a", "intValue": "3"},
    "array.null": {"arrayValue": None},
    "array.odd_items": {"arrayValue": {"values": [{"boolValue": "false"}, {"intValue": "5.0"}]}},
}


@pytest.mark.parametrize("name", list(ODD))
def test_odd_values_read_as_the_general_reader_reads_them(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(_line({name: ODD[name], "other": {"stringValue": "x"}}) + "\n")
    general = _read(path, False, monkeypatch)
    assert len(general) == 1
    expected = repr(general[0].attributes)  # repr: False is not 0, -0.0 is not 0.0
    assert repr(_read(path, True, monkeypatch)[0].attributes) == expected
    lazy = decode_line(path.read_bytes().rstrip(), Span, lazy_values=True)
    assert lazy is not None
    assert repr({key: lazy[0].attributes[key] for key in lazy[0].attributes}) == expected


def test_lazy_values_of_the_same_text_are_decoded_once_and_lists_are_each_spans_own(tmp_path: Path) -> None:
    """Decoded values are remembered by their JSON text (a phase name, a token count): the same
    value again, of another span; a list is made for each span (its reader may change it)."""
    values = {"text": {"stringValue": "first_token"}, "count": {"intValue": "12"}}
    values["array"] = {"arrayValue": {"values": [{"stringValue": "a"}]}}
    line = _line(values).encode()
    first, second = (decode_line(line, Span, lazy_values=True) for _ in range(2))
    assert first is not None and second is not None
    a, b = first[0].attributes, second[0].attributes
    assert a["text"] == b["text"] == "first_token" and a["count"] == b["count"] == 12
    assert a["text"] is b["text"]  # the remembered object
    assert a["array"] == b["array"] == ["a"] and a["array"] is not b["array"]
    a["array"].append("b")
    assert b["array"] == ["a"]

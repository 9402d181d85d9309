"""The msgspec fast path (``decode_msgspec.decode_line``) gives the general reader's spans for every
attribute value shape, and hands the shapes it does not take to the general reader."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from openai_latency.cli.spans import files
from openai_latency.cli.spans.decode_msgspec import decode_line
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
}
#: Shapes the fast path leaves to the general reader (the whole line).
GENERAL = {
    "kvlist": {"kvlistValue": {"values": [{"key": "k", "value": {"intValue": "1"}}]}},
    "bytes": {"bytesValue": "AAE="},
    "int.not_a_number": {"intValue": "12x"},
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
    assert "int.not_a_number" not in attributes or attributes["int.not_a_number"] is None


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

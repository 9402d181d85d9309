"""``report --jaeger`` (Jaeger's query API) and ``report --waterfall``, on real spans.

Calls are made with the real SDK and the instrumentor against the fake server, under two services;
the finished spans are written as OTLP JSON lines (the collector's file exporter) and converted to
Jaeger's JSON as Jaeger stores them, served by a small local server. The report from Jaeger must give
the numbers the report from the file gives, once the file's times are cut to microseconds as Jaeger
keeps them (without that cut they differ by a microsecond per span).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.cli import main
from openai_latency.cli.render.text import format_duration
from openai_latency.cli.render.waterfall import waterfall_lines
from openai_latency.cli.spans.collect import collect_calls
from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats
from openai_latency.fake_server import FakeServer
from tests.support.fake_jaeger import FakeJaeger
from tests.support.otlp_files import jaeger_traces, write_jsonl

MESSAGES: Any = [{"role": "user", "content": "hi"}]


@dataclass
class Traces:
    spans: list[ReadableSpan]
    jsonl: Path
    #: the same spans with the times Jaeger keeps (microseconds)
    jsonl_us: Path


def _calls(service: str, server: FakeServer, mode: str) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAILatencyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=provider, meter_provider=MeterProvider(), phase_spans=mode)
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=2)
        for delay in (2, 2, 2, 120):
            client.chat.completions.create(
                model="gpt-4o-mini", messages=MESSAGES, extra_headers={"x-fake-delay-ms": str(delay)}
            )
        retried = {"x-fake-fail-attempts": "1", "x-fake-retry-after-ms": "60"}
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, extra_headers=retried)
        with pytest.raises(openai.AuthenticationError):
            client.chat.completions.create(
                model="gpt-4o-mini", messages=MESSAGES, extra_headers={"x-fake-error": "invalid_api_key"}
            )
        for ttft in (5, 5, 90):
            script = {"x-fake-ttft-ms": str(ttft), "x-fake-chunks": "4", "x-fake-chunk-delay-ms": "2"}
            for _ in client.chat.completions.create(
                model="gpt-4o", messages=MESSAGES, stream=True, extra_headers=script
            ):
                pass
    finally:
        instrumentor.uninstrument()
    spans = list(exporter.get_finished_spans())
    # the provider lives on (its atexit hook), and so would the exporter's copy: for tests that count
    # the spans alive (tests/core/test_exporter_outage.py), this module's die with its fixture
    exporter.clear()
    return spans


@pytest.fixture(scope="module")
def traces(server: FakeServer, tmp_path_factory: pytest.TempPathFactory) -> Traces:
    spans = _calls("checkout", server, "detailed") + _calls("search", server, "phases")
    folder = tmp_path_factory.mktemp("sources")
    return Traces(
        spans,
        write_jsonl(folder / "traces.jsonl", spans),
        write_jsonl(folder / "traces-us.jsonl", spans, microseconds=True),
    )


@pytest.fixture
def jaeger(traces: Traces) -> Iterator[FakeJaeger]:
    served = jaeger_traces(traces.spans)
    random.Random(7).shuffle(served)
    for trace in served:  # Jaeger's order is not the export order: phases may come after their call
        trace["spans"].reverse()
    with FakeJaeger(served) as fake:
        yield fake


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["report", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = _run([*argv, "--format", "json"], capsys)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def _same(actual: Any, expected: Any, path: str = "") -> None:
    """Equal; floats up to rounding."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), path
        for key in expected:
            _same(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _same(a, e, f"{path}[{index}]")
    elif isinstance(expected, float):  # sums in another order: rounding only
        assert actual == pytest.approx(expected, abs=1e-12, rel=1e-9), path
    else:
        assert actual == expected, path


def test_jaeger_gives_the_numbers_of_the_file(
    traces: Traces, jaeger: FakeJaeger, capsys: pytest.CaptureFixture[str]
) -> None:
    for by in ("endpoint,model", "service,model"):
        from_file = _json([str(traces.jsonl_us), "--by", by, "--http"], capsys)
        from_jaeger = _json(["--jaeger", jaeger.url, "--by", by, "--http"], capsys)
        assert from_jaeger["input"]["spans"] == len(traces.spans) == from_file["input"]["spans"]
        assert from_jaeger["input"]["operation_spans"] == from_file["input"]["operation_spans"] == 18
        assert from_jaeger["input"]["phase_spans"] == from_file["input"]["phase_spans"]
        _same(from_jaeger["groups"], from_file["groups"])
    assert {g["key"]["service"] for g in from_jaeger["groups"]} == {"checkout", "search"}
    # every service but Jaeger's own, each queried once with a time window and a limit
    asked = [query for path, query in jaeger.queries if path == "/api/traces"]
    assert sorted(query["service"] for query in asked[-2:]) == ["checkout", "search"]
    for query in asked:
        assert int(query["end"]) - int(query["start"]) == 3600 * 10**6 and query["limit"] == "1000"


def test_jaeger_one_service_lookback_and_limit(
    traces: Traces, jaeger: FakeJaeger, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = _json(["--jaeger", jaeger.url + "/", "--service", "search", "--lookback", "30m"], capsys)
    # the numbers of that service's spans alone (both services called the same endpoint and models,
    # so the groups are the same; only the calls and their times differ)
    search = [s for s in traces.spans if s.resource.attributes["service.name"] == "search"]
    only_search = _json([str(write_jsonl(tmp_path / "search.jsonl", search, microseconds=True))], capsys)
    _same(report["groups"], only_search["groups"])
    assert sum(g["calls"] for g in report["groups"]) == 9
    assert report["input"]["files"] == [f"{jaeger.url} service=search"]
    path, query = jaeger.queries[-1]
    assert path == "/api/traces" and query["service"] == "search"
    assert int(query["end"]) - int(query["start"]) == 1800 * 10**6
    assert not any(path == "/api/services" for path, _ in jaeger.queries)

    report = _json(["--jaeger", jaeger.url, "--service", "search", "--limit", "3"], capsys)
    assert jaeger.queries[-1][1]["limit"] == "3"
    assert report["input"]["lines"] == 3  # traces read

    code, out, _ = _run(["--jaeger", jaeger.url, "--service", "search"], capsys)
    assert code == 0 and f"9 calls (operation spans) in {len(search)} spans" in out
    assert f"trace(s) from Jaeger at {jaeger.url} (1 service(s))" in out


def test_jaeger_errors_are_one_line(jaeger: FakeJaeger, capsys: pytest.CaptureFixture[str]) -> None:
    jaeger.mode = "http_error"
    code, out, err = _run(["--jaeger", jaeger.url], capsys)
    assert (code, out) == (1, "")
    expected = f"Jaeger answered HTTP 500 for {jaeger.url}/api/services: storage unavailable"
    assert err.strip() == f"openai-latency report: {expected}"
    jaeger.mode = "not_json"
    code, _, err = _run(["--jaeger", jaeger.url, "--service", "x"], capsys)
    assert code == 1 and "is not JSON" in err and len(err.strip().splitlines()) == 1
    jaeger.mode = "ok"
    code, _, err = _run(["--jaeger", jaeger.url, "--service", "nobody"], capsys)
    assert code == 1 and "no operation spans found" in err and "0 trace(s) from Jaeger" in err


def test_compare_reads_a_side_from_jaeger(
    traces: Traces, jaeger: FakeJaeger, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compare FILE jaeger:URL?service=...``: one service's spans from Jaeger against the same in a file."""
    search = f"jaeger:{jaeger.url}?service=search&lookback=30m&limit=50"
    code = main(["compare", search, search, "--by", "model", "--format", "json", "--fail-if", "e2e.p50>+1%"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["failed"] is False
    assert report["baseline"] == f"Jaeger at {jaeger.url}, service search"
    assert {g["label"] for g in report["groups"]} == {"gpt-4o", "gpt-4o-mini"}
    for entry in report["groups"]:  # the same calls on both sides: no difference, exactly
        assert entry["verdict"]["significant"] is False
        assert (
            entry["verdict"]["metrics"]["e2e"]["calls"]["baseline"]
            == entry["verdict"]["metrics"]["e2e"]["calls"]["current"]
        )
    path, query = jaeger.queries[-1]
    assert path == "/api/traces" and (query["service"], query["limit"]) == ("search", "50")
    assert int(query["end"]) - int(query["start"]) == 1800 * 10**6
    assert main(["compare", f"jaeger:{jaeger.url}?sevrice=x", search]) == 1
    assert "unknown query key(s) sevrice" in capsys.readouterr().err


def test_late_phase_spans_join_their_call(traces: Traces) -> None:
    """Phase spans after their operation (any order) give the calls of the export order."""
    in_order = collect_calls(read_spans([traces.jsonl], ReadStats()))
    spans = list(read_spans([traces.jsonl], ReadStats()))
    random.Random(3).shuffle(spans)
    shuffled = collect_calls(spans)
    assert len(shuffled.calls) == len(in_order.calls) == 18
    by_start = {call.start_ns: call for call in shuffled.calls}
    for call in in_order.calls:
        other = by_start[call.start_ns]
        assert other.phases == pytest.approx(call.phases) and other.http == pytest.approx(call.http)
        assert other.intervals == call.intervals and other.request_id == call.request_id


def test_waterfall_draws_the_slowest_calls(traces: Traces, capsys: pytest.CaptureFixture[str]) -> None:
    calls = collect_calls(read_spans([traces.jsonl], ReadStats())).calls
    slowest = sorted(calls, key=lambda call: call.duration, reverse=True)[:3]
    lines = waterfall_lines(calls, 3, width=90, http=True)
    assert all(len(line) <= 90 and "\x1b" not in line for line in lines)
    headers = [line for line in lines if re.match(r"\d+\. ", line)]
    assert len(headers) == 3
    for header, call in zip(headers, slowest, strict=True):
        assert call.request_id and call.request_id in header and format_duration(call.duration) in header
        block = "\n".join(lines[lines.index(header) : lines.index(header) + 2])
        assert f"dominant {call.dominant()[0]}" in block  # type: ignore[index]
    # one time axis: the bar area starts at the same column for every row; the slowest call spans it
    bar_rows = [line for line in lines if "█" in line]
    first = lines.index(headers[0])
    rows = bar_rows[: len(slowest[0].intervals)]
    assert [row.split()[0] for row in rows] == [
        ("http." if i.depth else "") + i.phase for i in slowest[0].intervals
    ]
    column = min(row.index("█") for row in rows)
    assert rows[0].index("█") == column  # the first phase starts at offset 0
    assert lines.index(rows[0]) in (first + 1, first + 2)
    # bars of consecutive phases do not overlap: each starts at or after the previous one's start
    depth0 = [row for row, interval in zip(rows, slowest[0].intervals, strict=True) if interval.depth == 0]
    starts = [row.index("█") for row in depth0]
    assert starts == sorted(starts)
    # the retried call: network_wait, then retry_backoff after it, then the second attempt
    retried = next(call for call in calls if "retry_backoff" in call.phases and call.http)
    drawn = waterfall_lines([retried], 1, width=90)
    phases = [line.split()[0] for line in drawn if "█" in line]
    assert phases[phases.index("retry_backoff") - 1] == "network_wait"
    assert phases[phases.index("retry_backoff") + 1] in ("request_build", "network_wait")
    backoff = next(line for line in drawn if line.split()[:1] == ["retry_backoff"])
    attempt0 = next(line for line in drawn if line.split()[:1] == ["network_wait"])
    assert backoff.index("█") >= attempt0.rindex("█")

    drawn_json = _json([str(traces.jsonl), "--waterfall", "3", "--http"], capsys)["waterfall"]
    assert [call["request_id"] for call in drawn_json] == [call.request_id for call in slowest]
    first_call = drawn_json[0]
    assert [(p["phase"], p["depth"]) for p in first_call["phases"]] == [
        (i.phase, i.depth) for i in slowest[0].intervals
    ]
    assert first_call["phases"][0]["start"] == pytest.approx(0.0, abs=1e-3)
    assert first_call["duration"] == pytest.approx(slowest[0].duration)

    code, out, _ = _run([str(traces.jsonl), "--waterfall", "2"], capsys)
    assert code == 0 and "waterfall: the 2 slowest calls, one time axis" in out
    assert "http." not in out.split("waterfall:")[1]  # sub-phases only with --http


def test_waterfall_without_phase_spans(traces: Traces, tmp_path: Path) -> None:
    ops = [s for s in traces.spans if "openai_latency.phase" not in (s.attributes or {})]
    calls = collect_calls(read_spans([write_jsonl(tmp_path / "ops.jsonl", ops)], ReadStats())).calls
    lines = waterfall_lines(calls, 1)
    assert any("phases from the call's summed attributes" in line for line in lines)
    assert waterfall_lines(calls, 0) == [] and waterfall_lines([], 3) == []


def test_every_parser_gives_the_same_report(
    traces: Traces, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """msgspec (the cli extra), orjson, the standard library: the same report, also on lines the fast
    path hands to the general reader (base64 ids, a bad span, garbage, metrics)."""
    from openai_latency.cli.spans import files as otlp_json

    assert otlp_json.JSON_PARSER == "msgspec"  # the test extra installs it
    lines = traces.jsonl.read_text().splitlines()
    odd = json.loads(lines[1])
    odd["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "q" * 32  # not hex: still a key
    del odd["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["endTimeUnixNano"]  # a bad span
    mixed = tmp_path / "mixed.jsonl"
    extra = [json.dumps(odd), "", "garbage", '{"resourceMetrics": []}', '{"resourceSpans": []}']
    mixed.write_text("\n".join([lines[0], *extra, *lines[2:]]) + "\n")
    for path in (traces.jsonl, mixed):
        fast = _json([str(path), "--http"], capsys)
        monkeypatch.setattr(otlp_json, "_decode_line", None)
        assert _json([str(path), "--http"], capsys) == fast  # orjson
        monkeypatch.setattr(otlp_json, "_loads", json.loads)
        assert _json([str(path), "--http"], capsys) == fast  # the standard library
        monkeypatch.undo()
    assert fast["input"]["bad_spans"] == 1 and fast["input"]["skipped_lines"] == 1

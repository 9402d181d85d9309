"""``openai-latency report`` on real exported data.

Calls are made with the instrumentor against two fake servers, exported through the real OTLP encoder
and written as the collector's file exporter does (OTLP/JSON lines: hex ids, integer enums), then the
report's numbers are checked against the spans, with percentiles computed here independently
(``statistics.quantiles(method="inclusive")`` is the same linear interpolation, type 7).
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.cli import main
from openai_latency.cli.render.text import format_duration
from openai_latency.fake_server import FakeServer
from tests.support.otlp_files import write_jsonl
from tests.support.span_checks import assert_same_shape

pytestmark = pytest.mark.usefixtures("detailed_spans")  # these tests read the http.* spans

MESSAGES: Any = [{"role": "user", "content": "hi"}]
FAST, SLOW_DELAY_MS, SLOW_TTFT_MS = 2, 250, 220


@dataclass
class Exported:
    spans: list[ReadableSpan]
    jsonl: Path
    endpoint_a: str
    endpoint_b: str


@pytest.fixture(scope="module")
def exported(
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    server: FakeServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Exported]:
    instrumentor = OpenAILatencyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=MeterProvider())
    span_exporter.clear()
    try:
        with FakeServer() as second:
            a = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=2)
            b = openai.OpenAI(base_url=second.base_url, api_key="sk-test", max_retries=2)
            a.models.list()  # warm-up, and an operation without a model: `openai GET /models`
            b.models.list()
            for delay in [FAST] * 16 + [SLOW_DELAY_MS] * 3:  # slow in network_wait
                a.chat.completions.create(
                    model="gpt-4o-mini", messages=MESSAGES, extra_headers={"x-fake-delay-ms": str(delay)}
                )
            retried = {"x-fake-fail-attempts": "1", "x-fake-retry-after-ms": "20"}
            a.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, extra_headers=retried)
            with pytest.raises(openai.AuthenticationError):
                a.chat.completions.create(
                    model="gpt-4o-mini", messages=MESSAGES, extra_headers={"x-fake-error": "invalid_api_key"}
                )
            for ttft in [20] * 10 + [SLOW_TTFT_MS] * 2:  # streams, slow in first_token
                script = {"x-fake-ttft-ms": str(ttft), "x-fake-chunks": "5", "x-fake-chunk-delay-ms": "3"}
                for _ in b.chat.completions.create(
                    model="gpt-4o", messages=MESSAGES, stream=True, extra_headers=script
                ):
                    pass
            endpoints = [f"127.0.0.1:{c.base_url.port}" for c in (a, b)]
    finally:
        instrumentor.uninstrument()
    spans = sorted(span_exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    span_exporter.clear()
    path = write_jsonl(tmp_path_factory.mktemp("otlp") / "traces.jsonl", spans)
    yield Exported(spans, path, endpoints[0], endpoints[1])


# ------------------------------------------------------------------------------ expectations from spans


def _seconds(span: ReadableSpan) -> float:
    assert span.start_time is not None and span.end_time is not None
    return (span.end_time - span.start_time) / 1e9


def _operations(spans: list[ReadableSpan], endpoint: str, model: str | None = None) -> list[ReadableSpan]:
    result = []
    for span in spans:
        attributes = dict(span.attributes or {})
        if "openai_latency.phase" in attributes:
            continue
        if f"{attributes.get('server.address')}:{attributes.get('server.port')}" != endpoint:
            continue
        if model is None or attributes.get("gen_ai.request.model") == model:
            result.append(span)
    return result


def _number(span: ReadableSpan, key: str) -> float:
    value = (span.attributes or {})[key]
    assert isinstance(value, float)
    return value


def _phases(spans: list[ReadableSpan], op: ReadableSpan) -> dict[str, float]:
    summed: dict[str, float] = defaultdict(float)
    for span in spans:
        if span.parent is not None and span.parent.span_id == op.context.span_id:
            summed[str((span.attributes or {})["openai_latency.phase"])] += _seconds(span)
    return summed


def _quantiles(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98]}


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["report", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = _report([*argv, "--format", "json"], capsys)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def _same(actual: Any, expected: Any) -> None:
    """Equal up to float rounding (sums in another order when spans come in another order)."""
    assert_same_shape(actual, expected, _close_or_equal)


def _close_or_equal(actual: Any, expected: Any) -> None:
    if isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-9, abs=1e-12)
    else:
        assert actual == expected


def _group(report: dict[str, Any], **key: str) -> dict[str, Any]:
    matches = [group for group in report["groups"] if group["key"] == key]
    assert len(matches) == 1, [group["key"] for group in report["groups"]]
    group: dict[str, Any] = matches[0]
    return group


# ------------------------------------------------------------------------------------------------ tests


def test_numbers_match_the_spans(exported: Exported, capsys: pytest.CaptureFixture[str]) -> None:
    report = _json([str(exported.jsonl)], capsys)
    assert report["input"]["skipped_lines"] == 0
    assert report["input"]["spans"] == len(exported.spans)
    assert report["group_by"] == ["endpoint", "model"] and report["percentile_method"] == "linear"
    a, b = exported.endpoint_a, exported.endpoint_b
    assert [g["label"] for g in report["groups"]] == sorted(
        [f"{a} -", f"{a} gpt-4o-mini", f"{b} -", f"{b} gpt-4o"]
    )

    ops = _operations(exported.spans, a, "gpt-4o-mini")
    group = _group(report, endpoint=a, model="gpt-4o-mini")
    assert group["calls"] == len(ops) == 21
    assert group["errors"] == {"count": 1, "by_type": {"invalid_api_key": 1}}
    expected = _quantiles([_seconds(op) for op in ops])
    for name, value in expected.items():
        assert group["duration"][name] == pytest.approx(value, abs=1e-9)
    per_phase: dict[str, list[float]] = defaultdict(list)
    for op in ops:
        for phase, seconds in _phases(exported.spans, op).items():
            per_phase[phase].append(seconds)
    assert set(group["phases"]) == set(per_phase) == {
        "request_build", "network_wait", "retry_backoff", "response_read",
    }  # fmt: skip
    assert group["phases"]["retry_backoff"]["n"] == 1  # only the retried call had one
    for phase, values in per_phase.items():
        if len(values) > 1:
            for name, value in _quantiles(values).items():
                assert group["phases"][phase][name] == pytest.approx(value, abs=1e-9), (phase, name)
        total = sum(_seconds(op) for op in ops)
        assert group["phases"][phase]["share"] == pytest.approx(sum(values) / total)
    # default slow rule: >= the group's p95 -> the two slowest, both slow in network_wait
    assert group["slow"]["rule"] == "p95" and group["slow"]["calls"] == 2
    assert group["slow"]["dominant_phase"] == "network_wait" and group["slow"]["dominant_calls"] == 2
    assert group["slow"]["median_share"] > 0.8

    streams = _operations(exported.spans, b, "gpt-4o")
    group_b = _group(report, endpoint=b, model="gpt-4o")
    assert group_b["calls"] == 12 and group_b["errors"]["count"] == 0
    ttft = [_number(op, "openai_latency.time_to_first_token") for op in streams]
    tpot = [_number(op, "openai_latency.time_per_output_token") for op in streams]
    for name, value in _quantiles(ttft).items():
        assert group_b["time_to_first_token"][name] == pytest.approx(value, abs=1e-9)
    for name, value in _quantiles(tpot).items():
        assert group_b["time_per_output_token"][name] == pytest.approx(value, abs=1e-9)
    assert set(group_b["phases"]) == {"request_build", "network_wait", "first_token", "stream_drain"}
    assert group_b["slow"]["dominant_phase"] == "first_token"
    assert group["time_to_first_token"] is None  # no streams in group A


def test_slow_threshold_names_the_dominant_phase(
    exported: Exported, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _json([str(exported.jsonl), "--slow-threshold", "0.2"], capsys)
    # what the spans say (a loaded machine may make one more call cross 200 ms than scripted)
    expected = {}
    for endpoint, model in ((exported.endpoint_a, "gpt-4o-mini"), (exported.endpoint_b, "gpt-4o")):
        slow = [op for op in _operations(exported.spans, endpoint, model) if _seconds(op) >= 0.2]
        expected[model] = Counter(str((op.attributes or {})["openai_latency.dominant_phase"]) for op in slow)
    slow_a = _group(report, endpoint=exported.endpoint_a, model="gpt-4o-mini")["slow"]
    assert (slow_a["rule"], slow_a["threshold"]) == ("threshold", 0.2)
    assert (
        slow_a["calls"] == sum(expected["gpt-4o-mini"].values())
        and slow_a["by_phase"] == expected["gpt-4o-mini"]
    )
    assert slow_a["dominant_phase"] == "network_wait" and slow_a["by_phase"]["network_wait"] >= 3  # scripted
    slow_b = _group(report, endpoint=exported.endpoint_b, model="gpt-4o")["slow"]
    assert slow_b["calls"] == sum(expected["gpt-4o"].values()) and slow_b["by_phase"] == expected["gpt-4o"]
    assert slow_b["by_phase"]["first_token"] >= 2  # scripted

    code, out, _ = _report([str(exported.jsonl), "--slow-threshold", "0.2"], capsys)
    assert code == 0
    n_a, n_b = slow_a["calls"], slow_b["calls"]
    a_net, b_first = slow_a["by_phase"]["network_wait"], slow_b["by_phase"]["first_token"]
    assert f"slow calls (>= 200.0 ms): {n_a} of 21; dominant phase network_wait in {a_net} of {n_a}" in out
    assert f"slow calls (>= 200.0 ms): {n_b} of 12; dominant phase first_token in {b_first} of {n_b}" in out


def test_text_table(exported: Exported, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _report([str(exported.jsonl), "--http"], capsys)
    assert code == 0 and err == ""
    assert "percentiles: linear interpolation" in out
    a = exported.endpoint_a
    assert f"== {a} gpt-4o-mini: 21 calls, 1 error (invalid_api_key 1)" in out
    block = out.split(f"== {a} gpt-4o-mini")[1].split("\n== ")[0]
    expected = _quantiles([_seconds(op) for op in _operations(exported.spans, a, "gpt-4o-mini")])
    total_row = next(line for line in block.splitlines() if line.strip().startswith("total"))
    assert total_row.split()[:3] == ["total", "21", "100%"]
    for value in expected.values():
        assert format_duration(value) in total_row
    rows = {line.split()[0]: line.split() for line in block.splitlines() if line.strip()}
    assert rows["http.server_wait"][1] == "21" and rows["retry_backoff"][1] == "1"
    assert "    http.server_wait" in block  # indented below network_wait
    header = next(line for line in block.splitlines() if "p50" in line)
    assert header.index("p50") < header.index("p95") < header.index("p99")


def test_compare_two_endpoints(exported: Exported, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _report([str(exported.jsonl), "--by", "endpoint", "--compare"], capsys)
    assert code == 0
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("p50 / p95 / p99"))
    a_first = header.index(exported.endpoint_a) < header.index(exported.endpoint_b)  # ports: natural order
    assert a_first == (int(exported.endpoint_a.split(":")[1]) < int(exported.endpoint_b.split(":")[1]))
    assert max(header.index(exported.endpoint_a), header.index(exported.endpoint_b)) < header.index("B/A p50")
    # cells are separated by 3+ spaces; columns: name, A, B, ratio (when A is the first group)
    cells = {}
    ratios: dict[str, str] = {}
    table = lines[lines.index(header) + 1 :]
    for line in table[: table.index("")] if "" in table else table:  # the triage follows a blank line
        if not line.startswith("B/A p50: "):
            row = re.split(r"\s{3,}", line.strip())
            cells[row[0]] = row[1:3] if a_first else [row[2], row[1]]
            ratios[row[0]] = row[3] if len(row) > 3 else ""
    assert cells["calls"] == ["22", "13"]  # each endpoint with its models.list warm-up
    for endpoint, column in ((exported.endpoint_a, 0), (exported.endpoint_b, 1)):
        total = _quantiles([_seconds(op) for op in _operations(exported.spans, endpoint)])
        assert cells["total"][column] == " / ".join(format_duration(total[q]) for q in ("p50", "p95", "p99"))
    assert cells["retry_backoff"][0] != "-" and cells["retry_backoff"][1] == "-"
    assert cells["first_token"][0] == "-" and cells["first_token"][1] != "-"  # A has no streams
    assert cells["time_to_first_token"][0] == "-"
    assert cells["slow: dominant phase"][0].startswith("network_wait (2/2, ")
    assert cells["slow: dominant phase"][1].startswith("first_token (1/1, ")
    # a ratio only where both p50s are at least 1 ms (no x0.00, no x347 of a near-zero phase)
    units = {"µs": 1e-6, "ms": 1e-3, "s": 1.0}

    def p50(cell: str) -> float | None:
        found = re.match(r"([\d.]+) (µs|ms|s) /", cell)
        return float(found.group(1)) * units[found.group(2)] if found else None

    checked = 0
    for name, (a, b) in cells.items():
        if name in ("calls", "errors", "slow: dominant phase"):
            continue
        values = (p50(a), p50(b))
        if None in values or min(v for v in values if v is not None) < 0.001:
            assert ratios[name] == "-", (name, a, b, ratios[name])
        else:
            assert re.fullmatch(r"x\d+\.\d\d", ratios[name]), (name, ratios[name])
            checked += 1
    assert checked >= 1  # "total" at least
    # by model: the same data, other groups
    report = _json([str(exported.jsonl), "--by", "model"], capsys)
    assert [g["label"] for g in report["groups"]] == ["-", "gpt-4o", "gpt-4o-mini"]
    assert [g["calls"] for g in report["groups"]] == [2, 12, 21]
    report = _json([str(exported.jsonl), "--by", "provider,operation"], capsys)
    assert {g["label"]: g["calls"] for g in report["groups"]} == {
        "openai chat": 33,
        "openai openai GET /models": 2,
    }


def test_tolerates_garbled_lines(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = _json([str(exported.jsonl)], capsys)
    lines = exported.jsonl.read_text().splitlines()
    garbled = [lines[0], "", "not json {", lines[1][: len(lines[1]) // 2], "[1, 2]", *lines[1:]]
    garbled += ['{"resourceMetrics": []}', "   ", '{"hello": "world"}']
    path = tmp_path / "garbled.jsonl"
    path.write_text("\n".join(garbled) + "\n")
    code, out, err = _report([str(path)], capsys)
    assert code == 0
    assert "skipped 4 unreadable line(s); first: " in err and f"{path}:3: not JSON" in err
    assert "skipped 4 unreadable line(s)" in out
    report = _json([str(path)], capsys)
    assert report["input"]["skipped_lines"] == 4 and report["input"]["blank_lines"] == 2
    assert report["input"]["non_trace_documents"] == 1
    assert [s["line"] for s in report["input"]["skipped"]] == [3, 4, 5, len(garbled)]
    assert report["groups"] == clean["groups"]


def test_plain_protobuf_json_document_and_directories(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pretty-printed .json document with MessageToJson's base64 ids and enum names, in a directory."""
    clean = _json([str(exported.jsonl)], capsys)
    half = len(exported.spans) // 2
    (tmp_path / "one.json").write_text(MessageToJson(encode_spans(exported.spans[:half])))
    (tmp_path / "nested").mkdir()
    write_jsonl(tmp_path / "nested" / "two.jsonl", exported.spans[half:])
    (tmp_path / "notes.txt").write_text("not read")
    report = _json([str(tmp_path)], capsys)
    assert len(report["input"]["files"]) == 2 and report["input"]["skipped_lines"] == 0
    _same(report["groups"], clean["groups"])


def test_phases_from_attributes_without_phase_spans(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = _json([str(exported.jsonl)], capsys)
    ops_only = [s for s in exported.spans if "openai_latency.phase" not in (s.attributes or {})]
    report = _json([str(write_jsonl(tmp_path / "ops.jsonl", ops_only))], capsys)
    assert report["input"]["phase_spans"] == 0
    for group, expected in zip(report["groups"], clean["groups"], strict=True):
        assert group["calls"] == expected["calls"] and group["duration"] == expected["duration"]
        assert set(group["phases"]) == set(expected["phases"])
        for phase, stats in group["phases"].items():
            assert stats["p50"] == pytest.approx(expected["phases"][phase]["p50"], abs=1e-5)
        assert group["slow"]["dominant_phase"] == expected["slow"]["dominant_phase"]


def test_error_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _report([str(tmp_path / "missing.jsonl")], capsys)
    assert code == 1 and f"no such file or directory: {tmp_path / 'missing.jsonl'}" in err
    (tmp_path / "empty").mkdir()
    code, _, err = _report([str(tmp_path / "empty")], capsys)
    assert code == 1 and "no trace files in" in err and "*.jsonl" in err

    # spans, but none of ours: say what was found instead
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    for _ in range(2):
        with tracer.start_as_current_span("GET /ask"), tracer.start_as_current_span("SELECT users"):
            pass
    other = write_jsonl(tmp_path / "other.jsonl", list(exporter.get_finished_spans()))
    code, out, err = _report([str(other)], capsys)
    assert code == 1 and out == ""
    assert "no operation spans found" in err and "4 span(s) of other names" in err
    assert "'GET /ask' (2)" in err and "'SELECT users' (2)" in err

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('oops\n{"resourceMetrics": []}\n')
    code, _, err = _report([str(garbage)], capsys)
    assert code == 1 and "found no spans at all" in err and "1 line(s) were not OTLP trace JSON" in err
    assert "1 line(s) held metrics or logs" in err

    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(garbage), "--by", "colour"])
    assert exit_info.value.code == 2
    assert "unknown key 'colour'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["report", str(garbage), "--slow-threshold", "-1"])
    assert "positive number of seconds" in capsys.readouterr().err


def test_help_names_the_percentile_method(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "linear interpolation" in capsys.readouterr().out

"""``openai-latency report --by trace`` and ``compare --by trace`` through the command (``main(argv, out,
err)``), on traces built at exact times (tests/support/turns.py), read from OTLP JSON files and from
Jaeger's query API, and on a live turn: real calls of the SDK, instrumented, against the fake server."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanKind

from openai_latency.cli.spans import files
from openai_latency.fake_server import FakeServer
from tests.support.cli_runs import run_cli
from tests.support.fake_jaeger import FakeJaeger
from tests.support.otlp_files import jaeger_traces, write_jsonl
from tests.support.span_checks import Captured
from tests.support.turns import TraceBuilder, trace_id

STREAM = [("request_build", 1), ("network_wait", 99), ("first_token", 200), ("stream_drain", 100)]
VLLM = {
    "gen_ai.latency.time_in_queue": 0.040,
    "gen_ai.latency.time_to_first_token": 0.130,
    "gen_ai.latency.time_in_model_prefill": 0.090,
    "gen_ai.latency.time_in_model_decode": 0.200,
    "gen_ai.latency.e2e": 0.330,
}


def _turns(
    builder: TraceBuilder, count: int, extra_self_ms: float = 0.0, step_ms: float = 100.0
) -> list[str]:
    """``count`` agent turns: a streamed call (400 ms) beside a short one, a tool (350 ms), a DB query
    (80 ms) in another service, the server's span below the long call; turn i is i * ``step_ms`` ms
    longer at its end (own code) and ``extra_self_ms`` longer between the tool and the query."""
    ids = []
    for i in range(count):
        at, extra = i * 10_000, extra_self_ms
        root = builder.span("agent turn", at, at + 1000 + extra + i * step_ms, kind=SpanKind.SERVER)
        _, phases = builder.llm(at + 50, STREAM, root)
        builder.span(
            "llm_request", at + 52, at + 382, phases["network_wait"], kind=SpanKind.SERVER,
            service="vllm", attributes=VLLM,
        )  # fmt: skip
        builder.llm(at + 60, [("request_build", 1), ("network_wait", 49), ("response_read", 50)], root)
        builder.tool("search", at + 450, at + 800, root)
        builder.span("SELECT", at + 820 + extra, at + 900 + extra, root, service="db")
        ids.append(trace_id(root))
    return ids


def test_text_says_where_the_turns_time_went(tmp_path: Path) -> None:
    builder = TraceBuilder()
    ids = _turns(builder, 5)
    path = builder.write(tmp_path / "traces.jsonl")
    result = run_cli(["report", str(path), "--by", "trace"])
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("openai-latency report --by trace: 5 trace(s) in 65 spans")
    # own code per turn: 50 + 20 + 100 + i * 100 ms -> p50 370 ms; duration p50 1.2 s, p95 1.38 s
    assert (
        "agent turn p50 1.20 s: model 400.0 ms (first_token 200.0 ms, stream_drain 100.0 ms), tools 350.0 ms,"
        " other spans 80.0 ms, own code 370.0 ms (p95 1.38 s, 5 turns)"
    ) in lines
    assert (
        "  LLM calls: 10 (5 off the path, overlapped; 0 inside tools), tokens 1000 in / 200 out,"
        in result.out
    )
    assert (
        "server's own span joined for 5 of 10 calls; on the path, summed over the turns:"
        " queue 200.0 ms, prefill 450.0 ms, decode 1.00 s, rest 350.0 ms"
    ) in result.out
    assert "slow turns (>= p95 1.38 s): 1 of 5" in result.out
    assert (
        f"    {ids[4]} 1.40 s: own code 570.0 ms (41%); server: queue 40.0 ms, prefill 90.0 ms," in result.out
    )


def test_json_has_designs_keys_per_trace_and_per_root_name(tmp_path: Path) -> None:
    builder = TraceBuilder()
    ids = _turns(builder, 3)
    report = run_cli(
        ["report", str(builder.write(tmp_path / "t.jsonl")), "--by", "trace", "--format", "json"]
    ).json()
    traces = {trace["trace_id"]: trace for trace in report["traces"]}
    assert set(traces) == set(ids) and all(re.fullmatch(r"[0-9a-f]{32}", key) for key in traces)
    first = traces[ids[0]]
    assert (first["root"], first["duration"], first["llm_calls"], first["llm_calls_off_path"]) == (
        "agent turn",
        1.0,
        2,
        1,
    )
    path = first["critical_path"]
    assert {key: round(path[key], 9) for key in ("llm", "tool", "other", "self")} == {
        "llm": 0.4, "tool": 0.35, "other": 0.08, "self": 0.17
    }  # fmt: skip
    assert path["llm_phases"] == pytest.approx(
        {"request_build": 0.001, "network_wait": 0.099, "first_token": 0.2, "stream_drain": 0.1}
    )
    assert path["server"] == pytest.approx(
        {"queue": 0.04, "prefill": 0.09, "decode": 0.2, "rest": 0.07, "calls": 1}
    )
    assert [(s["category"], round(s["duration"], 9)) for s in first["path"]] == [
        ("self", 0.05), ("llm", 0.4), ("tool", 0.35), ("self", 0.02), ("other", 0.08), ("self", 0.1)
    ]  # fmt: skip
    assert first["tokens"] == {"input": 200, "output": 40} and first["retries"] == first["errors"] == 0
    (group,) = report["groups"]
    assert group["root"] == "agent turn" and group["traces"] == 3
    assert group["duration"]["p50"] == pytest.approx(1.1) and group["duration"]["p95"] == pytest.approx(1.19)
    assert group["critical_path"]["self"]["p50"] == pytest.approx(0.27)
    assert group["share"]["llm"]["p50"] == pytest.approx(0.4 / 1.1)
    assert group["slow"]["turns"][0]["trace_id"] == ids[2] and group["slow"]["turns"][0]["dominant"] == "llm"


def test_the_msgspec_readers_nodes_give_the_general_readers_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The msgspec reader makes each node straight from its decoder (no ``Span`` in between, attribute
    values decoded when read) and skips the attribute phases of a call whose phase spans came right
    before it (an exporter's order, by end): text and JSON are those of the general reader's spans."""
    builder = TraceBuilder()
    _turns(builder, 4)
    by_end = sorted(builder.exported, key=lambda span: span.end_time or 0)
    path = write_jsonl(tmp_path / "t.jsonl", by_end, batch=20)
    text = ["report", str(path), "--by", "trace"]
    argvs = [text, [*text, "--format", "json"]]
    fast = [run_cli(argv).out for argv in argvs]
    monkeypatch.setattr(files, "_decode_line", None)
    assert [run_cli(argv).out for argv in argvs] == fast
    assert '"llm_calls":2' in fast[1]


def test_the_per_call_report_counts_no_tool_or_agent_span(tmp_path: Path) -> None:
    """A turn's other GenAI spans carry ``gen_ai.operation.name`` too (``execute_tool``,
    ``invoke_agent``, ``create_agent``): ``report`` without ``--by trace`` counts the calls only."""
    builder = TraceBuilder()
    _turns(builder, 2)  # two calls and a tool each
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    root = builder.span("invoke_agent planner", 50_000, 50_300, attributes=agent)
    builder.span(
        "create_agent planner",
        50_010,
        50_020,
        root,
        attributes={**agent, "gen_ai.operation.name": "create_agent"},
    )
    builder.llm(50_100, [("request_build", 1), ("network_wait", 49), ("response_read", 50)], root)
    result = run_cli(["report", str(builder.write(tmp_path / "traces.jsonl")), "--format", "json"])
    assert result.code == 0, result.err
    report = result.json()
    assert report["input"]["operation_spans"] == 5
    assert [(g["key"]["model"], g["calls"]) for g in report["groups"]] == [("gpt-4o-mini", 5)]


def test_jaeger_gives_the_turns_of_the_file(tmp_path: Path) -> None:
    builder = TraceBuilder(origin_ns=time.time_ns() - 600 * 10**9)  # in Jaeger's last hour
    _turns(builder, 4)
    served = jaeger_traces(builder.exported)
    random.Random(3).shuffle(served)
    for trace in served:
        trace["spans"].reverse()  # Jaeger's order: children before or after their parent
    from_file = run_cli(
        ["report", str(builder.write(tmp_path / "t.jsonl")), "--by", "trace", "--format", "json"]
    )
    with FakeJaeger(served) as jaeger:
        from_jaeger = run_cli(["report", "--jaeger", jaeger.url, "--by", "trace", "--format", "json"])
    assert from_jaeger.code == 0, from_jaeger.err
    file_traces = {t["trace_id"]: t for t in from_file.json()["traces"]}
    jaeger_traces_ = {t["trace_id"]: t for t in from_jaeger.json()["traces"]}
    assert file_traces.keys() == jaeger_traces_.keys() and len(file_traces) == 4
    for key, trace in file_traces.items():  # whole ms: Jaeger's microseconds cut nothing here
        assert jaeger_traces_[key]["critical_path"] == pytest.approx(
            {k: v for k, v in trace["critical_path"].items() if k not in ("llm_phases", "server")}
            | {"llm_phases": pytest.approx(trace["critical_path"]["llm_phases"]),
               "server": pytest.approx(trace["critical_path"]["server"])}
        )  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--by", "trace,model"], "give it alone"),
        (["--by", "trace", "--waterfall", "3"], "--waterfall is for calls"),
        (["--by", "trace", "--compare"], "--compare is for calls"),
    ],
)
def test_options_of_calls_are_refused_with_by_trace(tmp_path: Path, argv: list[str], message: str) -> None:
    builder = TraceBuilder()
    _turns(builder, 1)
    result = run_cli(["report", str(builder.write(tmp_path / "t.jsonl")), *argv])
    assert result.code == 2 and message in result.err


def test_compare_gates_on_turn_figures(tmp_path: Path) -> None:
    base, slower = TraceBuilder(), TraceBuilder()
    _turns(base, 20, step_ms=5)
    _turns(slower, 20, extra_self_ms=100, step_ms=5)  # 100 ms more own code in every turn
    a, b = base.write(tmp_path / "base.jsonl"), slower.write(tmp_path / "current.jsonl")
    gate = ["--fail-if", "self.p50>+50ms", "--fail-if", "duration.p95>+20%", "--fail-if", "llm.p50>+1ms"]
    result = run_cli(["compare", str(a), str(b), "--by", "trace", *gate])
    assert result.code == 1, result.err
    assert re.search(r"FAILED: self\.p50>\+50ms in agent turn: \+100\.0 ms, \+\d+\.\d% ", result.out)
    assert "ok: duration.p95>+20% in agent turn: +100.0 ms, +9.2%" in result.out  # 1.090 s -> 1.190 s
    assert "ok: llm.p50>+1ms in agent turn: 0.00 ms" in result.out
    assert "FAILED: self.p50>+50ms" in result.err
    document = run_cli(["compare", str(a), str(b), "--by", "trace", *gate, "--format", "json"]).json()
    metrics = document["groups"][0]["metrics"]
    assert metrics["self.p50"]["difference"] == pytest.approx(0.1) and metrics["self.p50"]["significant"]
    assert [c["failed"] for c in document["groups"][0]["conditions"]] == [True, False, False]
    same = run_cli(["compare", str(a), str(a), "--by", "trace", "--fail-if", "self.p50>+50ms"])
    assert same.code == 0 and "ok: self.p50>+50ms" in same.out


def test_turn_metrics_need_by_trace_and_call_metrics_refuse_it(tmp_path: Path) -> None:
    builder = TraceBuilder()
    _turns(builder, 2)
    path = str(builder.write(tmp_path / "t.jsonl"))
    result = run_cli(["compare", path, path, "--fail-if", "self.p50>+50ms"])
    assert result.code == 2 and "needs --by trace" in result.err
    result = run_cli(["compare", path, path, "--by", "trace", "--fail-if", "ttft.p95>+10%"])
    assert (
        result.code == 2 and "with --by trace the metrics are duration, llm, tool, other, self" in result.err
    )


def test_a_live_turn_of_instrumented_calls(
    instrument: Callable[..., Captured], tracer_provider: TracerProvider, server: FakeServer, tmp_path: Path
) -> None:
    """The app's own spans and the instrumentation's, from real calls against the fake server: the path's
    numbers are the spans' own (whatever the machine's speed)."""
    captured = instrument()
    tracer = tracer_provider.get_tracer("app")
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    script = {"x-fake-ttft-ms": "30", "x-fake-chunks": "4", "x-fake-chunk-delay-ms": "5"}
    with tracer.start_as_current_span("agent turn", kind=SpanKind.SERVER):
        for _ in client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}],
                                                 stream=True, extra_headers=script):  # fmt: skip
            pass
        with tracer.start_as_current_span(
            "execute_tool lookup", attributes={"gen_ai.operation.name": "execute_tool"}
        ):
            time.sleep(0.02)
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    spans = captured.spans()
    result = run_cli(
        ["report", str(write_jsonl(tmp_path / "t.jsonl", spans)), "--by", "trace", "--format", "json"]
    )
    (trace,) = result.json()["traces"]
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)

    def seconds(span: ReadableSpan) -> float:
        assert span.end_time is not None and span.start_time is not None
        return (span.end_time - span.start_time) / 1e9

    calls = by_name["chat gpt-4o"] + by_name["chat gpt-4o-mini"]
    assert trace["root"] == "agent turn" and trace["llm_calls"] == 2
    assert all(call["on_path"] for call in trace["calls"])
    path: dict[str, Any] = trace["critical_path"]
    assert path["llm"] == pytest.approx(sum(seconds(span) for span in calls), abs=1e-9)
    assert path["tool"] == pytest.approx(seconds(by_name["execute_tool lookup"][0]), abs=1e-9)
    assert path["self"] == pytest.approx(
        seconds(by_name["agent turn"][0]) - path["llm"] - path["tool"], abs=1e-9
    )
    phases: dict[str, float] = {}
    for span in spans:
        phase = (span.attributes or {}).get("openai_latency.phase")
        if isinstance(phase, str) and span.name.startswith("openai."):
            phases[phase] = phases.get(phase, 0.0) + seconds(span)
    assert path["llm_phases"] == pytest.approx(phases, abs=1e-9)
    assert {"first_token", "stream_drain", "response_read"} <= set(phases)


class _Bars(HTMLParser):
    """The bars of the turn waterfall page, per turn: (category, start, duration)."""

    def __init__(self) -> None:
        super().__init__()
        self.turns: dict[str, list[tuple[str, float, float]]] = {}
        self._turn = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section" and found.get("data-trace-id"):
            self._turn = str(found["data-trace-id"])
            self.turns[self._turn] = []
        elif tag == "div" and found.get("data-category"):
            bar = (
                str(found["data-category"]),
                float(found["data-start"] or 0),
                float(found["data-duration"] or 0),
            )
            self.turns[self._turn].append(bar)


def test_html_draws_each_turns_path_and_the_calls_off_it(tmp_path: Path) -> None:
    builder = TraceBuilder()
    ids = _turns(builder, 3)
    builder.span("<script>alert(1)</script>", 0, 10)  # a name that must be escaped
    path, page = builder.write(tmp_path / "t.jsonl"), tmp_path / "turns.html"
    result = run_cli(["report", str(path), "--by", "trace", "--html", str(page), "--format", "json"])
    assert result.code == 0 and f"turn waterfalls: {page}" in result.err
    text = page.read_text(encoding="utf-8")
    assert "<script>" not in text and "&lt;script&gt;" in text
    parser = _Bars()
    parser.feed(text)
    assert set(ids) <= set(parser.turns)
    for trace in result.json()["traces"]:
        drawn = parser.turns[trace["trace_id"]]
        expected = [(s["category"], s["start"], s["duration"]) for s in trace["path"]]
        expected += [("off_path", c["start"], c["duration"]) for c in trace["calls"] if not c["on_path"]]
        assert [(c, round(s, 6), round(d, 6)) for c, s, d in drawn] == [
            (c, round(s, 6), round(d, 6)) for c, s, d in expected
        ]
    assert [category for category, _, _ in parser.turns[ids[0]]] == [
        "self", "llm", "tool", "self", "other", "self", "off_path"
    ]  # fmt: skip

"""The critical path of a whole trace (``report --by trace``'s computation) on traces built at exact
times with the OTel SDK, in several services, written as the collector's file exporter writes them
and read back by the report's own reader: every expected number below is worked out by hand from
the times given."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.trace import Span, SpanKind

from openai_latency.cli.spans import files
from openai_latency.cli.spans.files import read_spans, read_spans_as
from openai_latency.cli.spans.span import ReadStats
from openai_latency.cli.spans.traces import NodeMaker, TraceReadStats, assemble_nodes, assemble_traces
from openai_latency.cli.stats.critical_path import CATEGORIES, Turn, analyze
from openai_latency.cli.stats.turns import group_turns
from tests.support.otlp_files import write_jsonl
from tests.support.turns import ORIGIN_NS, TraceBuilder, trace_id

STREAM = [("request_build", 1), ("network_wait", 99), ("first_token", 200), ("stream_drain", 100)]
STREAM_MS = {"request_build": 1, "network_wait": 99, "first_token": 200, "stream_drain": 100}


def _turns(builder: TraceBuilder, tmp_path: Path, batch: int = 7) -> dict[str, Turn]:
    path = builder.write(tmp_path / "traces.jsonl", batch=batch)
    turns = [analyze(trace) for trace in assemble_traces(read_spans([path], ReadStats()))]
    return {turn.trace_id: turn for turn in turns}


def _ms(values: dict[str, float]) -> dict[str, float]:
    return {name: round(seconds * 1e3, 6) for name, seconds in values.items() if seconds}


def _id(span: Span) -> str:
    return f"{span.get_span_context().span_id:016x}"


def _assert_path_is_the_turn(turn: Turn) -> None:
    assert sum(turn.path.values()) == pytest.approx(turn.duration, abs=1e-9)
    for before, after in zip(turn.segments, turn.segments[1:], strict=False):
        assert before.end_ns == after.start_ns  # back to back, from the turn's start to its end
    assert turn.segments[0].start_ns == turn.start_ns and turn.segments[-1].end_ns == turn.end_ns


def test_sequential_turn_splits_into_model_tools_other_and_own_code(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("agent turn", 0, 1000, kind=SpanKind.SERVER)
    b.llm(50, STREAM, root)  # 50..450
    b.tool("search", 450, 800, root)
    b.span("SELECT orders", 820, 900, root, attributes={"db.system": "postgresql"})
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert turn.root == "agent turn" and turn.duration == pytest.approx(1.0)
    assert _ms(turn.path) == {"llm": 400, "tool": 350, "other": 80, "self": 170}
    assert _ms(turn.llm_phases) == {
        "request_build": 1,
        "network_wait": 99,
        "first_token": 200,
        "stream_drain": 100,
    }
    assert [s.category for s in turn.segments] == ["self", "llm", "tool", "self", "other", "self"]
    assert len(turn.calls) == 1 and turn.calls[0].on_path and turn.notes == []
    assert (turn.calls[0].input_tokens, turn.calls[0].output_tokens) == (100, 20)
    _assert_path_is_the_turn(turn)


def test_parallel_calls_put_only_the_one_that_ends_last_on_the_path(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("agent turn", 0, 600)
    short, _ = b.llm(100, [("request_build", 1), ("network_wait", 149), ("response_read", 50)], root)  # ..300
    long, _ = b.llm(100, STREAM, root)  # 100..500, side by side with the short one
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert _ms(turn.path) == {"llm": 400, "self": 200}
    assert _ms(turn.llm_phases) == {
        "request_build": 1,
        "network_wait": 99,
        "first_token": 200,
        "stream_drain": 100,
    }
    on_path = {call.span_id: call.on_path for call in turn.calls}
    assert on_path == {
        f"{long.get_span_context().span_id:016x}": True,
        f"{short.get_span_context().span_id:016x}": False,
    }
    group = group_turns([turn])[0]
    assert (group.llm_calls, group.off_path_calls) == (2, 1)
    _assert_path_is_the_turn(turn)


def test_a_tool_that_calls_the_model_is_entered(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("invoke_agent planner", 0, 1000, attributes={"gen_ai.operation.name": "invoke_agent"})
    tool = b.tool("summarize", 100, 900, root)
    b.llm(200, STREAM, tool)  # 200..600 inside the tool
    b.span("GET /docs", 650, 850, tool, kind=SpanKind.CLIENT)
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert _ms(turn.path) == {"llm": 400, "tool": 200, "other": 200, "self": 200}
    assert turn.calls[0].in_tool and turn.calls[0].on_path
    assert [s.name for s in turn.segments] == [
        "invoke_agent planner", "execute_tool summarize", "chat gpt-4o-mini", "execute_tool summarize",
        "GET /docs", "execute_tool summarize", "invoke_agent planner",
    ]  # fmt: skip
    assert group_turns([turn])[0].calls_in_tools == 1
    _assert_path_is_the_turn(turn)


def test_missing_root_runs_from_the_earliest_start_to_the_latest_end(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("agent turn", 0, 2000, export=False)  # the file holds only part of the trace
    b.llm(300, STREAM, root)  # 300..700
    b.tool("search", 900, 1200, root)
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert turn.root is None and turn.root_missing
    assert turn.start_ns == ORIGIN_NS + 300_000_000 and turn.duration == pytest.approx(0.9)
    assert _ms(turn.path) == {"llm": 400, "tool": 300, "self": 200}
    assert turn.orphans == 0
    assert turn.notes == ["root span missing: the turn runs from the earliest start to the latest end"]
    assert group_turns([turn])[0].root == "(root missing)"
    _assert_path_is_the_turn(turn)


def test_a_root_whose_caller_never_exported_is_the_turn(tmp_path: Path) -> None:
    """A service's entry span continues a traceparent whose span never arrives (a client that sends
    the header and exports nothing): it is the turn's root, said in a note."""
    b = TraceBuilder()
    caller = b.span("client", 0, 2000, export=False)
    root = b.span("GET /ask", 100, 1100, caller, kind=SpanKind.SERVER)
    b.llm(200, STREAM, root)  # 200..600
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert turn.root == "GET /ask" and not turn.root_missing and turn.caller_missing
    assert turn.duration == pytest.approx(1.0)
    assert _ms(turn.path) == {"llm": 400, "self": 600}
    assert turn.notes == [
        "the root's parent span never arrived (a caller that exported nothing): GET /ask is the turn"
    ]
    _assert_path_is_the_turn(turn)


def test_children_of_a_parent_that_never_arrived_hang_from_the_root(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("POST /ask", 0, 1000, kind=SpanKind.SERVER)
    lost = b.span("handler", 10, 990, root, export=False)
    b.llm(100, STREAM, lost)  # 100..500
    b.span("redis GET", 600, 700, lost)
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert turn.root == "POST /ask" and turn.orphans == 2
    assert _ms(turn.path) == {"llm": 400, "other": 100, "self": 500}
    assert "2 span(s) whose parent never arrived: attached to the root" in turn.notes
    _assert_path_is_the_turn(turn)


def test_skewed_clocks_of_other_services_are_clamped_to_the_parent(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("POST /ask", 0, 1000, kind=SpanKind.SERVER, service="gateway")
    call = b.span("POST /search", 100, 400, root, kind=SpanKind.CLIENT, service="gateway")
    # the search service's clock is 3 ms ahead: its server span seems to end after the client's
    served = b.span("POST /search", 103, 403, call, kind=SpanKind.SERVER, service="search")
    b.span("SELECT docs", 150, 380, served, service="search")
    b.llm(450, STREAM, root, service="gateway")  # 450..850
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert turn.clamped == 1 and turn.clamp_max == pytest.approx(0.003)
    assert _ms(turn.path) == {"llm": 400, "other": 300, "self": 300}
    assert turn.notes == ["1 span(s) clamped to their parent (up to 3.0 ms, clock skew between services)"]
    # the clamped server span ends at its parent's end: the DB query and the server's own time follow
    names = [(s.name, round((s.end_ns - s.start_ns) / 1e6, 3)) for s in turn.segments]
    assert names[1:5] == [
        ("POST /search", 3.0),
        ("POST /search", 47.0),
        ("SELECT docs", 230.0),
        ("POST /search", 20.0),
    ]
    _assert_path_is_the_turn(turn)


def test_a_child_that_outlived_its_parent_by_more_than_skew_is_said_so(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("POST /ask", 0, 500)
    b.span("send email", 400, 900, root)  # fire and forget: 400 ms after the turn
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert _ms(turn.path) == {"other": 100, "self": 400}
    assert "up to 400.0 ms, more than the 10 ms skew bound" in turn.notes[0]


VLLM = {
    "gen_ai.latency.time_in_queue": 0.040,
    "gen_ai.latency.time_to_first_token": 0.130,
    "gen_ai.latency.time_in_model_prefill": 0.090,
    "gen_ai.latency.time_in_model_decode": 0.200,
    "gen_ai.latency.time_in_model_inference": 0.290,
    "gen_ai.latency.e2e": 0.330,
    "gen_ai.request.id": "chatcmpl-1",
}


def _served_call(b: TraceBuilder, root: Span, server_start: float, parent: str = "network_wait") -> None:
    _, phases = b.llm(100, STREAM, root)  # 100..500; network_wait 101..200
    b.span(
        "llm_request", server_start, server_start + 330, phases[parent] if parent else root,
        kind=SpanKind.SERVER, service="vllm", attributes=VLLM,
    )  # fmt: skip


def test_the_servers_span_splits_the_call_into_queue_prefill_decode_and_the_rest(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("agent turn", 0, 600)
    _served_call(b, root, 105)
    turn = _turns(b, tmp_path)[trace_id(root)]
    call = turn.calls[0]
    assert call.server_status == "joined" and call.server is not None
    assert _ms(call.server.as_dict()) == {
        "queue": 40,
        "prefill": 90,
        "decode": 200,
        "rest": 70,
        "calls": 1000,
    }
    assert turn.server_path is not None and turn.server_path.rest == pytest.approx(0.070)
    assert _ms(turn.path) == {"llm": 400, "self": 200} and turn.notes == []


def test_a_server_span_outside_the_calls_window_gives_no_split(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("agent turn", 0, 900)
    _served_call(b, root, 150 + 100)  # ends at 580: 80 ms after the call, beyond the 10 ms bound
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert turn.calls[0].server is None and turn.calls[0].server_status == "outside_window"
    assert turn.server_path is None
    assert "server split of chat gpt-4o-mini not given: outside window" in turn.notes


def test_a_server_that_dropped_the_traceparent_is_named_not_split(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("agent turn", 0, 600)
    _served_call(b, root, 105, parent="")  # exported as the call's sibling: stale context
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert turn.calls[0].server_status == "no_server_span" and turn.detached_server_spans == 1
    assert _ms(turn.path) == {"llm": 400, "self": 200}  # the stray server span is not on the path
    assert "the server dropped the traceparent" in turn.notes[-1]


def test_retries_errors_and_tokens_are_counted_on_the_path_or_not(tmp_path: Path) -> None:
    b = TraceBuilder()
    root = b.span("agent turn", 0, 1000)
    retried = [("request_build", 1), ("network_wait", 50), ("retry_backoff", 250), ("request_build", 1),
               ("network_wait", 98), ("response_read", 100)]  # fmt: skip
    operation, _ = b.llm(0, retried, root, tokens=(300, 40))
    b.span("openai.network_wait", 1, 51, operation, attributes={"openai_latency.phase": "network_wait"})
    b.llm(100, [("request_build", 1), ("network_wait", 20)], root, error="rate_limit_exceeded", tokens=(0, 0))
    turn = _turns(b, tmp_path)[trace_id(root)]
    group = group_turns([turn])[0]
    # three network_wait spans on the first call: 2 retries; the failed call is off the path
    assert (group.llm_calls, group.retries, group.errors) == (2, 2, 1)
    assert (group.input_tokens, group.output_tokens) == (300, 40)
    assert [call.on_path for call in turn.calls] == [True, False]


def test_groups_give_percentiles_per_root_name_and_the_slow_turns(tmp_path: Path) -> None:
    b = TraceBuilder()
    ids = []
    for index in range(5):
        root = b.span("agent turn", index * 10_000, index * 10_000 + 1000 + 200 * index)
        b.llm(index * 10_000 + 100, [("request_build", 1), ("network_wait", 99 + 250 * index)], root)
        ids.append(trace_id(root))
    b.span("healthz", 0, 5)
    groups = group_turns(_turns(b, tmp_path).values())
    assert [(g.root, len(g.turns)) for g in groups] == [("agent turn", 5), ("healthz", 1)]
    turn_group = groups[0]
    assert turn_group.duration.p50 == pytest.approx(1.4) and turn_group.duration.p95 == pytest.approx(1.76)
    # model 100, 350, 600, 850, 1100 ms; own code 900, 850, 800, 750, 700 ms
    assert turn_group.path["llm"].p50 == pytest.approx(0.6) and turn_group.path["self"].p50 == pytest.approx(
        0.8
    )
    assert turn_group.share["llm"].p50 == pytest.approx(600 / 1400)
    assert [slow.turn.trace_id for slow in turn_group.slow] == [ids[4]]  # >= p95: the slowest
    slowest = turn_group.slow[0]
    assert (slowest.category, slowest.phase) == ("llm", "network_wait")
    assert slowest.seconds == pytest.approx(1.1) and slowest.share == pytest.approx(1.1 / 1.8)
    assert slowest.phase_seconds == pytest.approx(1.099)


def test_a_ten_thousand_span_trace(tmp_path: Path) -> None:
    b = TraceBuilder()
    steps = 2500  # each: a tool (10i+1 .. 10i+9) calling the model (10i+2 .. 10i+8), two phases
    root = b.span("agent turn", 0, steps * 10)
    for i in range(steps):
        tool = b.tool("step", 10 * i + 1, 10 * i + 9, root)
        b.llm(10 * i + 2, [("network_wait", 2), ("response_read", 4)], tool)
    assert len(b.exported) == 10_001  # the root and 2,500 x 4
    turn = _turns(b, tmp_path, batch=512)[trace_id(root)]
    assert turn.spans == 10_001 and len(turn.calls) == steps
    assert _ms(turn.path) == {"llm": 6 * steps, "tool": 2 * steps, "self": 2 * steps}
    assert _ms(turn.llm_phases) == {"network_wait": 2 * steps, "response_read": 4 * steps}
    _assert_path_is_the_turn(turn)


def test_memory_holds_the_open_traces_not_the_file(tmp_path: Path) -> None:
    """Traces one after another: with a window of 50 spans after each root, at most the traces in
    that window are held, and a span arriving after its trace was handed on is counted, not a new trace."""
    b = TraceBuilder()
    for index in range(40):
        root = b.span("turn", index * 100, index * 100 + 50)
        for k in range(9):
            b.span("step", index * 100 + k, index * 100 + k + 1, root)
    b.exported.append(b.exported.pop(15))  # a step of trace 1 comes at the very end: late
    path = b.write(tmp_path / "t.jsonl", batch=10)
    stats = TraceReadStats()
    traces = list(assemble_traces(read_spans([path], ReadStats()), stats, window=50))
    assert len(traces) == 40 and stats.spans == 400
    assert stats.late_spans == 1 and len(stats.late_traces) == 1
    assert stats.max_open_nodes <= 70  # 50 spans of window + the trace being read
    assert all(set(CATEGORIES) == set(analyze(trace).path) for trace in traces)


def test_an_agent_frameworks_span_around_our_call_is_the_same_call(tmp_path: Path) -> None:
    """OpenLLMetry's ``openai.response`` (``gen_ai.operation.name=chat``) around our ``chat <model>``:
    one call, the wrapper's own time ``other``; OpenInference's tool span (``openinference.span.kind``)
    a tool."""
    b = TraceBuilder()
    root = b.span("agent turn", 0, 1000, kind=SpanKind.SERVER)
    wrapper = b.span("openai.response", 100, 520, root, attributes={"gen_ai.operation.name": "chat"})
    b.llm(110, STREAM, wrapper)  # 110..510
    b.span("search", 600, 900, root, attributes={"openinference.span.kind": "TOOL"})
    turn = _turns(b, tmp_path)[trace_id(root)]
    assert [call.name for call in turn.calls] == ["chat gpt-4o-mini"]
    assert _ms(turn.path) == {"llm": 400, "tool": 300, "other": 20, "self": 280}
    _assert_path_is_the_turn(turn)


def test_a_calls_phase_spans_replace_its_attribute_phases_in_any_span_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call with phase spans takes its phases from them, one without from its own
    ``openai_latency.phase.*``, whatever order the spans come in: as built (each call before its phase
    spans) or as an exporter writes them (by end: a call's phase spans right before it, when the reader
    does not look for its attribute phases), by the msgspec reader's nodes or the general reader's."""
    b = TraceBuilder()
    root = b.span("agent turn", 0, 1000)
    attributes = {"gen_ai.operation.name": "chat", "openai_latency.phase.network_wait": 0.7}
    spanned = b.span("chat a", 10, 960, root, attributes=attributes)
    for phase, start, end in (("network_wait", 10, 110), ("first_token", 110, 950)):
        b.span(f"openai.{phase}", start, end, spanned, attributes={"openai_latency.phase": phase})
    b.span("chat b", 500, 900, root, attributes=attributes)  # comes right after a's network_wait by end
    built = list(b.exported)
    expected = {"chat a": {"network_wait": 100, "first_token": 840}, "chat b": {"network_wait": 700}}
    for order in (built, sorted(built, key=lambda span: span.end_time or 0)):
        path = write_jsonl(tmp_path / "traces.jsonl", order, batch=50)
        for fast in (True, False):
            with monkeypatch.context() as patch:
                if not fast:
                    patch.setattr(files, "_decode_line", None)
                nodes = read_spans_as([path], ReadStats(), NodeMaker().node, lazy_values=True)
                (turn,) = [analyze(trace) for trace in assemble_nodes(nodes)]
            assert {call.name: _ms(call.phases) for call in turn.calls} == expected

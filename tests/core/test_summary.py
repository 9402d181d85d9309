"""The rules of a finished call, without spans, SDK or server: hand-made timelines in, attributes and
measurements out (:mod:`openai_latency.call.summary`), and the data methods the hooks call on
:class:`Attempt`, :class:`Backoff` and :class:`Timeline` (:mod:`openai_latency.call.timeline`).
"""

from __future__ import annotations

import json
import logging
from array import array
from typing import Any

import pytest

from openai_latency import _guard
from openai_latency.call.summary import (
    MAX_GAP_POINTS,
    call_summary,
    measurements,
    spread_sample,
    stream_summary,
)
from openai_latency.call.timeline import Attempt, Backoff, Timeline
from openai_latency.model import ANSWER, StreamStats

MS = 1_000_000
T0 = 1_000 * MS  # the call starts here; every mark below is T0 + a few ms


class Response:
    """What ``Attempt.record_response`` reads of an httpx(2) response."""

    def __init__(
        self, status: int, headers: dict[str, str] | None = None, body: Any = None, version: str = "HTTP/1.1"
    ) -> None:
        self.status_code = status
        self.headers = headers or {}
        self.http_version = version
        self.content = b"" if body is None else json.dumps(body).encode()


def _events(start: int, sent: int, headers: int, connect: bool = False) -> list[tuple[str, int]]:
    """httpcore trace events of one HTTP/1.1 request (absolute ns)."""
    events = []
    if connect:
        events += [
            ("connection.connect_tcp.started", start + 1),
            ("connection.connect_tcp.complete", start + 2),
        ]
    events += [
        ("http11.send_request_headers.started", start + 3),
        ("http11.send_request_headers.complete", start + 4),
        ("http11.send_request_body.started", start + 5),
        ("http11.send_request_body.complete", sent),
        ("http11.receive_response_headers.started", sent + 1),
        ("http11.receive_response_headers.complete", headers),
    ]
    return events


def _retried_call() -> Timeline:
    """Request build 2 ms, a 429 (rate_limit_exceeded) after 10 ms, a 250 ms backoff, a rebuild of
    1 ms, then a 200 whose headers come 40 ms after the send and whose body is read 5 ms later."""
    timeline = Timeline(start_ns=T0)
    first = timeline.begin_attempt(T0 + 2 * MS, None)
    first.events += _events(first.start_ns, T0 + 3 * MS, T0 + 12 * MS, connect=True)
    body = {"error": {"code": "rate_limit_exceeded", "message": "slow down"}}
    first.record_response(Response(429, {"retry-after-ms": "250"}, body), T0 + 12 * MS)
    backoff = timeline.begin_backoff(T0 + 12 * MS, Response(429), None)
    assert backoff is not None
    backoff.note_delay(0.25, {"retry-after-ms": "250"})
    backoff.end(T0 + 262 * MS)
    second = timeline.begin_attempt(T0 + 263 * MS, None)
    second.events += _events(second.start_ns, T0 + 264 * MS, T0 + 303 * MS)
    headers = {"x-request-id": "req_1", "openai-processing-ms": "30", "x-ratelimit-remaining-requests": "9"}
    second.record_response(Response(200, headers), T0 + 303 * MS)
    timeline.end_ns = T0 + 308 * MS
    return timeline


# --- call_summary --------------------------------------------------------------------------------


def test_a_retried_call() -> None:
    timeline = _retried_call()
    phases = timeline.phases(http_subphases=True)
    assert [p.name for p in phases] == [
        "request_build",
        "network_wait",
        "retry_backoff",
        "request_build",
        "network_wait",
        "response_read",
    ]
    assert [p.attributes.get("http.request.resend_count") for p in phases] == [None, 0, None, 1, 1, None]
    out = call_summary(timeline, phases)
    assert out["openai_latency.attempts"] == 2
    assert out["http.request.resend_count"] == 1
    assert out["openai_latency.retry.error_types"] == ["rate_limit_exceeded"]
    assert out["http.response.status_code"] == 200
    assert out["openai_latency.dominant_phase"] == "retry_backoff"
    assert out["openai_latency.phase.retry_backoff"] == pytest.approx(0.250)
    assert out["openai_latency.phase.request_build"] == pytest.approx(0.003)  # 2 ms + the 1 ms rebuild
    assert out["openai_latency.phase.network_wait"] == pytest.approx(0.050)  # 10 ms + 40 ms
    assert out["openai_latency.phase.response_read"] == pytest.approx(0.005)
    assert out["openai_latency.connection.reused"] is True  # the retry went out on the same connection
    assert out["openai_latency.request_id"] == "req_1"
    assert out["openai_latency.ratelimit.remaining_requests"] == 9
    backoff = phases[2].attributes
    assert backoff["openai_latency.retry.reason"] == "rate_limit_exceeded"
    assert backoff["openai_latency.retry.delay_source"] == "retry-after-ms"
    assert backoff["openai_latency.retry.delay"] == 0.25


def test_retry_error_types_fall_back_to_the_status_then_other() -> None:
    timeline = Timeline(start_ns=T0)
    for status in (503, 0, 200):
        attempt = timeline.begin_attempt(T0 + MS, None)
        if status:
            attempt.record_response(Response(status), T0 + 2 * MS)
    timeline.end_ns = T0 + 3 * MS
    out = call_summary(timeline, timeline.phases(http_subphases=False))
    assert out["openai_latency.retry.error_types"] == ["503", "_OTHER"]


def test_network_overhead_is_the_server_wait_minus_the_servers_processing_time() -> None:
    timeline = _retried_call()
    out = call_summary(timeline, timeline.phases(http_subphases=False))
    # body sent at +264 ms, headers at +303 ms: 39 ms of server wait, 30 of them processing
    assert out["openai_latency.server.processing_time"] == pytest.approx(0.030)
    assert out["openai_latency.network.overhead"] == pytest.approx(0.009)


def test_network_overhead_without_trace_events_uses_the_whole_attempt() -> None:
    timeline = Timeline(start_ns=T0)
    attempt = timeline.begin_attempt(T0 + MS, None)
    attempt.record_response(Response(200, {"openai-processing-ms": "15"}), T0 + 21 * MS)
    timeline.end_ns = T0 + 22 * MS
    out = call_summary(timeline, timeline.phases(http_subphases=False))
    assert out["openai_latency.network.overhead"] == pytest.approx(0.005)  # 20 ms - 15 ms
    assert "openai_latency.connection.reused" not in out  # no trace events: unknown


def test_a_call_without_any_attempt() -> None:
    """Failed before sending (argument error inside the SDK): one request_build phase, no HTTP."""
    timeline = Timeline(start_ns=T0, end_ns=T0 + MS)
    out = call_summary(timeline, timeline.phases(http_subphases=True))
    assert out == {
        "openai_latency.phase.request_build": pytest.approx(0.001),
        "openai_latency.dominant_phase": "request_build",
        "openai_latency.attempts": 0,
    }


# --- stream_summary ------------------------------------------------------------------------------


def _stream(
    output_chunks: int, output_gaps: int, gap_ms: int = 10, last_doubt_ms: int = 0
) -> tuple[Timeline, StreamStats]:
    """A stream whose first answer token was waited for at T0 + 50 ms, then ``output_chunks - 1`` more
    ``gap_ms`` apart, ``output_gaps`` of those gaps observed. The last token was buffered behind
    ``last_doubt_ms`` of the caller's own work (0: it was waited for, or the caller was idle)."""
    first = T0 + 50 * MS
    last = first + (output_chunks - 1) * gap_ms * MS
    timeline = Timeline(
        start_ns=T0, streaming=True, first_token_ns=first, first_answer_ns=first, end_ns=T0 + 500 * MS
    )
    st = StreamStats(
        chunks=output_chunks + 2,
        token_chunks=output_chunks,
        answering=True,
        channels=ANSWER,
        token_gaps=output_gaps,
        token_gap_ns=output_gaps * gap_ms * MS,
        first_chunk_ns=T0 + 40 * MS,
        last_token_ns=last,
        last_token_doubt_ns=last_doubt_ms * MS,
    )
    return timeline, st


def test_stream_times_to_first_chunk_and_token() -> None:
    timeline, st = _stream(output_chunks=10, output_gaps=9)
    out = stream_summary(timeline, st, None)
    assert out["openai_latency.stream.end_state"] == "completed"
    assert out["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.040)
    assert out["openai_latency.time_to_first_token"] == pytest.approx(0.050)  # waited for: its arrival
    assert out["openai_latency.time_to_first_answer_token"] == pytest.approx(0.050)
    assert out["openai_latency.reasoning.visibility"] == "none"
    assert "openai_latency.reasoning.duration" not in out


def test_a_first_token_that_was_already_waiting_after_the_callers_work_has_no_ttft() -> None:
    """Handed over 5 ms after the last observed arrival (the caller's own work): it arrived somewhere
    in those 5 ms, more than 5 % of 50 ms: no TTFT rather than one that is wrong either way."""
    timeline, st = _stream(output_chunks=10, output_gaps=9)
    st.first_token_doubt_ns = st.first_answer_doubt_ns = 5 * MS
    out = stream_summary(timeline, st, None)
    assert "openai_latency.time_to_first_token" not in out
    assert "openai_latency.time_to_first_answer_token" not in out
    assert out["openai_latency.stream.first_token_waiting"] is True
    st.first_token_doubt_ns = st.first_answer_doubt_ns = 2 * MS  # within 2 ms: sure enough
    assert stream_summary(timeline, st, None)["openai_latency.time_to_first_token"] == pytest.approx(0.050)


def test_usage_is_estimated_from_output_chunks_when_the_stream_has_none() -> None:
    timeline, st = _stream(output_chunks=10, output_gaps=9)
    out = stream_summary(timeline, st, "closed_early")
    assert out["openai_latency.stream.end_state"] == "closed_early"
    assert out["openai_latency.usage.estimated"] is True
    assert "gen_ai.usage.output_tokens" not in out  # an estimate is not the provider's count
    assert out["openai_latency.time_per_output_token"] == pytest.approx(0.010)


def test_usage_from_the_stream_wins_over_the_estimate() -> None:
    class Usage:
        prompt_tokens, completion_tokens = 7, 19

    timeline, st = _stream(output_chunks=10, output_gaps=9)
    st.usage = Usage()
    out = stream_summary(timeline, st, None)
    assert out["gen_ai.usage.output_tokens"] == 19 and out["gen_ai.usage.input_tokens"] == 7
    assert "openai_latency.usage.estimated" not in out
    # 9 gaps of 10 ms between the first and the last output chunk, spread over 18 tokens after the first
    assert out["openai_latency.time_per_output_token"] == pytest.approx(0.090 / 18)


@pytest.mark.parametrize(
    ("output_gaps", "has_tpot"),
    [(9, True), (5, True), (4, False), (0, False)],
    ids=["all", "most", "too-few", "none"],
)
def test_time_per_output_token_only_when_most_gaps_were_observed(output_gaps: int, has_tpot: bool) -> None:
    """The last token was buffered behind 60 ms of the caller's work, so the window's end is unsure:
    only observed gaps count. 10 output chunks have 9 gaps: with fewer than half observed (the others
    buffered behind a slow caller), the observed ones are the server's slowest and would overstate
    the pace."""
    timeline, st = _stream(output_chunks=10, output_gaps=output_gaps, last_doubt_ms=60)
    out = stream_summary(timeline, st, None)
    assert ("openai_latency.time_per_output_token" in out) is has_tpot
    if has_tpot:  # the mean observed gap, scaled to all 9 gaps, per token after the first
        assert out["openai_latency.time_per_output_token"] == pytest.approx(0.010)


def test_time_per_output_token_across_the_window_when_the_caller_was_idle() -> None:
    """A fast server that wrote several chunks at once: most gaps unobserved, but the caller was idle
    (0.3 ms of its own time before the last token): measured across the window. The 3 tokens that
    came in the first token's read were made before the window: 63 - 3 steps in it."""
    timeline, st = _stream(output_chunks=64, output_gaps=15, gap_ms=2, last_doubt_ms=0)
    st.last_token_doubt_ns = 300_000
    st.burst = 3
    out = stream_summary(timeline, st, None)
    assert out["openai_latency.time_per_output_token"] == pytest.approx(0.126 / 60)
    assert out["openai_latency.time_per_output_token.rule"] == "answer_tokens"


def test_a_single_output_chunk_has_no_time_per_output_token() -> None:
    timeline, st = _stream(output_chunks=1, output_gaps=0)
    assert "openai_latency.time_per_output_token" not in stream_summary(timeline, st, None)


# --- measurements --------------------------------------------------------------------------------


def test_measurements_of_a_retried_call() -> None:
    timeline = _retried_call()
    phases = timeline.phases(http_subphases=True)
    summary = call_summary(timeline, phases)
    summary["gen_ai.response.model"] = "gpt-4o-mini-2024"
    summary["gen_ai.usage.input_tokens"] = 3
    request = {"gen_ai.request.model": "gpt-4o-mini", "gen_ai.operation.name": "chat", "secret": "x"}
    m = measurements(timeline, StreamStats(), phases, summary, request, phase_metrics=False)
    assert m.duration == pytest.approx(0.308)
    assert m.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024",
    }
    assert m.retries == ["rate_limit_exceeded"]
    assert m.input_tokens == 3 and m.output_tokens is None
    assert m.phases == []  # phase points are opt-in
    assert m.time_to_first_chunk is None and list(m.chunk_gaps) == []

    with_phases = measurements(timeline, StreamStats(), phases, summary, request, phase_metrics=True)
    names = [name for name, _ in with_phases.phases]
    assert names[:4] == ["request_build", "network_wait", "pool_wait", "connect"]  # http.*, prefix dropped
    assert "server_wait" in names and names.count("network_wait") == 2


def test_stream_measurements_sample_at_most_max_gap_points() -> None:
    timeline, st = _stream(output_chunks=10, output_gaps=9)
    st.gaps = array("q", [(i + 1) * MS for i in range(100)])
    summary = stream_summary(timeline, st, None)
    m = measurements(timeline, st, [], summary, {}, phase_metrics=False)
    assert m.time_to_first_chunk == pytest.approx(0.040)
    assert m.time_to_first_token == pytest.approx(0.050)
    assert m.time_per_output_token == pytest.approx(0.010)
    gaps = list(m.chunk_gaps)
    assert len(gaps) == MAX_GAP_POINTS
    assert gaps[0] == pytest.approx(0.001) and gaps == sorted(gaps)  # spread over the whole stream


def test_spread_sample() -> None:
    assert spread_sample([1, 2, 3], 8) == [1, 2, 3]
    assert spread_sample(list(range(16)), 4) == [0, 4, 8, 12]


# --- the data methods the hooks call -------------------------------------------------------------


def test_record_response_reads_status_version_headers_and_the_providers_code() -> None:
    attempt = Attempt(index=0, start_ns=T0)
    body = {"error": {"code": "model_not_found"}}
    attempt.record_response(Response(404, {"x-request-id": "r"}, body, "HTTP/2"), T0 + 5 * MS)
    assert (attempt.status_code, attempt.error_type, attempt.http_version) == (404, "model_not_found", "2")
    assert attempt.end_ns == attempt.headers_ns == T0 + 5 * MS  # no trace event: when send returned
    assert attempt.new_connection is False

    plain = Attempt(index=0, start_ns=T0)
    plain.events += _events(T0, T0 + MS, T0 + 3 * MS, connect=True)
    plain.record_response(Response(500, body="not json"), T0 + 9 * MS)
    assert plain.error_type == "500"  # no provider code: the status
    assert plain.headers_ns == T0 + 3 * MS  # the trace event, not the body's end
    assert plain.new_connection is True and plain.connection_reused is False


def test_record_error_and_a_bad_response_never_raise(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    attempt = Attempt(index=0, start_ns=T0)
    attempt.record_error(TimeoutError("read"), T0 + MS)
    assert attempt.error_type == "TimeoutError" and attempt.end_ns == T0 + MS
    monkeypatch.setattr(_guard, "_reported", set())
    caplog.set_level(logging.WARNING, logger="openai_latency")
    broken = Attempt(index=0, start_ns=T0)
    assert broken.record_response(object(), T0) is None  # guarded: reported, the call goes on
    assert ["Attempt.record_response" in r.getMessage() for r in caplog.records] == [True]


@pytest.mark.parametrize(
    ("attempt_error", "response", "exc", "reason"),
    [
        ("rate_limit_exceeded", Response(429), None, "rate_limit_exceeded"),
        (None, Response(503), None, "503"),
        (None, None, ConnectionResetError(), "ConnectionResetError"),
        (None, None, None, "_OTHER"),
    ],
    ids=["provider-code", "status", "exception", "unknown"],
)
def test_backoff_reason(attempt_error: str | None, response: Any, exc: Any, reason: str) -> None:
    timeline = Timeline(start_ns=T0)
    timeline.begin_attempt(T0, None).error_type = attempt_error
    backoff = timeline.begin_backoff(T0 + MS, response, exc)
    assert backoff is not None and backoff.reason == reason
    assert timeline.backoffs == [backoff]


@pytest.mark.parametrize(
    ("headers", "source"),
    [
        ({"retry-after-ms": "1500"}, "retry-after-ms"),
        ({"retry-after": "1.5"}, "retry-after"),
        ({"retry-after": "2"}, "backoff"),  # the SDK did not use it (e.g. above its cap)
        ({"retry-after-ms": "soon"}, "backoff"),
        (None, "backoff"),
    ],
)
def test_backoff_delay_source(headers: dict[str, str] | None, source: str) -> None:
    backoff = Backoff(start_ns=T0)
    backoff.note_delay(1.5, headers)
    assert (backoff.delay_s, backoff.delay_source) == (1.5, source)


def test_the_final_attempt_takes_the_operations_error_type_on_its_status() -> None:
    timeline = Timeline(start_ns=T0)
    timeline.begin_attempt(T0, None).record_response(Response(400), T0 + MS)
    timeline.name_final_attempt({"http.response.status_code": 400, "error.type": "context_length_exceeded"})
    assert timeline.attempts[-1].error_type == "context_length_exceeded"
    timeline.name_final_attempt({"http.response.status_code": 500, "error.type": "server_error"})
    assert timeline.attempts[-1].error_type == "context_length_exceeded"  # another status: not this one

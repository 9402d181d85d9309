"""What a finished call's data says: summary attributes and metric measurements, as pure functions.

Input: the call's :class:`~.timeline.Timeline` (attempts, backoffs, marks), its phases
(:meth:`.Timeline.phases`) and, for streams, its :class:`~.model.StreamStats`. Output: plain dicts and
a :class:`~.metrics.Measurements`. Nothing here touches a span or an instrument, so every rule is
unit-tested with hand-made timelines (tests/core/test_summary.py); :meth:`.Operation.finish` applies them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import semconv as sc
from ..clock import seconds
from ..metrics import Measurements, metric_attributes
from ..model import Attributes, StreamStats
from ..read.attributes import response_attributes, usage_attributes
from ..read.headers import header_attributes
from ..read.server_timing import client_overhead, metric_points, server_attributes
from .timeline import PHASE_NAMES, Phase, Timeline
from .token_times import token_times

MAX_GAP_POINTS = 8
"""time_per_output_chunk points per stream at most: one histogram point costs several µs, so one
per chunk would break the per-chunk budget on long streams; an evenly spread sample keeps the shape."""


_PHASE_KEYS = {name: sc.OPENAI_LATENCY_PHASE_PREFIX + name for name in PHASE_NAMES}


def call_summary(timeline: Timeline, phases: list[Phase], out: Attributes | None = None) -> Attributes:
    """Seconds per phase, the dominant phase, attempts and retries, and the final response's
    status, connection reuse, headers (request id, rate limits, server processing time) and the
    network overhead (server wait minus the server's processing time); written into ``out`` when
    given (the call's one summary dict), else into a new dict."""
    if out is None:
        out = {}
    totals: dict[str, int] = {}
    for phase in phases:  # phases come in PHASE_NAMES order, a retry's repeating the first ones
        name = phase.name
        duration = phase.end_ns - phase.start_ns
        totals[name] = totals.get(name, 0) + (duration if duration > 0 else 0)
    for name, total in totals.items():
        out[_PHASE_KEYS[name]] = seconds(total)
    if totals:
        out[sc.OPENAI_LATENCY_DOMINANT_PHASE] = max(totals, key=totals.__getitem__)
    attempts = timeline.attempts
    out[sc.OPENAI_LATENCY_ATTEMPTS] = len(attempts)
    if attempts:
        out[sc.HTTP_REQUEST_RESEND_COUNT] = len(attempts) - 1
        if len(attempts) > 1:  # why each retry was taken: triage tells "rate limited" from the rest
            out[sc.OPENAI_LATENCY_RETRY_ERROR_TYPES] = [
                a.error_type or str(a.status_code or "_OTHER") for a in attempts[:-1]
            ]
        last = attempts[-1]
        if last.status_code:
            out[sc.HTTP_RESPONSE_STATUS_CODE] = last.status_code
        reused = last.connection_reused
        if reused is not None:
            out[sc.OPENAI_LATENCY_CONNECTION_REUSED] = reused
        header_attributes(last.response_headers, out)
        processing = out.get(sc.OPENAI_LATENCY_SERVER_PROCESSING_TIME)
        server_wait = last.server_wait_ns
        if server_wait is None and last.headers_ns:  # no trace events: the whole attempt
            server_wait = last.headers_ns - last.start_ns
        if isinstance(processing, float) and server_wait is not None:
            # in whole ns, so the difference has no float noise (and may be negative: clock skew)
            out[sc.OPENAI_LATENCY_NETWORK_OVERHEAD] = (server_wait - round(processing * 1e9)) / 1e9
    return out


def stream_summary(
    timeline: Timeline, st: StreamStats, end_state: str | None, out: Attributes | None = None
) -> Attributes:
    """How the stream ended and went: chunks, wait and consumer time, time to first chunk, the
    response's attributes and usage (without it, TPOT counts token chunks as tokens), and the token
    times of :func:`.token_times.token_times` (TTFT, first answer token, reasoning, TPOT); written
    into ``out`` when given (the call's summary so far, which holds no usage: a stream's comes here)."""
    start = timeline.start_ns
    if out is None:
        out = {}
    out[sc.OPENAI_LATENCY_STREAM_END_STATE] = end_state or "completed"
    out[sc.OPENAI_LATENCY_STREAM_CHUNKS] = st.chunks
    out[sc.OPENAI_LATENCY_STREAM_WAIT_TIME] = seconds(st.wait_ns)
    out[sc.OPENAI_LATENCY_STREAM_CONSUMER_TIME] = seconds(st.consumer_ns)
    out[sc.OPENAI_LATENCY_STREAM_MAX_GAP] = seconds(st.max_gap_ns)
    out[sc.OPENAI_LATENCY_STREAM_BUFFERED_CHUNKS] = st.buffered_chunks
    if st.first_chunk_ns:
        out[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = seconds(st.first_chunk_ns - start)
    if st.first_attributes:
        out.update(st.first_attributes)
    if st.final_item is not None:
        out.update(response_attributes(st.final_item))
    if st.usage is not None:
        out.update(usage_attributes(st.usage))
    if st.finish_reasons:
        out[sc.GEN_AI_RESPONSE_FINISH_REASONS] = st.finish_reasons
    estimated = sc.GEN_AI_USAGE_OUTPUT_TOKENS not in out and st.token_chunks > 0
    if estimated:  # no usage: tokens are counted as token chunks, for the time per output token only
        out[sc.OPENAI_LATENCY_USAGE_ESTIMATED] = True
    out.update(token_times(timeline, st, out, estimated))
    account = server_attributes(st.server_item if st.server_item is not None else st.final_item)
    if account:
        out.update(account)
        out.update(client_overhead(out))
    return out


def measurements(
    timeline: Timeline,
    st: StreamStats,
    phases: list[Phase],
    summary: Mapping[str, Any],
    request: Attributes,
    phase_metrics: bool,
) -> Measurements:
    """What the call adds to the metrics. ``summary``: the attributes set when it ended, as built by
    :func:`call_summary` and :func:`stream_summary` (so each key read here holds the type they write);
    they win over ``request``, the attributes it started with, for the metric attributes."""
    # phase.duration points only when asked for (OPENAI_LATENCY_PHASE_METRICS): a metric point
    # costs the OTel SDK about two thirds of a span, and the phase spans (spanmetrics) and the
    # operation span's openai_latency.phase.* attributes carry the same durations.
    flat: list[tuple[str, float]] = []
    if phase_metrics:
        for phase in phases:
            flat.append((phase.name, seconds(phase.duration_ns)))
            flat.extend((child.name.split(".", 1)[1], seconds(child.duration_ns)) for child in phase.children)
    streaming = timeline.streaming
    return Measurements(
        attributes=metric_attributes(summary, request),
        duration=seconds(timeline.end_ns - timeline.start_ns),
        phases=flat,
        input_tokens=summary.get(sc.GEN_AI_USAGE_INPUT_TOKENS),
        output_tokens=summary.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS),
        time_to_first_chunk=summary.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK) if streaming else None,
        time_to_first_token=summary.get(sc.OPENAI_LATENCY_TIME_TO_FIRST_TOKEN) if streaming else None,
        time_to_first_answer_token=(
            summary.get(sc.OPENAI_LATENCY_TIME_TO_FIRST_ANSWER_TOKEN) if streaming else None
        ),
        reasoning_duration=summary.get(sc.OPENAI_LATENCY_REASONING_DURATION),
        time_per_output_token=summary.get(sc.OPENAI_LATENCY_TIME_PER_OUTPUT_TOKEN),
        chunk_gaps=[seconds(gap) for gap in spread_sample(st.gaps, MAX_GAP_POINTS)] if st.gaps else (),
        retries=summary.get(sc.OPENAI_LATENCY_RETRY_ERROR_TYPES, []),  # set by call_summary
        server=metric_points(summary),
    )


def spread_sample(values: Sequence[int], limit: int) -> Sequence[int]:
    """At most ``limit`` of ``values``, evenly spread (all of them when there are few enough)."""
    count = len(values)
    if count <= limit:
        return values
    return [values[(i * count) // limit] for i in range(limit)]

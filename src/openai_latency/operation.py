"""One user call: its operation span, its timeline, its stream statistics; it ends exactly once.

Hooks feed marks in while the call runs (:mod:`openai_latency.sdk_hooks`, :mod:`.streams`,
:mod:`.http_trace`); :meth:`Operation.finish` turns them into phase spans, summary attributes and
metric points in one go.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from . import attributes as attrs
from ._guard import guarded, report
from .config import Settings
from .metrics import Measurements, Metrics, metric_attributes
from .timeline import PHASE_NAMES, Phase, Timeline, clock, subphase_attributes, to_epoch_ns

if TYPE_CHECKING:
    from .content import ContentCapture

_NS = 1e-9


@dataclass
class Telemetry:
    """What every operation needs from the instrumentor: set once per ``instrument()``."""

    tracer: Tracer
    metrics: Metrics | None
    settings: Settings
    logger: Any = None
    """OTel Logs API logger for the content event; None unless content capture asks for events."""


@dataclass(frozen=True)
class OperationKind:
    """How to name, describe and read one family of SDK calls."""

    operation: str
    """gen_ai.operation.name: chat, embeddings, text_completion, or ``openai`` for the fallback."""
    api_type: str | None
    stream_kind: str
    """Key of the chunk observer in :mod:`openai_latency.streams`: chat, responses, completions, any."""


@dataclass
class StreamStats:
    """Per-chunk counters, updated in place by the stream wrappers (no allocation per chunk)."""

    chunks: int = 0
    output_chunks: int = 0
    wait_ns: int = 0
    consumer_ns: int = 0
    consumer_before_output_ns: int = 0
    max_gap_ns: int = 0
    first_chunk_ns: int = 0
    buffered_chunks: int = 0
    """Chunks that were already there when asked for: the server was ahead of the caller."""
    output_gap_ns: int = 0
    output_gaps: int = 0
    """Observed server-side gaps between output chunks (arrival to arrival), sum and count."""
    last_activity_ns: int = 0
    gaps: array[int] | None = None
    """Observed server-side gaps (ns), made at the first one: most calls are not streams."""
    stalls: list[tuple[int, int, int]] | None = None
    """(chunk index, gap ns, mono ns) for gaps above the stall threshold."""
    first_attributes: dict[str, Any] | None = None
    """Response attributes of the first chunk (id, model...), read when it came."""
    final_item: Any = None
    """The final Response of a Responses stream (its last event)."""
    usage: Any = None
    finish_reasons: list[str] | None = None
    error_item: Any = None


class Operation:
    def __init__(
        self,
        telemetry: Telemetry,
        kind: OperationKind,
        span_name: str,
        attributes: dict[str, Any],
        start_ns: int,
    ) -> None:
        self.telemetry = telemetry
        self.kind = kind
        self.attributes = attributes
        self.timeline = Timeline(start_ns=start_ns)  # streaming once the SDK hands out a stream
        self.stream = StreamStats()
        self.result_attributes: dict[str, Any] = {}
        self.stall_threshold_ns = int(telemetry.settings.stall_threshold * 1e9)
        self._unfinished = [True]
        self._span_ended = False
        self.usage_injected = False
        """We added ``stream_options.include_usage``: the usage-only chunk is hidden from the caller."""
        self.content: ContentCapture | None = None
        self.span: Span = telemetry.tracer.start_span(
            span_name, kind=SpanKind.CLIENT, attributes=attributes, start_time=to_epoch_ns(start_ns)
        )
        self.context = trace.set_span_in_context(self.span)

    @property
    def finished(self) -> bool:
        return not self._unfinished

    # --- while the call runs ----------------------------------------------------------------

    @guarded()
    def returned(self, result: Any, streaming: bool) -> None:
        """The SDK method returned ``result``; a non-stream call ends here."""
        now = clock()
        self.timeline.returned_ns = now
        self.stream.last_activity_ns = now
        if streaming:
            self.timeline.streaming = True
            return
        error = None
        try:
            self.result_attributes = attrs.response_attributes(result)
            if self.content is not None:
                self.content.result = result
            error = attrs.failed_response_error(result)
        finally:
            self.finish(end_ns=now, error=error)

    @guarded()
    def failed(self, exc: BaseException) -> None:
        """The SDK method raised (before a stream existed)."""
        self.finish(end_ns=clock(), error=exc)

    # --- the end ----------------------------------------------------------------------------

    def finish(self, end_ns: int, error: BaseException | None = None, end_state: str | None = None) -> None:
        """Ends the operation; every call after the first is a no-op (exactly-once, thread-safe)."""
        try:
            self._unfinished.pop()
        except IndexError:
            return
        self._finish(end_ns, error, end_state)
        try:
            # attempt spans _finish did not get to (it failed half-way, and reported it)
            for attempt in self.timeline.attempts:
                if attempt.span is not None and attempt.span.is_recording():
                    attempt.span.end(end_time=to_epoch_ns(attempt.end_ns or end_ns))
            if not self._span_ended:  # _finish failed half-way: still end the operation span
                self.span.end(end_time=to_epoch_ns(end_ns))
        except Exception:
            report("Operation.finish")

    @guarded()
    def _finish(self, end_ns: int, error: BaseException | None, end_state: str | None) -> None:
        if error is not None and isinstance(error, asyncio.CancelledError):
            end_state = "cancelled"
        timeline = self.timeline
        timeline.end_ns = end_ns
        if error is None and self.stream.error_item is not None:
            # The provider reported an error inside the stream (Responses `error` / `response.failed`).
            error, end_state = attrs.stream_error(self.stream.error_item), "error"
        settings = self.telemetry.settings
        failure = attrs.error_attributes(error, mid_stream=end_state == "error") if error is not None else {}
        _name_final_attempt(timeline, failure)
        phases = timeline.phases(settings.http_subphases)
        summary = dict(self.result_attributes)
        summary.update(self._summary(phases))
        if timeline.streaming:
            summary.update(self._stream_summary(end_state))
        summary.update(failure)
        span = self.span
        span.set_attributes(summary)
        if settings.any_phase_spans:
            self._emit_phase_spans(phases, settings.http_subphase_spans)
        self._add_stall_events()
        if error is not None and end_state != "cancelled":
            span.set_status(Status(StatusCode.ERROR, str(error)[:256]))
            span.record_exception(error)
        elif error is not None:
            span.set_status(Status(StatusCode.UNSET))
        if self.content is not None:
            self.content.emit(self, end_ns, summary)
        # Marked before end(): a span processor that raises in on_end must not get a second end().
        self._span_ended = True
        try:
            span.end(end_time=to_epoch_ns(end_ns))
        finally:
            self._record_metrics(phases, summary)

    @guarded()
    def _record_metrics(self, phases: list[Phase], summary: dict[str, Any]) -> None:
        metrics = self.telemetry.metrics
        if metrics is not None:
            metrics.record(self._measurements(phases, summary), self.context)

    def start_attempt_span(self, start_ns: int) -> Span | None:
        """The ``openai.network_wait`` span of an attempt starting now (phase spans on), else None."""
        if not self.telemetry.settings.any_phase_spans:
            return None
        return self.telemetry.tracer.start_span(
            "openai.network_wait", context=self.context, start_time=to_epoch_ns(start_ns)
        )

    def _summary(self, phases: list[Phase]) -> dict[str, Any]:
        timeline = self.timeline
        out: dict[str, Any] = {}
        totals: dict[str, int] = {}
        for phase in phases:
            totals[phase.name] = totals.get(phase.name, 0) + phase.duration_ns
        for name in PHASE_NAMES:
            if name in totals:
                out["openai_latency.phase." + name] = totals[name] * _NS
        if totals:
            out["openai_latency.dominant_phase"] = max(totals, key=lambda name: totals[name])
        attempts = timeline.attempts
        out["openai_latency.attempts"] = len(attempts)
        if attempts:
            out["http.request.resend_count"] = len(attempts) - 1
            if len(attempts) > 1:  # why each retry was taken: triage tells "rate limited" from the rest
                out["openai_latency.retry.error_types"] = [
                    a.error_type or str(a.status_code or "_OTHER") for a in attempts[:-1]
                ]
            last = attempts[-1]
            if last.status_code:
                out["http.response.status_code"] = last.status_code
            reused = last.connection_reused
            if reused is not None:
                out["openai_latency.connection.reused"] = reused
            headers = attrs.header_attributes(last.response_headers)
            out.update(headers)
            processing = headers.get("openai_latency.server.processing_time")
            server_wait = last.server_wait_ns
            if server_wait is None and last.headers_ns:  # no trace events: the whole attempt
                server_wait = last.headers_ns - last.start_ns
            if processing is not None and server_wait is not None:
                out["openai_latency.network.overhead"] = server_wait * _NS - processing
        return out

    def _stream_summary(self, end_state: str | None) -> dict[str, Any]:
        st = self.stream
        start = self.timeline.start_ns
        out: dict[str, Any] = {
            "openai_latency.stream.end_state": end_state or "completed",
            "openai_latency.stream.chunks": st.chunks,
            "openai_latency.stream.wait_time": st.wait_ns * _NS,
            "openai_latency.stream.consumer_time": st.consumer_ns * _NS,
            "openai_latency.stream.max_gap": st.max_gap_ns * _NS,
            "openai_latency.stream.buffered_chunks": st.buffered_chunks,
        }
        if st.first_chunk_ns:
            out["gen_ai.response.time_to_first_chunk"] = (st.first_chunk_ns - start) * _NS
        if self.timeline.first_output_ns:
            ttft = self.timeline.first_output_ns - start - st.consumer_before_output_ns
            out["openai_latency.time_to_first_token"] = ttft * _NS
        if st.first_attributes:
            out.update(st.first_attributes)
        if st.final_item is not None:
            out.update(attrs.response_attributes(st.final_item))
        if st.usage is not None:
            out.update(attrs.usage_attributes(st.usage))
        if st.finish_reasons:
            out["gen_ai.response.finish_reasons"] = st.finish_reasons
        output_tokens = out.get("gen_ai.usage.output_tokens")
        if output_tokens is None and st.output_chunks:
            output_tokens = st.output_chunks
            out["openai_latency.usage.estimated"] = True
        if (
            output_tokens
            and output_tokens > 1
            and st.output_gaps
            and st.output_gaps * 2 >= st.output_chunks - 1
        ):
            # Server time from the first to the last output chunk, from the gaps that were observed.
            # Only when most were: a caller slower than the server observes only the server's
            # slowest gaps (the others were buffered), and those alone would overstate the pace.
            span_ns = st.output_gap_ns / st.output_gaps * (st.output_chunks - 1)
            out["openai_latency.time_per_output_token"] = span_ns * _NS / (output_tokens - 1)
        return out

    @guarded()  # on its own: a failing span processor still leaves the operation span its status
    def _emit_phase_spans(self, phases: list[Phase], subphase_spans: bool) -> None:
        tracer = self.telemetry.tracer
        for phase in phases:
            if phase.span is not None:  # started with its attempt: complete it
                span = phase.span
                attributes = {"openai_latency.phase": phase.name, **phase.attributes}
                if phase.children and not subphase_spans:
                    attributes.update(subphase_attributes(phase.children))
                span.set_attributes(attributes)
                span.end(end_time=to_epoch_ns(phase.end_ns))
            else:
                span = _emit(tracer, self.context, "openai." + phase.name, phase.name, phase)
            if subphase_spans and phase.children:
                parent = trace.set_span_in_context(span)
                for child in phase.children:
                    _emit(tracer, parent, child.name, child.name.split(".", 1)[1], child)

    def _add_stall_events(self) -> None:
        stalls = self.stream.stalls
        if not stalls:
            return
        for index, gap_ns, at_ns in stalls:
            self.span.add_event(
                "openai_latency.stream.stall",
                {"openai_latency.stall.gap": gap_ns * _NS, "openai_latency.stall.chunk_index": index},
                timestamp=to_epoch_ns(at_ns),
            )

    def _measurements(self, phases: list[Phase], summary: dict[str, Any]) -> Measurements:
        """What the call adds to the metrics; ``summary``: the attributes set when it ended."""
        st = self.stream
        # phase.duration points only when asked for (OPENAI_LATENCY_PHASE_METRICS): a metric point
        # costs the OTel SDK about two thirds of a span, and the phase spans (spanmetrics) and the
        # operation span's openai_latency.phase.* attributes carry the same durations.
        flat: list[tuple[str, float]] = []
        if self.telemetry.settings.phase_metrics:
            for phase in phases:
                flat.append((phase.name, phase.duration_ns * _NS))
                flat.extend(
                    (child.name.split(".", 1)[1], child.duration_ns * _NS) for child in phase.children
                )
        streaming = self.timeline.streaming
        return Measurements(
            attributes=metric_attributes(summary, self.attributes),
            duration=(self.timeline.end_ns - self.timeline.start_ns) * _NS,
            phases=flat,
            input_tokens=summary.get("gen_ai.usage.input_tokens"),
            output_tokens=summary.get("gen_ai.usage.output_tokens"),
            time_to_first_chunk=summary.get("gen_ai.response.time_to_first_chunk") if streaming else None,
            time_to_first_token=summary.get("openai_latency.time_to_first_token") if streaming else None,
            time_per_output_token=summary.get("openai_latency.time_per_output_token"),
            chunk_gaps=[gap * _NS for gap in _spread_sample(st.gaps, MAX_GAP_POINTS)] if st.gaps else (),
            retries=summary.get("openai_latency.retry.error_types", []),  # set by _summary
        )


def _name_final_attempt(timeline: Timeline, failure: dict[str, Any]) -> None:
    """The final attempt's error.type is the operation's when the operation failed on that attempt's
    HTTP status (a streamed error body is read by the SDK only after the attempt ended)."""
    status = failure.get("http.response.status_code")
    if status is None or not timeline.attempts:
        return
    last = timeline.attempts[-1]
    if last.status_code == status:
        last.error_type = failure["error.type"]


MAX_GAP_POINTS = 8
"""time_per_output_chunk points per stream at most: one histogram point costs several µs, so one
per chunk would break the per-chunk budget on long streams; an evenly spread sample keeps the shape."""


def _spread_sample(values: Sequence[int], limit: int) -> Sequence[int]:
    count = len(values)
    if count <= limit:
        return values
    return [values[(i * count) // limit] for i in range(limit)]


def _emit(tracer: Tracer, parent: Any, span_name: str, phase_name: str, phase: Phase) -> Span:
    span = tracer.start_span(
        span_name,
        context=parent,
        attributes={"openai_latency.phase": phase_name, **phase.attributes},
        start_time=to_epoch_ns(phase.start_ns),
    )
    span.end(end_time=to_epoch_ns(phase.end_ns))
    return span

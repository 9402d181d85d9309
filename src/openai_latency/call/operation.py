"""One user call: its operation span, its timeline, its stream statistics; it ends exactly once.

Hooks feed marks in while the call runs (:mod:`openai_latency.hooks`: ``sdk_hooks``, ``streams``,
``http_trace``); :meth:`Operation.finish` turns them into phase spans, summary attributes
(:mod:`.summary`) and metric points in one go. See docs/ARCHITECTURE.md, "A call's life".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from .. import semconv as sc
from .._guard import guarded, report
from ..clock import EPOCH_OFFSET_NS, clock, seconds
from ..model import Attributes, OperationKind, StreamStats, Telemetry
from ..read import attributes as attrs
from ..read import errors
from ..read.server_timing import server_attributes
from . import deferred
from .summary import call_summary, measurements, stream_summary
from .timeline import Phase, Timeline, subphase_attributes

if TYPE_CHECKING:
    from ..content.capture import ContentCapture


class Operation:
    def __init__(
        self,
        telemetry: Telemetry,
        kind: OperationKind,
        span_name: str,
        attributes: Attributes,
        start_ns: int,
        links: Sequence[Link] = (),
    ) -> None:
        self.telemetry = telemetry
        self.kind = kind
        self.attributes = attributes
        self.timeline = Timeline(start_ns=start_ns)  # streaming once the SDK hands out a stream
        self.stream = StreamStats()
        self.result_attributes: Attributes = {}
        self.stall_threshold_ns = telemetry.settings.stall_threshold_ns
        self._unfinished = [True]
        self._span_ended = False
        self.usage_injected = False
        """We added ``stream_options.include_usage``: the usage-only chunk is hidden from the caller."""
        self.content: ContentCapture | None = None
        self.span: Span = telemetry.tracer.start_span(
            span_name,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start_ns + EPOCH_OFFSET_NS,
            links=links,  # a WebSocket turn's link to its connection's handshake (websocket/)
        )
        self.context = trace.set_span_in_context(self.span)

    @property
    def finished(self) -> bool:
        return not self._unfinished

    # --- while the call runs ----------------------------------------------------------------

    def returned(self, result: Any, streaming: bool) -> None:
        """The SDK method returned ``result``; a non-stream call ends here. Never raises (the hot
        hooks catch their own errors, like :func:`._guard.guarded` without its extra frame)."""
        now = clock()
        try:
            self.timeline.returned_ns = now
            self.stream.last_activity_ns = now
            if streaming:
                self.timeline.streaming = True
                response = getattr(result, "response", None) or getattr(result, "http_response", None)
                if response is not None:
                    deferred.watch(response, self)
                return
            error = None
            try:
                result_attributes = self.result_attributes = attrs.response_attributes(result)
                account = server_attributes(result)
                if account:
                    result_attributes.update(account)
                if self.kind.operation == "chat":
                    reasoning_tokens = result_attributes.get(sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS)
                    visibility = attrs.reasoning_visibility(result, reasoning_tokens)
                    result_attributes[sc.OPENAI_LATENCY_REASONING_VISIBILITY] = visibility
                if self.content is not None:
                    self.content.result = result
                error = errors.failed_response_error(result)
            finally:
                self.finish(end_ns=now, error=error)
        except Exception:
            report("Operation.returned")

    @guarded()
    def failed(self, exc: BaseException) -> None:
        """The SDK method raised (before a stream existed)."""
        self.finish(end_ns=clock(), error=exc)

    def start_attempt_span(self, start_ns: int) -> Span | None:
        """The ``openai.network_wait`` span of an attempt starting now (phase spans on), else None."""
        if not self.telemetry.settings.any_phase_spans:
            return None
        return self.telemetry.tracer.start_span(
            "openai.network_wait", context=self.context, start_time=start_ns + EPOCH_OFFSET_NS
        )

    # --- the end ----------------------------------------------------------------------------

    def finish(self, end_ns: int, error: BaseException | None = None, end_state: str | None = None) -> None:
        """Ends the operation; every call after the first is a no-op (exactly-once, thread-safe)."""
        try:
            self._unfinished.pop()
        except IndexError:
            return
        try:
            self._finish(end_ns, error, end_state)
        except Exception:
            report("Operation._finish")
        try:
            # attempt spans _finish did not get to (it failed half-way, and reported it)
            for attempt in self.timeline.attempts:
                if attempt.span is not None and attempt.span.is_recording():
                    attempt.span.end(end_time=(attempt.end_ns or end_ns) + EPOCH_OFFSET_NS)
            if not self._span_ended:  # _finish failed half-way: still end the operation span
                self.span.end(end_time=end_ns + EPOCH_OFFSET_NS)
        except Exception:
            report("Operation.finish")

    def _finish(self, end_ns: int, error: BaseException | None, end_state: str | None) -> None:
        if error is not None and isinstance(error, asyncio.CancelledError):
            end_state = "cancelled"
        timeline = self.timeline
        timeline.end_ns = end_ns
        if error is None and self.stream.error_item is not None:
            # The provider reported an error inside the stream (Responses `error` / `response.failed`).
            error, end_state = errors.stream_error(self.stream.error_item), "error"
        settings = self.telemetry.settings
        failure = errors.error_attributes(error, mid_stream=end_state == "error") if error is not None else {}
        if failure:
            timeline.name_final_attempt(failure)
        phases = timeline.phases(settings.http_subphases)
        # one dict for the whole summary: the response's attributes (read when the call returned),
        # then the timeline's, the stream's and the failure's, each written into it in turn
        summary = call_summary(timeline, phases, self.result_attributes)
        if timeline.streaming:
            stream_summary(timeline, self.stream, end_state, summary)
        summary.update(failure)
        span = self.span
        span.set_attributes(summary)
        if settings.any_phase_spans:
            try:  # on its own: a failing span processor still leaves the operation span its status
                self._emit_phase_spans(phases, settings.http_subphase_spans)
            except Exception:
                report("Operation._emit_phase_spans")
        stalls = self.stream.stalls
        if stalls:
            self._add_stall_events(stalls)
        if error is not None and end_state != "cancelled":
            span.set_status(Status(StatusCode.ERROR, str(error)[:256]))
            span.record_exception(error)
        elif error is not None:
            span.set_status(Status(StatusCode.UNSET))
        if self.content is not None:
            self.content.emit(span, self.context, self.attributes, self.stream.final_item, end_ns, summary)
        # Marked before end(): a span processor that raises in on_end must not get a second end().
        self._span_ended = True
        try:
            span.end(end_time=end_ns + EPOCH_OFFSET_NS)
        finally:
            try:
                self._record_metrics(phases, summary)
            except Exception:
                report("Operation._record_metrics")

    def _record_metrics(self, phases: list[Phase], summary: Attributes) -> None:
        metrics = self.telemetry.metrics
        if metrics is not None:
            phase_metrics = self.telemetry.settings.phase_metrics
            m = measurements(self.timeline, self.stream, phases, summary, self.attributes, phase_metrics)
            metrics.record(m, self.context)

    def _emit_phase_spans(self, phases: list[Phase], subphase_spans: bool) -> None:
        tracer = self.telemetry.tracer
        for phase in phases:
            # phase.attributes are the span's (openai_latency.phase included), built with the phase
            if phase.span is not None:  # started with its attempt: complete it
                span = phase.span
                if phase.children and not subphase_spans:
                    subphase_attributes(phase.children, phase.attributes)
                span.set_attributes(phase.attributes)
                span.end(end_time=phase.end_ns + EPOCH_OFFSET_NS)
            else:
                span = tracer.start_span(
                    "openai." + phase.name,
                    context=self.context,
                    attributes=phase.attributes,
                    start_time=phase.start_ns + EPOCH_OFFSET_NS,
                )
                span.end(end_time=phase.end_ns + EPOCH_OFFSET_NS)
            if subphase_spans and phase.children:
                parent = trace.set_span_in_context(span)
                for child in phase.children:
                    _emit_child(tracer, parent, child)

    def _add_stall_events(self, stalls: list[tuple[int, int, int]]) -> None:
        for index, gap_ns, at_ns in stalls:
            self.span.add_event(
                sc.OPENAI_LATENCY_STREAM_STALL,
                {sc.OPENAI_LATENCY_STALL_GAP: seconds(gap_ns), sc.OPENAI_LATENCY_STALL_CHUNK_INDEX: index},
                timestamp=at_ns + EPOCH_OFFSET_NS,
            )


def _emit_child(tracer: Tracer, parent: Context, child: Phase) -> None:
    """An http.* sub-phase as a span (``detailed``): ``http.connect``, ``openai_latency.phase=connect``."""
    span = tracer.start_span(
        child.name,
        context=parent,
        attributes={sc.OPENAI_LATENCY_PHASE: child.name.split(".", 1)[1], **child.attributes},
        start_time=child.start_ns + EPOCH_OFFSET_NS,
    )
    span.end(end_time=child.end_ns + EPOCH_OFFSET_NS)

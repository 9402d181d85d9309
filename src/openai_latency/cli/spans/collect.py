"""Spans -> calls, streaming: operation spans joined with their phase spans in one pass.

A phase span ends before its operation, so exporters (batch or simple processors, the collector's
file exporter) mostly write it first: it waits in ``children`` until its operation arrives, then the
call takes it and it is dropped. Phase spans that arrive after their operation (another order in the
file, Jaeger's answer) are joined at the end, through an index of the calls by span id. What stays in
memory is one compact :class:`Call` per operation plus that index, not the spans.

The http.* sub-phases of an attempt come as spans under its network_wait span
(``phase_spans=detailed``) or as that span's ``openai_latency.http.*`` attributes (``phases``, the
instrumentation's default; durations only, so no waterfall bars): either way they are summed into
the call's ``http``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .calls import Call, Collected, Interval, Shared, is_operation, new_call, ours
from .names import HTTP_PREFIX, PHASE
from .span import Span

#: A phase span waiting for its parent: (span id, phase, start ns, end ns); a plain tuple (cheapest).
_Child = tuple[str, str, int, int]
#: ``Interval(...)`` runs the named tuple's ``__new__``, Python code (157 ns); ``tuple.__new__(Interval,
#: fields)`` makes the same object in 90 ns. One per phase span with ``--waterfall``: 5-10 % of
#: :func:`collect_calls` then (measured on 200,000 spans).
_new_interval = tuple.__new__


class _Collector:
    def __init__(self, intervals: bool) -> None:
        self.keep_intervals = intervals
        self.collected = Collected([])
        # trace id + parent span id -> the phase spans waiting for that parent
        self.children: dict[str, list[_Child]] = {}
        # trace id + span id -> the call of that operation span
        self.operations: dict[str, Call] = {}
        # trace id + span id of a network_wait span taken by a call (its http.* sub-phases may come later)
        self.attempts: dict[str, Call] = {}
        # operations by attributes alone whose phases are still the attributes' sums
        self.from_attributes: set[int] = set()
        # spans of ours that are no operation unless phase children turn up: key -> index in calls
        self.tentative: dict[str, int] = {}
        self.shared = Shared()
        self.phase_spans = 0
        # trace id + span id of a network_wait span -> its http.* sub-phases given as its attributes
        # (phase_spans=phases: seconds per sub-phase, no sub-phase spans)
        self.http_attributes: dict[str, dict[str, float]] = {}

    def add(self, span: Span) -> None:
        """A span that is not a phase span (those are added by :func:`collect` itself)."""
        attributes = span.attributes
        if not ours(attributes):
            self.collected.other_names[span.name] += 1
            return
        key = span.trace_id + span.span_id
        if key in self.children:
            call = new_call(span, self.shared, attribute_phases=False)
            self._take(span.trace_id, key, call)
        else:
            call = new_call(span, self.shared)
            if is_operation(attributes):
                self.from_attributes.add(id(call))
            else:
                self.tentative[key] = len(self.collected.calls)
        self.collected.calls.append(call)
        self.operations[key] = call

    def _take(self, trace_id: str, key: str, call: Call) -> None:
        """The phase spans waiting for ``key`` (and their own children) into ``call``."""
        direct = self.children.pop(key)
        if id(call) in self.from_attributes:  # phase spans replace the attributes' sums
            self.from_attributes.discard(id(call))
            call.phases.clear()
        phases = call.phases
        for span_id, phase, start_ns, end_ns in direct:
            phases[phase] = phases.get(phase, 0.0) + (end_ns - start_ns) / 1e9
            if self.keep_intervals:
                call.intervals.append(_new_interval(Interval, (phase, start_ns, end_ns, 0)))
            child_key = trace_id + span_id
            if child_key in self.children:
                self._take_http(child_key, call)
            if phase == "network_wait":  # more of its http.* sub-phases may come
                self.attempts[child_key] = call
                http_attributes = self.http_attributes.pop(child_key, None)
                if http_attributes:
                    http = call.http
                    for name, seconds in http_attributes.items():
                        http[name] = http.get(name, 0.0) + seconds
        if self.keep_intervals:
            call.intervals.sort(key=_start)

    def _take_http(self, key: str, call: Call) -> None:
        http = call.http
        for _, phase, start_ns, end_ns in self.children.pop(key):
            http[phase] = http.get(phase, 0.0) + (end_ns - start_ns) / 1e9
            if self.keep_intervals:
                call.intervals.append(_new_interval(Interval, (phase, start_ns, end_ns, 1)))

    def finish(self) -> Collected:
        """Joins the phase spans that came after their operation (or their network_wait)."""
        collected = self.collected
        collected.phase_spans = self.phase_spans
        for key in [key for key in self.children if key in self.operations]:
            self.tentative.pop(key, None)  # it has phases: an operation
            self._take(key[:32], key, self.operations[key])
        for key in [key for key in self.children if key in self.attempts]:
            call = self.attempts[key]
            self._take_http(key, call)
            if self.keep_intervals:
                call.intervals.sort(key=_start)
        if self.tentative:  # no phase ever came: not an operation after all
            dropped = set(self.tentative.values())
            for index in dropped:
                collected.other_names[collected.calls[index].name] += 1
            collected.calls = [call for index, call in enumerate(collected.calls) if index not in dropped]
        return collected


_HTTP_PREFIX_LENGTH = len(HTTP_PREFIX)


def _http_attributes(attributes: dict[str, Any]) -> dict[str, float]:
    return {
        key[_HTTP_PREFIX_LENGTH:]: value
        for key, value in attributes.items()
        if key.startswith(HTTP_PREFIX) and value.__class__ is float and math.isfinite(value)
    }


def _start(interval: Interval) -> int:
    return interval.start_ns


def collect(spans: Iterable[Span], intervals: bool = True) -> Collected:
    collector = _Collector(intervals)
    # the phase-span branch of _Collector.add inlined (most spans are phase spans): same result
    children, texts, add = collector.children, collector.shared.texts, collector.add
    phase_spans = 0
    for span in spans:
        phase = span.attributes.get(PHASE)
        # ``x.__class__ is str``, not isinstance, here and in the other per-span and per-attribute
        # checks of the reader: 4 % of a whole report, measured (fresh processes, 200,000 spans)
        if phase.__class__ is str:
            phase_spans += 1
            key = span.trace_id + span.parent_span_id
            child = (span.span_id, texts.setdefault(phase, phase), span.start_ns, span.end_ns)
            if phase == "network_wait":
                http = _http_attributes(span.attributes)
                if http:
                    collector.http_attributes[span.trace_id + span.span_id] = http
            waiting = children.get(key)
            if waiting is None:
                children[key] = [child]
            else:
                waiting.append(child)
        else:
            add(span)
    collector.phase_spans += phase_spans
    return collector.finish()


def collect_calls(spans: Iterable[Span], intervals: bool = True) -> Collected:
    """Operation spans: no ``openai_latency.phase`` of their own, and gen_ai.operation.name,
    openai_latency.dominant_phase, openai_latency.phase.* attributes or phase children.

    Streaming: each operation becomes a compact :class:`Call` when it arrives (its phase spans, ended
    before it, usually came first); phase spans that arrive later are joined at the end.
    ``intervals=False`` keeps no per-phase intervals (less memory when no waterfall is drawn)."""
    return collect(spans, intervals)

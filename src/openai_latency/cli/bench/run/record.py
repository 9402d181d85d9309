"""What ``openai-latency bench`` keeps of its requests: their spans, tagged, and a running count.

Every span started inside a bench request gets the target's name and the load level (and a warm-up
flag: warm-up spans are dropped at their end). The request's context (a context variable) also
counts the content chunks it received: when the server sent no usage, that count is the call's
output tokens, kept on its operation span as ``openai_latency.bench.output_chunks``.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ...spans import names
from ...spans.names import BENCH_LOAD, BENCH_OUTPUT_CHUNKS, BENCH_TARGET, BENCH_WARMUP

ROLLING = 50  # requests in the progress display's rolling p50
#: Spans held before :meth:`Recorder.between_levels` writes them out (~2 KB each).
SPILL_SPANS = 20_000
ENDS_KEPT = 65536  # end times kept per target (bounded: a long run keeps the latest)


@dataclass(slots=True)
class Tag:
    """What the spans of one request get; and the content chunks it received so far."""

    target: str
    load: str
    warmup: bool
    #: What every span of the request gets (shared by the requests of one target and load level).
    attributes: dict[str, str | bool]
    content_chunks: int = 0


TAG: contextvars.ContextVar[Tag | None] = contextvars.ContextVar("openai_latency_bench_tag", default=None)


@dataclass
class TargetProgress:
    done: int = 0
    errors: int = 0
    ttft: deque[float] = field(default_factory=lambda: deque(maxlen=ROLLING))
    #: Every TTFT so far, summed and counted (``--stop-over-saturated`` compares intervals).
    ttft_sum: float = 0.0
    ttft_count: int = 0
    #: When the latest calls ended (epoch ns): ``--sweep`` measures a level's steady throughput.
    ends: deque[int] = field(default_factory=lambda: deque(maxlen=ENDS_KEPT))

    def rolling_ttft_p50(self) -> float | None:
        ordered = sorted(self.ttft)
        return ordered[len(ordered) // 2] if ordered else None


class Recorder(SpanProcessor):
    """Tags every span started inside a bench request and keeps the finished ones (warm-up dropped).

    A long run (a sweep of many levels) does not keep them all: between two load levels, when more
    than :data:`SPILL_SPANS` are held, :meth:`spill` appends them to ``spill_path`` (OTLP JSON lines,
    what ``--out`` and ``--workers`` write) and lets them go; the results are then read back from
    that file. Never during a level: writing pauses the event loop that times the requests."""

    def __init__(self, spill_path: str | None = None) -> None:
        self.spans: list[ReadableSpan] = []
        self.progress: dict[str, TargetProgress] = {}
        self.spill_path = spill_path
        self.spilled = 0

    def between_levels(self) -> None:
        """Spill the spans held when there are many (called with no request in flight)."""
        if self.spill_path is not None and len(self.spans) > SPILL_SPANS:
            self.spill()

    def spill(self) -> None:
        from ...spans.write import write_otlp_json

        assert self.spill_path is not None
        write_otlp_json(self.spill_path, self.spans)
        self.spilled += len(self.spans)
        self.spans = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        tag = TAG.get()
        if tag is not None:
            span.set_attributes(tag.attributes)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes or {}
        if attributes.get(BENCH_WARMUP):
            return
        operation = names.PHASE not in attributes and names.OPERATION_NAME in attributes
        if operation and attributes.get(names.USAGE_ESTIMATED) and names.OUTPUT_TOKENS not in attributes:
            tag = TAG.get()  # the stream ends in its request's task
            if tag is not None and tag.content_chunks:
                span = _with_attributes(span, {BENCH_OUTPUT_CHUNKS: tag.content_chunks})
        self.spans.append(span)
        target = attributes.get(BENCH_TARGET)
        if isinstance(target, str) and operation:
            progress = self.progress.setdefault(target, TargetProgress())
            progress.done += 1
            progress.ends.append(span.end_time or 0)
            if names.ERROR_TYPE in attributes:
                progress.errors += 1
            ttft = attributes.get(names.TIME_TO_FIRST_TOKEN)
            if isinstance(ttft, float):
                progress.ttft.append(ttft)
                progress.ttft_sum += ttft
                progress.ttft_count += 1


def _with_attributes(span: ReadableSpan, extra: dict[str, Any]) -> ReadableSpan:
    """A copy of a finished span with more attributes (a finished span's own cannot change)."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes={**(span.attributes or {}), **extra},
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Keeps what the run holds out of the cyclic garbage collector's passes.

    bench keeps every finished span (for ``--out`` and its statistics) besides the SDK's and
    OpenTelemetry's import-time objects: a full collection over them paused the event loop for
    50-300 ms at ``-c 64`` (measured), which every request in flight then counted as network or
    server time. So everything alive at the start, and at every :func:`freeze_survivors` after, is
    moved out of the collector's generations (``gc.freeze``); a run makes almost no cyclic garbage
    (measured: ~20 objects in 1,000 requests), so what a freeze keeps alive is negligible, and it is
    all handed back to the collector at the end."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def freeze_survivors() -> None:
    gc.freeze()


def tags(target: str, load: str, warmup: bool) -> dict[str, str | bool]:
    """The attributes every span of a request of this target and load level gets."""
    attributes: dict[str, str | bool] = {BENCH_TARGET: target, BENCH_LOAD: load}
    if warmup:
        attributes[BENCH_WARMUP] = True
    return attributes

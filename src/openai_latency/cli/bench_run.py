"""The load generator of ``openai-latency bench``: real ``AsyncOpenAI`` calls on one shared schedule.

Every request runs through the instrumented SDK; what it measured is in its spans, which
:class:`Recorder` keeps (tagged with the target and the load level). The bench loop itself only
notes the arrival time of each content chunk, for the inter-chunk gap distribution.

- Closed loop: ``concurrency`` workers take the next request from one shared schedule, so exactly
  that many requests are in flight.
- Open loop: arrivals at ``rate`` per target (constant spacing, or exponential gaps with
  ``poisson``), at most ``concurrency`` in flight (an arrival that finds no free slot waits: counted
  as ``late``).
- Targets are interleaved request by request (round-robin on the shared schedule) unless
  ``sequential``: then each target runs the whole load on its own, one after another.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import itertools
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .bench_config import Load, Target, Workload
from .report_stats import BENCH_LOAD, BENCH_OUTPUT_CHUNKS, BENCH_TARGET, PHASE_KEY

USAGE_ESTIMATED = "openai_latency.usage.estimated"

BENCH_WARMUP = "openai_latency.bench.warmup"
ROLLING = 50  # requests in the progress display's rolling p50


@dataclass(slots=True)
class _Tag:
    """What the spans of one request get; and the content chunks it received so far."""

    target: str
    load: str
    warmup: bool
    #: What every span of the request gets (shared by the requests of one target and load level).
    attributes: dict[str, str | bool]
    content_chunks: int = 0


_TAG: contextvars.ContextVar[_Tag | None] = contextvars.ContextVar("openai_latency_bench_tag", default=None)


@dataclass
class TargetProgress:
    done: int = 0
    errors: int = 0
    ttft: deque[float] = field(default_factory=lambda: deque(maxlen=ROLLING))

    def rolling_ttft_p50(self) -> float | None:
        ordered = sorted(self.ttft)
        return ordered[len(ordered) // 2] if ordered else None


class Recorder(SpanProcessor):
    """Tags every span started inside a bench request and keeps the finished ones (warm-up dropped)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []
        self.progress: dict[str, TargetProgress] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        tag = _TAG.get()
        if tag is not None:
            span.set_attributes(tag.attributes)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes or {}
        if attributes.get(BENCH_WARMUP):
            return
        operation = PHASE_KEY not in attributes and "gen_ai.operation.name" in attributes
        if operation and attributes.get(USAGE_ESTIMATED) and "gen_ai.usage.output_tokens" not in attributes:
            tag = _TAG.get()  # the stream ends in its request's task
            if tag is not None and tag.content_chunks:
                span = _with_attributes(span, {BENCH_OUTPUT_CHUNKS: tag.content_chunks})
        self.spans.append(span)
        target = attributes.get(BENCH_TARGET)
        if isinstance(target, str) and operation:
            progress = self.progress.setdefault(target, TargetProgress())
            progress.done += 1
            if "error.type" in attributes:
                progress.errors += 1
            ttft = attributes.get("openai_latency.time_to_first_token")
            if isinstance(ttft, float):
                progress.ttft.append(ttft)


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


@dataclass
class RunState:
    """Shared by the runner and the progress display."""

    planned: dict[str, int]
    #: Gaps between content chunks as the client received them, per (target, load level).
    chunk_gaps: dict[tuple[str, str], list[float]]
    late: int = 0
    interrupted: bool = False
    #: How late the event loop woke a 50 ms sleep, sampled all through the run (seconds). A client
    #: whose loop is late delays every chunk it reads: its TTFT is partly its own.
    loop_lag: list[float] = field(default_factory=list)
    cpu_s: float = 0.0


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


LAG_INTERVAL = 0.05
#: Above this p95 event-loop lag the results say that the client was a bottleneck.
LAG_WARNING_S = 0.010


async def watch_loop_lag(state: RunState) -> None:
    while True:
        start = time.perf_counter()
        await asyncio.sleep(LAG_INTERVAL)
        state.loop_lag.append(max(0.0, time.perf_counter() - start - LAG_INTERVAL))


Send = Callable[[int], Awaitable[None]]


class Runner:
    def __init__(
        self,
        targets: Sequence[Target],
        clients: Sequence[Any],
        workload: Workload,
        state: RunState,
        seed: int = 0,
    ) -> None:
        self.targets = targets
        self.seed = seed
        self.clients = clients
        self.workload = workload
        self.state = state
        self._kwargs = [workload.create_kwargs(target.model) for target in targets]
        self._attributes: dict[tuple[int, str], dict[str, str | bool]] = {}

    async def request(self, index: int, load: str, warmup: bool = False) -> None:
        """One call through the SDK. Its failure is the endpoint's answer, recorded in its span."""
        target = self.targets[index]
        attributes = self._attributes.get((index, load))
        if attributes is None:
            attributes = {BENCH_TARGET: target.name, BENCH_LOAD: load}
            if warmup:
                attributes[BENCH_WARMUP] = True
            self._attributes[(index, load)] = attributes
        tag = _Tag(target.name, load, warmup, attributes)
        token = _TAG.set(tag)
        try:
            await self._call(index, tag)
        except asyncio.CancelledError:
            raise
        except Exception:  # the SDK's own exception: the span has it (error.type, category)
            pass
        finally:
            _TAG.reset(token)

    async def _call(self, index: int, tag: _Tag) -> None:
        """One request; a stream's content chunks are counted in ``tag``, their gaps kept (not warm-up)."""
        client = self.clients[index]
        kwargs = self._kwargs[index]
        if not self.workload.stream:
            await client.chat.completions.create(**kwargs)
            return
        gaps = None if tag.warmup else self.state.chunk_gaps.setdefault((tag.target, tag.load), [])
        stream = await client.chat.completions.create(**kwargs)
        last = 0
        async with stream:
            async for chunk in stream:
                if not _has_content(chunk):
                    continue
                tag.content_chunks += 1
                if gaps is None:
                    continue
                now = time.perf_counter_ns()
                if last:
                    gaps.append((now - last) / 1e9)
                last = now

    async def warmup(self, requests: int, concurrency: int, ramp: float = 0.0) -> None:
        order = iter([index for _ in range(requests) for index in range(len(self.targets))])
        await closed_loop(order, concurrency, lambda i: self.request(i, "warmup", warmup=True), None, ramp)

    async def run(
        self, load: Load, requests: int | None, seconds: float | None, sequential: bool, ramp: float = 0.0
    ) -> None:
        groups = [[i] for i in range(len(self.targets))] if sequential else [list(range(len(self.targets)))]
        for indices in groups:
            deadline = None if seconds is None else time.monotonic() + seconds
            order = schedule(indices, requests)

            def send(i: int) -> Awaitable[None]:
                return self.request(i, load.label)

            if load.rate is None:
                await closed_loop(order, load.concurrency, send, deadline, ramp)
            else:
                rng = random.Random(self.seed)
                rate = load.rate * len(indices)
                self.state.late += await open_loop(
                    order, rate, load.poisson, rng, load.concurrency, send, deadline
                )


def _has_content(chunk: Any) -> bool:
    for choice in getattr(chunk, "choices", None) or ():
        delta = getattr(choice, "delta", None)
        if delta is not None and (getattr(delta, "content", None) or getattr(delta, "tool_calls", None)):
            return True
    return False


def schedule(indices: Sequence[int], requests: int | None) -> Iterator[int]:
    """Round-robin over the targets: ``requests`` each, or without end (a ``--duration`` run)."""
    if requests is None:
        return itertools.cycle(indices)
    return iter([index for _ in range(requests) for index in indices])


async def closed_loop(
    order: Iterator[int], concurrency: int, send: Send, deadline: float | None, ramp: float = 0.0
) -> None:
    """``concurrency`` workers on one shared schedule; worker k starts ``k * ramp / concurrency`` s in."""

    async def worker(number: int) -> None:
        if ramp > 0 and number:
            await asyncio.sleep(number * ramp / concurrency)
        for index in order:  # one shared iterator: each request is taken exactly once
            if deadline is not None and time.monotonic() >= deadline:
                return
            await send(index)

    await _gather([worker(number) for number in range(concurrency)])


async def open_loop(
    order: Iterator[int],
    rate: float,
    poisson: bool,
    rng: random.Random,
    cap: int,
    send: Send,
    deadline: float | None,
) -> int:
    """Arrivals at ``rate`` per second; returns how many found all ``cap`` slots busy (late)."""
    slots = asyncio.Semaphore(cap)
    tasks: set[asyncio.Task[None]] = set()
    late = 0
    start = time.monotonic()
    due = 0.0
    try:
        for number, index in enumerate(order):
            if number:
                due += rng.expovariate(rate) if poisson else 1.0 / rate
            wait = start + due - time.monotonic()
            if deadline is not None and start + due >= deadline:
                break
            if wait > 0:
                await asyncio.sleep(wait)
            if slots.locked():
                late += 1
            await slots.acquire()
            task = asyncio.ensure_future(send(index))
            tasks.add(task)
            task.add_done_callback(_finisher(tasks, slots))
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    return late


def _finisher(
    tasks: set[asyncio.Task[None]], slots: asyncio.Semaphore
) -> Callable[[asyncio.Task[None]], None]:
    def done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        slots.release()

    return done


async def _gather(coroutines: list[Awaitable[None]]) -> None:
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

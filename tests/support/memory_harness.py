"""Long runs and memory: the harness of ``tests/core/test_long_run.py`` and ``benchmarks/long_run.py``.

Calls of every kind (sync and async ``OpenAI`` clients; JSON, streams, embeddings; a call retried
after a 429, calls that fail with an API error, a stream that fails mid-way) and abandoned streams
(sync and async) run in a loop against the in-process fake server with the instrumentation on (spans
go to an exporter that drops them, metrics to an in-memory reader); what our modules keep alive is
measured with ``tracemalloc`` (allocations made by files of the ``openai_latency`` package, the fake
server excluded) and by counting live :class:`Operation` objects and entries of our module-level maps.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import openai_latency
from openai_latency import OpenAILatencyInstrumentor, _guard
from openai_latency.call import deferred
from openai_latency.call.operation import Operation
from openai_latency.fake_server import FakeServer
from openai_latency.hooks import registry
from openai_latency.read.attributes import provider_name
from tests.support import network

PACKAGE = str(Path(openai_latency.__file__).resolve().parent)
MESSAGES = [{"role": "user", "content": "hi"}]
# the first attempt gets a 429 (the SDK retries after 1 ms), the second the normal answer
RETRIED = {"x-fake-fail-attempts": "1", "x-fake-retry-after-ms": "1"}
T = TypeVar("T")


class Dropping(SpanExporter):
    """Exports to nowhere, counting: the export path runs, nothing accumulates."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS


@dataclass
class Harness:
    server: FakeServer
    client: Any
    """``OpenAI``, no retries."""
    retrying: Any
    """``OpenAI`` on the same HTTP client, one retry."""
    aclient: Any
    """``AsyncOpenAI`` (one retry), bound to ``loop``."""
    loop: asyncio.AbstractEventLoop
    exporter: Dropping

    def run(self, coro: Awaitable[T]) -> T:
        """Runs ``coro`` on the harness's event loop (the async client's connections live there)."""
        return self.loop.run_until_complete(coro)


@contextmanager
def harness(max_connections: int = 100) -> Iterator[Harness]:
    exporter = Dropping()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    instrumentor = OpenAILatencyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    loop = asyncio.new_event_loop()
    try:
        with FakeServer() as server:
            lib = network.http_lib()
            limits = lib.Limits(max_connections=max_connections, max_keepalive_connections=20)
            http = network.http_client(limits=limits, timeout=30)
            client = network.client(server.base_url, http_client=http, max_retries=0)
            retrying = network.client(server.base_url, http_client=http, max_retries=1)
            async_http = network.http_client(is_async=True, limits=limits, timeout=30)
            aclient = network.client(server.base_url, is_async=True, http_client=async_http, max_retries=1)
            h = Harness(server, client, retrying, aclient, loop, exporter)
            try:
                yield h
            finally:
                client.close()
                h.run(aclient.close())
                h.run(loop.shutdown_asyncgens())
    finally:
        loop.close()
        instrumentor.uninstrument()
        meter_provider.shutdown()


def our_bytes() -> int:
    """Bytes currently allocated by our package's code (tracemalloc must be tracing)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [
            tracemalloc.Filter(True, f"{PACKAGE}/*"),
            tracemalloc.Filter(False, f"{PACKAGE}/fake_server/*"),
        ]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


async def _adrain(pending: Awaitable[Any]) -> None:
    async for _ in await pending:
        pass


def _expect(error: type[BaseException], call: Callable[[], Any]) -> None:
    """Runs ``call``, which must raise ``error`` (the fake server was told to fail it)."""
    try:
        call()
    except error:
        return
    raise AssertionError(f"expected {error.__name__}")


async def _aexpect(error: type[BaseException], call: Callable[[], Awaitable[Any]]) -> None:
    try:
        await call()
    except error:
        return
    raise AssertionError(f"expected {error.__name__}")


def _call_kinds(h: Harness) -> list[Callable[[], Any]]:
    chat, achat = h.client.chat.completions, h.aclient.chat.completions

    def create(**kwargs: Any) -> Any:
        return chat.create(model="gpt-4o-mini", messages=MESSAGES, **kwargs)

    def acreate(**kwargs: Any) -> Any:
        return achat.create(model="gpt-4o-mini", messages=MESSAGES, **kwargs)

    return [
        lambda: create(),
        lambda: _drain(create(stream=True)),
        lambda: h.client.embeddings.create(model="text-embedding-3-small", input="hi"),
        lambda: h.run(acreate()),
        lambda: h.run(_adrain(acreate(stream=True))),
        # a 429 then a success: two attempts, a backoff, a retries metric point
        lambda: h.retrying.chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, extra_headers=RETRIED
        ),
        lambda: h.run(_adrain(acreate(stream=True, extra_headers=RETRIED))),
        # API errors raised into the caller, before and during a stream
        lambda: _expect(
            openai.InternalServerError, lambda: create(extra_headers={"x-fake-error": "server_error"})
        ),
        lambda: h.run(
            _aexpect(
                openai.APIError,
                lambda: _adrain(acreate(stream=True, extra_headers={"x-fake-stream-error-after": "1"})),
            )
        ),
    ]


def calls(h: Harness, count: int) -> None:
    """``count`` calls, the kinds of :func:`_call_kinds` in turn (sync and async, retried, failing)."""
    kinds = _call_kinds(h)
    for i in range(count):
        kinds[i % len(kinds)]()
        if i % 500 == 499:
            h.server.clear()  # the fake server logs every request; its log is not ours
    # An async stream read to [DONE] leaves the SDK's inner async generators suspended; asyncio
    # closes them on the loop once they are collected (a running application's loop does it at once).
    collect(h)


async def _abandon_async(h: Harness) -> None:
    stream = await h.aclient.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
    await stream.__anext__()  # one chunk, then the stream is dropped: nobody closes it


async def _settle() -> None:
    """Lets the loop run what the collector handed it (asyncio closes a dropped async generator by
    scheduling its ``aclose()``, which is what releases the async stream's connection)."""
    for _ in range(5):
        await asyncio.sleep(0)


def collect(h: Harness) -> None:
    """A full collection, then the ``aclose()`` it scheduled, twice (what those free may be cyclic)."""
    for _ in range(2):
        gc.collect()
        h.run(_settle())
    assert deferred.flush(timeout=10)  # the ends those collections handed to the worker thread


def abandoned(h: Harness, count: int) -> None:
    """``count`` streams read for one chunk, then dropped without close(), sync and async in turn.

    A dropped stream is garbage in a reference cycle (the SDK's ``Stream`` and its generator): the
    cyclic collector closes its response whenever it runs. With legacy httpcore (1.0.x) that
    deadlocks when the collector happens to run while the same thread holds the connection pool's
    lock (inside the next request), with or without instrumentation. Automatic collection is held
    off here and the garbage collected between requests; the event loop then runs the async
    generators' ``aclose()`` that the collection scheduled."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        for i in range(count):
            if i % 2:
                h.run(_abandon_async(h))
            else:
                stream = h.client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
                next(iter(stream))
                del stream
            if i % 50 == 49:
                collect(h)
            if i % 200 == 199:
                h.server.clear()
        collect(h)
    finally:
        if enabled:
            gc.enable()


def tracked_state() -> dict[str, int]:
    """What our code keeps between calls: must not grow with the number of calls."""
    gc.collect()
    objects = gc.get_objects()
    # type(), not isinstance(): the SDK's lazy proxies load their target when asked for __class__
    return {
        "operations_alive": sum(type(obj) is Operation for obj in objects),
        "by_response": len(registry.BY_RESPONSE),
        "reported_kinds": len(_guard._reported),
        "provider_cache": provider_name.cache_info().currsize,
        "finalizers": sum(type(obj) is weakref.finalize and obj.alive for obj in objects),
    }


def bytes_per_open_stream(h: Harness, count: int) -> tuple[float, float]:
    """(our bytes, all traced bytes) per stream, with ``count`` streams open after their first chunk."""
    gc.collect()
    ours_before, (total_before, _) = our_bytes(), tracemalloc.get_traced_memory()
    script = {"x-fake-chunks": "3", "x-fake-ttft-ms": "60000"}  # the content chunks come much later
    streams = []
    for _ in range(count):
        stream = h.client.chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=True, extra_headers=script
        )
        iterator = iter(stream)
        next(iterator)  # the role chunk: the stream is open and timed
        streams.append((stream, iterator))
    gc.collect()
    ours_after, (total_after, _) = our_bytes(), tracemalloc.get_traced_memory()
    for stream, _iterator in streams:
        stream.close()
    streams.clear()
    gc.collect()
    return (ours_after - ours_before) / count, (total_after - total_before) / count

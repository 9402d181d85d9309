"""Long runs and memory: the harness of ``tests/test_long_run.py`` and ``benchmarks/long_run.py``.

Calls of every kind and abandoned streams run in a loop against the in-process fake server with the
instrumentation on (spans go to an exporter that drops them, metrics to an in-memory reader); what
our modules keep alive is measured with ``tracemalloc`` (allocations made by files of the
``openai_latency`` package, the fake server excluded) and by counting live :class:`Operation`
objects and entries of our module-level maps.
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import openai_latency
from openai_latency import OpenAILatencyInstrumentor, _guard, sdk_hooks
from openai_latency.attributes import provider_name
from openai_latency.fake_server import FakeServer
from openai_latency.operation import Operation
from tests import netkit

PACKAGE = str(Path(openai_latency.__file__).resolve().parent)
MESSAGES = [{"role": "user", "content": "hi"}]


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
    exporter: Dropping


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
    try:
        with FakeServer() as server:
            lib = netkit.http_lib()
            limits = lib.Limits(max_connections=max_connections, max_keepalive_connections=20)
            http = netkit.http_client(limits=limits, timeout=30)
            client = netkit.client(server.base_url, http_client=http, max_retries=0)
            try:
                yield Harness(server, client, exporter)
            finally:
                client.close()
    finally:
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


def calls(h: Harness, count: int) -> None:
    """``count`` calls: chat, chat stream (read to the end), embeddings, in turn."""
    for i in range(count):
        kind = i % 3
        if kind == 0:
            h.client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        elif kind == 1:
            for _ in h.client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True):
                pass
        else:
            h.client.embeddings.create(model="text-embedding-3-small", input="hi")
        if i % 500 == 499:
            h.server.clear()  # the fake server logs every request; its log is not ours


def abandoned(h: Harness, count: int) -> None:
    """``count`` streams read for one chunk, then dropped without close().

    A dropped stream is garbage in a reference cycle (the SDK's ``Stream`` and its generator): the
    cyclic collector closes its response whenever it runs. With legacy httpcore (1.0.x) that
    deadlocks when the collector happens to run while the same thread holds the connection pool's
    lock (inside the next request), with or without instrumentation. Automatic collection is held
    off here and the garbage collected between requests."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        for i in range(count):
            stream = h.client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
            next(iter(stream))
            del stream
            if i % 50 == 49:
                gc.collect()
            if i % 200 == 199:
                h.server.clear()
        gc.collect()
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
        "by_response": len(sdk_hooks.BY_RESPONSE),
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

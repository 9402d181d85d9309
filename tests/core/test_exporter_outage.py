"""The OTLP endpoint is down (a closed port, a blackhole that accepts and never answers), spans go
through a BatchSpanProcessor: calls raise nothing and return what they return, and the spans waiting
to be exported stay bounded by the queue. (Latency under an outage: ``benchmarks/exporter_outage.py``.)
"""

from __future__ import annotations

import gc
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.fake_server import FakeServer
from tests.support import faulty_servers, network
from tests.support.network import MESSAGES

QUEUE, BATCH, CALLS = 64, 16, 150


@contextmanager
def _blackhole() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


@contextmanager
def _endpoint(kind: str) -> Iterator[str]:
    if kind == "closed-port":
        yield f"http://127.0.0.1:{faulty_servers.closed_port()}/v1/traces"
    else:
        with _blackhole() as port:
            yield f"http://127.0.0.1:{port}/v1/traces"


@pytest.mark.parametrize("kind", ["closed-port", "blackhole"])
def test_calls_are_unaffected_and_memory_bounded(server: FakeServer, kind: str) -> None:
    with _endpoint(kind) as endpoint:
        processor = BatchSpanProcessor(
            OTLPSpanExporter(endpoint=endpoint, timeout=0.5),
            max_queue_size=QUEUE,
            max_export_batch_size=BATCH,
            schedule_delay_millis=10,
        )
        tracer_provider = TracerProvider(shutdown_on_exit=False)
        tracer_provider.add_span_processor(processor)
        instrumentor = OpenAILatencyInstrumentor()
        instrumentor.instrument(
            tracer_provider=tracer_provider,
            meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]),
        )
        client = network.client(server.base_url, max_retries=0)
        try:
            for i in range(CALLS):
                if i % 2:
                    chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
                    assert chunks[-1].choices[0].finish_reason == "stop"
                else:
                    assert (
                        client.chat.completions.create(model="m", messages=MESSAGES)
                        .choices[0]
                        .message.content
                    )
            gc.collect()
            # 4-5 spans per call were made (over 600); what is left is the queue and what the export
            # worker holds (the batch it is exporting, the one it exported last)
            waiting = sum(type(obj) is ReadableSpan for obj in gc.get_objects())
            assert waiting <= QUEUE + 2 * BATCH, waiting
        finally:
            instrumentor.uninstrument()
            processor.shutdown()  # type: ignore[no-untyped-call]  # bounded: the exporter timeout is 0.5 s

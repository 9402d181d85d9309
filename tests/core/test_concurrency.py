"""Many calls at once on one shared client: each operation keeps its own parent, model and chunks.

500 async streams run concurrently on one ``AsyncOpenAI``, each inside its own parent span; 8 threads
make sync calls (stream and not) on one ``OpenAI``. Every request asks for its own model and chunk
count, so an attribute that leaked from one call to another shows up as a mismatch; the request id
on each operation span is the one of the response its caller got, and the server's log shows that
request asking for the span's model.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics.export import HistogramDataPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from openai_latency.fake_server import RequestRecord, SpawnedServer
from tests.support import network
from tests.support.network import MESSAGES
from tests.support.span_checks import Captured, attrs

STREAMS = 500
THREADS = 8
CALLS_PER_THREAD = 12


def _histogram_count(captured: Captured, name: str) -> int:
    data = captured.metric_reader.get_metrics_data()
    total = 0
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        assert isinstance(point, HistogramDataPoint)
                        total += point.count
    return total


def _check_operations(
    captured: Captured, parents: dict[str, ReadableSpan], expected: dict[str, tuple[str, int | None]]
) -> dict[str, ReadableSpan]:
    """Each parent has exactly one operation child with its own model (and chunk count for streams)."""
    spans = captured.spans()
    by_parent: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.parent is not None:
            by_parent.setdefault(span.parent.span_id, []).append(span)
    ops: dict[str, ReadableSpan] = {}
    for name, parent in parents.items():
        children = by_parent.get(parent.context.span_id, [])
        assert len(children) == 1, (name, [c.name for c in children])
        (op,) = children
        model, chunks = expected[name]
        a = attrs(op)
        assert op.name == f"chat {model}"
        assert a["gen_ai.request.model"] == model and a["gen_ai.response.model"] == model
        assert op.context.trace_id == parent.context.trace_id
        if chunks is None:
            assert "openai_latency.stream.chunks" not in a
        else:
            assert a["openai_latency.stream.chunks"] == chunks
            assert a["openai_latency.stream.end_state"] == "completed"
        # its phases hang off it, and only off it
        phases = by_parent.get(op.context.span_id, [])
        assert {p.name for p in phases} >= {"openai.request_build", "openai.network_wait"}
        assert all(p.context.trace_id == op.context.trace_id for p in phases)
        ops[name] = op
    # and nothing else: every span is a parent, an operation, a phase or an http.* sub-phase
    op_ids = {op.context.span_id for op in ops.values()}
    phase_ids = {s.context.span_id for s in spans if s.parent is not None and s.parent.span_id in op_ids}
    parent_ids = {p.context.span_id for p in parents.values()}
    for span in spans:
        span_id = span.context.span_id
        known = span_id in op_ids | phase_ids | parent_ids
        assert known or (span.parent is not None and span.parent.span_id in phase_ids), span.name
    return ops


def _check_request_ids(
    server: SpawnedServer,
    ops: dict[str, ReadableSpan],
    caller_ids: dict[str, str],
    expected: dict[str, tuple[str, int | None]],
) -> None:
    """Each operation carries the request id of the response its own caller got (all distinct), and
    the server logged that request with the operation's model."""
    assert caller_ids.keys() == ops.keys()
    span_ids = {name: attrs(op)["openai_latency.request_id"] for name, op in ops.items()}
    assert span_ids == caller_ids
    assert len(set(span_ids.values())) == len(ops)
    records: dict[str, RequestRecord] = {r.request_id: r for r in server.records()}
    for name, request_id in span_ids.items():
        assert records[request_id].body["model"] == expected[name][0], name


async def test_500_concurrent_async_streams_on_one_client(
    captured: Captured, tracer_provider: TracerProvider, timing_server: SpawnedServer
) -> None:
    tracer = tracer_provider.get_tracer("test.concurrency")
    # 500 new connections at once on a loaded machine: connecting may take a while (not what is tested)
    client = network.client(timing_server.base_url, is_async=True, max_retries=0, timeout=60)
    parents: dict[str, ReadableSpan] = {}
    expected: dict[str, tuple[str, int | None]] = {}
    caller_ids: dict[str, str] = {}
    start = asyncio.Event()

    async def one(i: int) -> None:
        name = f"parent-{i}"
        with tracer.start_as_current_span(name) as parent:
            await start.wait()  # all 500 in flight together
            model = f"model-{i}"
            headers = {"x-fake-chunks": str(1 + i % 9), "x-fake-chunk-delay-ms": "1"}
            stream = await client.chat.completions.create(
                model=model, messages=MESSAGES, stream=True, extra_headers=headers
            )
            chunks = [chunk async for chunk in stream]
            assert all(chunk.model == model for chunk in chunks)
            expected[name] = (model, len(chunks))
            caller_ids[name] = stream.response.headers["x-request-id"]
        assert isinstance(parent, ReadableSpan)
        parents[name] = parent

    tasks = [asyncio.ensure_future(one(i)) for i in range(STREAMS)]
    await asyncio.sleep(0)
    start.set()
    await asyncio.gather(*tasks)
    await client.close()

    ops = _check_operations(captured, parents, expected)
    assert len(ops) == STREAMS
    _check_request_ids(timing_server, ops, caller_ids, expected)
    assert _histogram_count(captured, "gen_ai.client.operation.duration") == STREAMS
    assert _histogram_count(captured, "gen_ai.client.operation.time_to_first_chunk") == STREAMS
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing leaked into the test's context


def test_8_threads_of_sync_calls_on_one_client(
    captured: Captured, tracer_provider: TracerProvider, timing_server: SpawnedServer
) -> None:
    tracer = tracer_provider.get_tracer("test.concurrency")
    client = network.client(timing_server.base_url, max_retries=0)
    parents: dict[str, ReadableSpan] = {}
    expected: dict[str, tuple[str, int | None]] = {}
    caller_ids: dict[str, str] = {}
    failures: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        barrier.wait()
        try:
            for c in range(CALLS_PER_THREAD):
                name, model, stream = f"parent-{t}-{c}", f"model-{t}-{c}", c % 2 == 1
                headers = {"x-fake-chunks": str(1 + (t + c) % 5)}
                with tracer.start_as_current_span(name) as parent:
                    result: Any = client.chat.completions.create(
                        model=model, messages=MESSAGES, stream=stream, extra_headers=headers
                    )
                    if stream:
                        chunks = list(result)
                        assert all(chunk.model == model for chunk in chunks)
                        outcome: tuple[str, int | None] = (model, len(chunks))
                        request_id = result.response.headers["x-request-id"]
                    else:
                        assert result.model == model
                        outcome = (model, None)
                        request_id = result._request_id  # the SDK's copy of x-request-id
                assert isinstance(parent, ReadableSpan)
                with lock:
                    parents[name], expected[name] = parent, outcome
                    caller_ids[name] = request_id
        except BaseException as exc:  # re-raised in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]

    total = THREADS * CALLS_PER_THREAD
    ops = _check_operations(captured, parents, expected)
    assert len(ops) == total
    _check_request_ids(timing_server, ops, caller_ids, expected)
    assert _histogram_count(captured, "gen_ai.client.operation.duration") == total
    assert _histogram_count(captured, "gen_ai.client.operation.time_to_first_chunk") == total // 2

"""``instrument()``/``uninstrument()`` 100 times in a row, also while other threads make calls.

After every ``instrument()`` each SDK boundary is wrapped exactly once (no wrapper around a wrapper);
after every ``uninstrument()`` none is; a call made while uninstrumented exports nothing, a call made
while instrumented exports exactly one operation, and one in flight across a switch ends at most once.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import wrapt
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.call import deferred
from openai_latency.fake_server import FakeServer
from openai_latency.hooks import legacy_send
from tests.support import network
from tests.support.network import MESSAGES
from tests.support.patch_targets import patched_targets  # every (owner, attribute) instrument() wraps
from tests.support.span_checks import attrs

CYCLES = 100
THREADS = 4


def _wrap_depth(owner: Any, name: str) -> int:
    depth, value = 0, vars(owner)[name]
    while isinstance(value, wrapt.FunctionWrapper):
        depth, value = depth + 1, value.__wrapped__
    return depth


def _legacy_wrapped() -> int:
    return len(legacy_send._state["wrapped"])


def test_100_cycles_no_stacking_no_leftovers(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter, server: FakeServer
) -> None:
    targets = patched_targets()
    instrumentor = OpenAILatencyInstrumentor()
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    client = network.client(server.base_url, max_retries=0)
    span_exporter.clear()
    try:
        for cycle in range(CYCLES):
            instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
            assert {_wrap_depth(owner, name) for owner, name in targets} == {1}, cycle
            assert _legacy_wrapped() <= 2
            if cycle % 25 == 0:  # traced once, not once per earlier instrument()
                client.chat.completions.create(model="m", messages=MESSAGES)
                ops = [s for s in span_exporter.get_finished_spans() if s.parent is None]
                assert len(ops) == 1 and attrs(ops[0])["openai_latency.attempts"] == 1
                span_exporter.clear()
            instrumentor.uninstrument()
            assert {_wrap_depth(owner, name) for owner, name in targets} == {0}, cycle
            assert _legacy_wrapped() == 0
            if cycle % 25 == 0:
                client.chat.completions.create(model="m", messages=MESSAGES)
                assert span_exporter.get_finished_spans() == ()
    finally:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        span_exporter.clear()
    # the request carried one traceparent when traced, none when not
    traced = [r for r in server.records() if "traceparent" in r.headers]
    assert traced and all("," not in r.headers["traceparent"] for r in traced)


def _request_id(result: Any) -> str:
    response = getattr(result, "response", None)
    if response is not None:  # a Stream
        return str(response.headers["x-request-id"])
    return str(result._request_id)


def test_cycles_with_calls_in_flight_on_other_threads(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter, server: FakeServer
) -> None:
    instrumentor = OpenAILatencyInstrumentor()
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    client = network.client(server.base_url, max_retries=0)
    windows: list[tuple[bool | None, int, int]] = []  # (instrumented, from, to); None: switching
    calls: list[tuple[str, int, int]] = []  # (request id, started, ended)
    failures: list[BaseException] = []
    stop = threading.Event()
    lock = threading.Lock()

    def caller(index: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                started = time.perf_counter_ns()
                if (index + n) % 2:
                    stream = client.chat.completions.create(
                        model="m", messages=MESSAGES, stream=True, extra_headers={"x-fake-chunks": "3"}
                    )
                    assert len(list(stream)) == 5  # role + 3 + finish
                    result: Any = stream
                else:
                    result = client.chat.completions.create(model="m", messages=MESSAGES)
                    assert result.choices[0].message.content
                ended = time.perf_counter_ns()
            except BaseException as exc:  # re-raised in the test's thread
                failures.append(exc)
                return
            with lock:
                calls.append((_request_id(result), started, ended))

    def hold_until_a_call_fits(since: int) -> None:
        """Keep the current window open until some call started and ended inside it (at most 10 s).

        A 4 ms window is shorter than an instrumented call on a loaded 2-core machine, so without
        these longer windows "both kinds happened" would depend on the machine's load.
        """
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not failures:
            with lock:
                if any(started >= since for _, started, _ in calls):
                    return
            time.sleep(0.001)

    span_exporter.clear()
    threads = [threading.Thread(target=caller, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    try:
        mark = time.perf_counter_ns()
        for cycle in range(CYCLES):
            before = time.perf_counter_ns()
            windows.append((False, mark, before))  # uninstrumented until instrument() starts
            instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
            now = time.perf_counter_ns()
            windows.append((None, before, now))  # switching: partly wrapped
            time.sleep(0.004)
            if cycle % 25 == 0:
                hold_until_a_call_fits(now)
            mark = time.perf_counter_ns()  # instrumented from `now` until uninstrument() starts
            windows.append((True, now, mark))
            instrumentor.uninstrument()
            mark_after = time.perf_counter_ns()
            windows.append((None, mark, mark_after))  # switching
            time.sleep(0.004)
            if cycle % 25 == 0:
                hold_until_a_call_fits(mark_after)
            mark = mark_after
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
    if failures:
        raise failures[0]
    # A stream created while instrumented whose generator was made after uninstrument() is not timed;
    # its operation ends when the response is collected (``abandoned``): collect now, so that those
    # spans are counted here and do not end during a later test (they end on deferred's thread).
    gc.collect()
    assert deferred.flush(timeout=10)
    ops: dict[str, int] = {}
    unattributed = 0
    for span in span_exporter.get_finished_spans():
        if span.parent is None:
            request_id = attrs(span).get("openai_latency.request_id")
            if request_id is None:
                # its call started while instrumented and reached the HTTP send after uninstrument():
                # no attempt was recorded, the span still ended (once)
                assert attrs(span)["openai_latency.attempts"] == 0, attrs(span)
                unattributed += 1
                continue
            ops[str(request_id)] = ops.get(str(request_id), 0) + 1
    span_exporter.clear()

    def state(started: int, ended: int) -> bool | None:
        """True/False when the whole call ran in one instrumented/uninstrumented window, else None."""
        for instrumented, start, end in windows:
            if instrumented is not None and start <= started and ended <= end:
                return instrumented
        return None

    assert [k for k, count in ops.items() if count != 1] == [], ops  # no call traced twice
    by_state: dict[bool | None, int] = {True: 0, False: 0, None: 0}
    for request_id, started, ended in calls:
        where = state(started, ended)
        by_state[where] += 1
        if where is True:
            assert request_id in ops, "a call made while instrumented was not traced"
        elif where is False:
            assert request_id not in ops, "a call made while uninstrumented was traced"
    assert set(ops) <= {request_id for request_id, _, _ in calls}
    assert by_state[True] > 0 and by_state[False] > 0, by_state  # both kinds happened
    assert unattributed <= by_state[None]  # only calls that straddled a switch
    assert {_wrap_depth(owner, name) for owner, name in patched_targets()} == {0}

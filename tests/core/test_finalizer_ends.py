"""A stream that only the garbage collector ends is ended on deferred's worker thread, never inside
the collector; open streams are ended at interpreter exit; a forked child ends its own.

Why (src/openai_latency/call/deferred.py): ending a span runs span processors; ``SimpleSpanProcessor``
sets a ContextVar, and on CPython <= 3.11 a ContextVar set from a collection that interrupted
another ``ContextVar.set`` crashes the process (CPython gh-148891; this suite's instrument-cycles
test hit it as a segmentation fault about once in 40 runs before the hand-over).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.call import deferred
from openai_latency.fake_server import FakeServer
from tests.support import network
from tests.support.network import MESSAGES
from tests.support.span_checks import attrs


class _EndRecorder(SpanProcessor):
    """Records, for every ended operation span, the thread it ended on and whether that thread was
    inside a garbage collection at the time (``gc.callbacks`` marks the collecting thread)."""

    def __init__(self) -> None:
        self.collecting: int | None = None
        self.ends: list[tuple[ReadableSpan, str, bool]] = []

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        self.collecting = threading.get_ident() if phase == "start" else None

    def on_end(self, span: ReadableSpan) -> None:
        if span.parent is None:
            inside = self.collecting == threading.get_ident()
            self.ends.append((span, threading.current_thread().name, inside))


@pytest.fixture
def recorder(server: FakeServer) -> Iterator[_EndRecorder]:
    recorder = _EndRecorder()
    provider = TracerProvider()
    provider.add_span_processor(recorder)
    instrumentor = OpenAILatencyInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    gc.callbacks.append(recorder.on_gc)
    try:
        yield recorder
    finally:
        gc.callbacks.remove(recorder.on_gc)
        instrumentor.uninstrument()


def _never_iterated(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    cycle: list[Any] = [stream]
    cycle.append(cycle)  # only the cyclic collector frees it (the response's weakref callback)


def _read_one_chunk(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, extra_headers={"x-fake-chunks": "20"}
    )
    next(iter(stream))
    cycle: list[Any] = [stream]
    cycle.append(cycle)  # the wrapped generator's GeneratorExit, thrown by the collector


@pytest.mark.parametrize("drop", [_never_iterated, _read_one_chunk], ids=["never-iterated", "one-chunk-read"])
def test_a_collected_stream_ends_on_the_worker_thread_not_in_the_collector(
    recorder: _EndRecorder, server: FakeServer, drop: Callable[[openai.OpenAI], None]
) -> None:
    client = network.client(server.base_url, max_retries=0)
    drop(client)
    assert recorder.ends == []  # unreachable, but nothing has collected it yet
    gc.collect()
    assert deferred.flush(timeout=10)
    assert len(recorder.ends) == 1, recorder.ends
    span, thread_name, inside_collection = recorder.ends[0]
    assert attrs(span)["openai_latency.stream.end_state"] == "abandoned"
    assert not inside_collection
    assert thread_name == "openai-latency-stream-ends"


def test_flush_without_a_worker_ends_what_is_queued_in_the_calling_thread(
    recorder: _EndRecorder, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = network.client(server.base_url, max_retries=0)
    client.chat.completions.create(model="m", messages=MESSAGES)  # a call: the recorder sees it
    recorder.ends.clear()
    _never_iterated(client)
    monkeypatch.setattr(deferred, "_worker", None)  # as if the thread could not be started
    monkeypatch.setattr(deferred, "_queue", type(deferred._queue)())
    gc.collect()
    assert recorder.ends == []  # queued, not ended in the collector
    assert deferred.flush(timeout=10)
    assert [(name, inside) for _, name, inside in recorder.ends] == [("MainThread", False)]


_SCRIPT_PRELUDE = """
import gc, json, os, sys
import openai
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from openai_latency import OpenAILatencyInstrumentor
from openai_latency.call import deferred
from openai_latency.fake_server import FakeServer

class Lines(SpanExporter):
    def export(self, spans):
        for span in spans:
            if span.parent is None:
                state = span.attributes.get("openai_latency.stream.end_state")
                print(json.dumps({"pid": os.getpid(), "end_state": state}), flush=True)
        return SpanExportResult.SUCCESS

provider = TracerProvider()  # registers its shutdown at exit first: it runs after ours
provider.add_span_processor(SimpleSpanProcessor(Lines()))
OpenAILatencyInstrumentor().instrument(tracer_provider=provider)
server = FakeServer().__enter__()
client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)

def stream():
    return client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True,
        extra_headers={"x-fake-chunks": "20"},
    )
"""


def _run(body: str) -> list[dict[str, Any]]:
    code = _SCRIPT_PRELUDE + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "internal error" not in out.stderr, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_a_stream_still_open_at_exit_is_ended_and_exported() -> None:
    lines = _run(
        """
        KEEP = stream()
        next(iter(KEEP))  # open, referenced, never closed: the program just ends
        """
    )
    assert [line["end_state"] for line in lines] == ["abandoned"]


def test_a_forked_child_ends_its_own_collected_streams() -> None:
    lines = _run(
        """
        first = stream()
        next(iter(first))  # the parent's worker thread is running from here on
        pid = os.fork()
        if pid == 0:  # the child: no worker thread was copied, a new one starts
            child = stream()
            next(iter(child))
            del child
            gc.collect()
            ok = deferred.flush(timeout=10) and deferred._worker.is_alive()
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        del first
        gc.collect()
        assert deferred.flush(timeout=10)
        """
    )
    by_pid: dict[int, list[str]] = {}
    for line in lines:
        by_pid.setdefault(line["pid"], []).append(line["end_state"])
    # each process exported its own stream once; the parent's was not ended again in the child
    assert sorted(by_pid.values()) == [["abandoned"], ["abandoned"]], lines

"""A server that holds its first writes back, then sends them at once (found on llama.cpp with both
cores loaded, tests/realserver: TPOT read 1.0 ms for the server's own 2.1 ms decode, its HTTP thread
holding ~30 tokens back). The first token reaches the client together with many tokens made after
it, so the window from its arrival to the last token's is shorter than the decode that produced
them, and TPOT over all the tokens understated the pace. The tokens handed over right after the
first one by the same network read (:mod:`openai_latency.hooks.reads` counts the reads) were made before
the window and are not counted in it. Which chunks share a read is counted, not timed: a caller
starved of CPU, whose every ``next`` takes milliseconds, finds the same burst.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest

from openai_latency.fake_server import RequestRecord
from tests.core.test_fast_pace import MESSAGES, _pace_ns
from tests.support.span_checks import Captured, attrs


def _stream(client: openai.OpenAI, script: dict[str, str]) -> None:
    for _chunk in client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=script,
    ):
        pass


def _tpot(captured: Captured, timing_server: Any, script: dict[str, str]) -> tuple[float | None, float]:
    client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test", max_retries=0)
    _stream(client, {"x-fake-chunks": "2"})  # warm-up
    captured.clear()
    _stream(client, script)
    a = attrs(captured.operation())
    record: RequestRecord = timing_server.record(a["openai_latency.request_id"])
    return a.get("openai_latency.time_per_output_token"), _pace_ns(record)


def test_a_held_back_first_write_never_understates_tpot(captured: Captured, timing_server: Any) -> None:
    """64 tokens due every 10 ms, written 40 then 24 at a time: the first token arrives with 39 more.
    The window between the two writes (24 x 10 ms) over all 63 steps read 3.8 ms for a 10 ms pace;
    over the 24 steps made inside it, the pace."""
    tpot, pace_ns = _tpot(
        captured,
        timing_server,
        {"x-fake-chunks": "64", "x-fake-chunk-delay-ms": "10", "x-fake-write-batch": "40"},
    )
    assert tpot is not None and tpot * 1e9 == pytest.approx(pace_ns, rel=0.05), (tpot, pace_ns)


@contextmanager
def _cpu_burner() -> Iterator[None]:
    """A thread of this process that computes without pause, the GIL changing hands every 1 ms: a
    ``next`` that only parses a buffered chunk (~50 µs) then often takes over a millisecond, and the
    40 chunks of the first read (a few ms of parsing) are interrupted at least once."""
    stop = threading.Event()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)

    def burn() -> None:
        while not stop.is_set():
            sum(range(1000))

    thread = threading.Thread(target=burn, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)


def test_the_first_read_is_counted_not_timed_when_the_caller_is_starved(
    captured: Captured, timing_server: Any
) -> None:
    """The same held-back first write, read by a caller that competes for the GIL with a busy thread:
    the 39 tokens of the first read are still left out of the window (a rule that took a fast
    ``next`` for "same read" counted only the few parsed before the first switch, and TPOT read
    about half the pace), and the window's ends are late by at most a switch interval each."""
    with _cpu_burner():
        tpot, pace_ns = _tpot(
            captured,
            timing_server,
            {"x-fake-chunks": "64", "x-fake-chunk-delay-ms": "10", "x-fake-write-batch": "40"},
        )
    assert tpot is not None and tpot * 1e9 == pytest.approx(pace_ns, rel=0.05), (tpot, pace_ns)

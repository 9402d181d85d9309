"""Time per output token at a fast server's pace, and under client load (issue 26, item 5).

A fast inference server decodes a token every 1-3 ms and its chunks reach the client several per
read: most ``next()`` calls then find their chunk already buffered, and the gaps between them are
not observed. With an idle caller the stream's window is still known at both ends, so TPOT is set
and right; with a caller slower than the server it is still never understated.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import openai
import pytest

from openai_latency.fake_server import RequestRecord
from tests.support.span_checks import Captured, attrs

MESSAGES = [{"role": "user", "content": "go"}]


def _pace_ns(record: RequestRecord) -> float:
    """The server's scripted pace: when each token was due, first to last."""
    due = record.scripted_token_ns
    return (due[-1] - due[0]) / (len(due) - 1)


@pytest.mark.parametrize(("pace_ms", "batch"), [("1.5", 4), ("1", 2)])
def test_tpot_at_a_fast_pace_with_chunks_written_several_at_a_time(
    captured: Captured, timing_server: Any, pace_ms: str, batch: int
) -> None:
    """200 tokens at a 1.5 ms pace written 4 at a time, and at a 1 ms pace written 2 at a time (every
    ``next`` waits under the 2 ms that makes a chunk "waited for": no gap is observed at all)."""
    client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test")
    script = {
        "x-fake-ttft-ms": "20",
        "x-fake-chunks": "200",
        "x-fake-chunk-delay-ms": pace_ms,
        "x-fake-write-batch": str(batch),
    }
    for _chunk in client.chat.completions.create(model="warm-up", messages=MESSAGES, stream=True):
        pass
    buffered = 0
    for _ in range(8):
        captured.clear()
        for _chunk in client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=script,
        ):
            pass
        a = attrs(captured.operation())
        record: RequestRecord = timing_server.record(a["openai_latency.request_id"])
        assert len(set(record.content_event_ns)) == 200 // batch  # the writes
        buffered += a["openai_latency.stream.buffered_chunks"]
        # set on every call, within 5 % of the scripted pace (the tokens that came in the first
        # token's read are not counted in the window that starts at its arrival)
        assert a["openai_latency.time_per_output_token"] * 1e9 == pytest.approx(_pace_ns(record), rel=0.05)
        assert a["openai_latency.time_per_output_token.rule"] == "answer_tokens"
    assert buffered >= 8 * 100  # most next() calls found their chunk already there: the case at stake


@pytest.mark.parametrize("streams", [8, 64])
def test_tpot_of_concurrent_async_streams(captured: Captured, timing_server: Any, streams: int) -> None:
    """Concurrent streams at a 10 ms pace in one event loop: TPOT is set on every call. 8 streams
    leave the loop room: every TPOT is the server's pace (±5 %).

    64 saturate the loop on 2 cores: each chunk is handed over later than it arrived, by a lag that
    changes along the stream (measured on openai 1.x and 3.x: the first token handed over a median
    3-7 ms after the server wrote it, the last 17-30 ms; the caller's own clock then reads the pace
    between -13 % and +25 %, stream by stream). Our marks are the reads' returns
    (:mod:`openai_latency.hooks.reads`), before the SDK's parsing, and at the median they are at
    least as close to the server's pace as the caller's own clock; getting every stream close under
    a saturated loop needs arrival times taken below the hand-over (issue 33), measured by
    ``benchmarks/saturated_tpot.py``."""

    def timing(errors: tuple[list[float], list[float]]) -> None:
        to_server, to_caller = errors
        if streams <= 8:
            assert max(abs(e) for e in to_server) <= 0.05, sorted(to_server)
        else:
            ours, caller = abs(statistics.median(to_server)), abs(_caller_error(to_server, to_caller))
            assert ours <= caller + 0.01, (ours, caller)

    # TPOT set on every call is checked in every run; another process's load can starve the loop
    # as 64 streams do, so the comparison with the server's log gets a few fresh runs.
    for attempt in range(3):
        errors = _concurrent_streams(captured, timing_server, streams)
        try:
            timing(errors)
            return
        except AssertionError:
            if attempt == 2:
                raise
            captured.clear()


def _caller_error(to_server: list[float], to_caller: list[float]) -> float:
    """The median error of the caller's own clock against the server's pace, from ours against both
    (``(1 + to_server) / (1 + to_caller) - 1`` per stream)."""
    return statistics.median((1 + s) / (1 + c) - 1 for s, c in zip(to_server, to_caller, strict=True))


def _concurrent_streams(
    captured: Captured, timing_server: Any, streams: int
) -> tuple[list[float], list[float]]:
    """TPOT of each of ``streams`` concurrent streams, relative to the server's pace and to what the
    caller's own clock saw (``tpot / pace - 1``)."""
    script = {"x-fake-ttft-ms": "30", "x-fake-chunks": "20", "x-fake-chunk-delay-ms": "10"}
    seen: dict[str, list[int]] = {}

    async def one(client: openai.AsyncOpenAI, keep: bool = True) -> None:
        stream = await client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=script,
        )
        times = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                times.append(time.perf_counter_ns())
        if keep:
            seen[stream.response.headers["x-request-id"]] = times

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=timing_server.base_url, api_key="sk-test", max_retries=0)
        await one(client, keep=False)
        captured.clear()
        await asyncio.gather(*(one(client) for _ in range(streams)))
        await client.close()

    asyncio.run(run())
    operations = captured.operations()
    assert len(operations) == streams
    to_server, to_caller = [], []
    for op in operations:
        a = attrs(op)
        request_id = a["openai_latency.request_id"]
        tpot = a.get("openai_latency.time_per_output_token")
        assert tpot is not None, a  # on every call
        content = timing_server.record(request_id).content_event_ns
        to_server.append(tpot * 1e9 / ((content[-1] - content[0]) / (len(content) - 1)) - 1)
        caller = seen[request_id]
        to_caller.append(tpot * 1e9 / ((caller[-1] - caller[0]) / (len(caller) - 1)) - 1)
    return to_server, to_caller


def test_a_slow_caller_never_understates_tpot(captured: Captured, timing_server: Any) -> None:
    """The caller spends 15 ms per chunk on a 10 ms server: chunks pile up in the socket, their
    arrivals are unknown, and TPOT is either unset or at least the server's pace."""
    client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test")
    script = {"x-fake-ttft-ms": "20", "x-fake-chunks": "12", "x-fake-chunk-delay-ms": "10"}
    for sleep_ms in (15, 30):
        captured.clear()
        for _chunk in client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=script,
        ):
            time.sleep(sleep_ms / 1000)
        a = attrs(captured.operation())
        record: RequestRecord = timing_server.record(a["openai_latency.request_id"])
        content = record.content_event_ns
        server_pace = (content[-1] - content[0]) / (len(content) - 1)
        tpot = a.get("openai_latency.time_per_output_token")
        assert a["openai_latency.stream.buffered_chunks"] >= 5
        assert tpot is None or tpot * 1e9 >= server_pace * 0.99, (tpot, server_pace)

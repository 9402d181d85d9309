"""The event loop's arrival stamps (:mod:`openai_latency.hooks.arrival_stamps`): anyio's asyncio
stream protocol stamps each ``data_received`` while instrumented, and only then; an async stream's
chunks take those stamps, which lie between the server's write and the hand-over to the caller."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import anyio
import openai
import pytest
from anyio._backends._asyncio import StreamProtocol

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.hooks import arrival_stamps
from tests.support.span_checks import Captured, attrs

MESSAGES = [{"role": "user", "content": "go"}]
ORIGINAL = StreamProtocol.__dict__["data_received"]


def test_data_received_is_stamped_while_instrumented_only(instrument: Callable[..., Captured]) -> None:
    instrument()
    assert StreamProtocol.__dict__["data_received"] is not ORIGINAL
    assert StreamProtocol.__dict__["data_received"].__wrapped__ is ORIGINAL
    OpenAILatencyInstrumentor().uninstrument()
    assert StreamProtocol.__dict__["data_received"] is ORIGINAL


def test_a_slow_async_callers_time_is_never_the_servers(
    instrument: Callable[..., Captured], timing_server: Any
) -> None:
    """A caller that sleeps 30 ms after each token of a 10 ms pace: the bytes wait in the socket
    (anyio pauses reading between reads) and are stamped when the next read resumes it, within the
    caller's own time (the doubt). The first token's time lies between the server's write and the
    hand-over; TPOT is the server's pace or unset, never the caller's 30 ms."""
    captured = instrument()
    handed: list[int] = []

    async def main() -> tuple[str, int]:
        client = openai.AsyncOpenAI(base_url=timing_server.base_url, api_key="sk-test", max_retries=0)
        called = time.monotonic_ns()
        stream = await client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"x-fake-chunks": "12", "x-fake-chunk-delay-ms": "10"},
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                handed.append(time.monotonic_ns())
                await asyncio.sleep(0.03)  # after each token: the first one is read without delay
        await client.close()
        return str(stream.response.headers["x-request-id"]), called

    request_id, called = asyncio.run(main())
    record = timing_server.record(request_id)
    a = attrs(captured.operation())
    assert len(handed) == 12
    ttft = a["openai_latency.time_to_first_token"]
    # the call started after `called` and the server received it after the call started
    assert (record.first_content_ns - record.received_ns) / 1e9 <= ttft <= (handed[0] - called) / 1e9
    content = record.content_event_ns
    pace_ns = (content[-1] - content[0]) / (len(content) - 1)
    tpot = a.get("openai_latency.time_per_output_token")
    assert tpot is None or tpot * 1e9 == pytest.approx(pace_ns, rel=0.05), (tpot, pace_ns)


def test_a_protocol_without_its_queue_changes_nothing_for_the_reader() -> None:
    """Our stamp fails (no ``read_queue``: not anyio's protocol as we know it): the original
    data_received has run, the failure is reported, not raised."""

    class Odd:
        pass

    received: list[bytes] = []

    def original(self: Any, data: bytes) -> None:
        received.append(data)

    stamped = arrival_stamps._data_received(original)
    stamped(Odd(), b"x")
    assert received == [b"x"]
    assert arrival_stamps.consumed_ns(Odd()) == 0


def test_the_stamp_is_the_polls_return_not_the_callbacks_run(instrument: Callable[..., Captured]) -> None:
    """A saturated loop runs the task steps queued before its poll first, then the read callbacks:
    a task that works 30 ms in the iteration that polls the bytes must not make them 30 ms late.
    The order is the loop's own, so the bounds hold on any machine: write <= stamp <= the work's
    start."""
    instrument()
    marks: dict[str, int] = {}

    async def main() -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        stream = await anyio.connect_tcp("127.0.0.1", listener.getsockname()[1])
        server, _ = listener.accept()
        server.sendall(b"w")
        assert await stream.receive() == b"w"

        async def hog() -> None:
            server.sendall(b"x")  # in the client's socket before the next poll
            marks["written"] = time.perf_counter_ns()
            await asyncio.sleep(0)  # queued before that poll: runs before its read callback
            marks["work"] = time.perf_counter_ns()
            while time.perf_counter_ns() - marks["work"] < 30_000_000:
                pass

        reader = asyncio.ensure_future(stream.receive())
        await asyncio.sleep(0)  # the reader waits, reading resumed
        await hog()
        assert await reader == b"x"
        stamp = arrival_stamps.consumed_ns(stream._protocol)  # type: ignore[attr-defined]
        await stream.aclose()
        server.close()
        listener.close()
        return int(stamp)

    stamp = asyncio.run(main())
    assert marks["written"] <= stamp <= marks["work"], (stamp - marks["written"]) / 1e6


def test_uninstrument_gives_every_watched_selector_its_own_select_back(
    instrument: Callable[..., Captured], timing_server: Any
) -> None:
    instrument()
    selectors: list[Any] = []

    async def main() -> None:
        selectors.append(asyncio.get_running_loop()._selector)  # type: ignore[attr-defined]
        client = openai.AsyncOpenAI(base_url=timing_server.base_url, api_key="sk-test", max_retries=0)
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        async for _ in stream:
            pass
        await client.close()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
        assert "select" in vars(selectors[0])
        OpenAILatencyInstrumentor().uninstrument()
        assert "select" not in vars(selectors[0])
        assert not hasattr(selectors[0], arrival_stamps._POLLS)
    finally:
        # The SDK's inner SSE generators end unclosed; let the loop finalize them.
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

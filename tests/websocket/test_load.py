"""WebSocket turns under load: 100 connections x 20 turns at once, every span ended exactly once; and
memory that stays flat over 10,000 turns (tracemalloc)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from openai_latency import OpenAILatencyInstrumentor
from tests.support import memory_harness
from tests.websocket.support import create, drain_async, require_responses_ws, script

require_responses_ws()


class Counting(SpanProcessor):
    """Counts span ends by span id (no span kept: the memory test measures ours, not an exporter's)."""

    def __init__(self) -> None:
        self.ends: Counter[int] = Counter()
        self.names: Counter[str] = Counter()

    def on_end(self, span: ReadableSpan) -> None:
        self.ends[span.context.span_id] += 1
        self.names[span.name] += 1


@pytest.fixture
def counting() -> Iterator[Counting]:
    instrumentor = OpenAILatencyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    processor = Counting()
    provider = TracerProvider()
    provider.add_span_processor(processor)
    instrumentor.instrument(tracer_provider=provider)
    yield processor
    instrumentor.uninstrument()


async def _connection(client: openai.AsyncOpenAI, turns: int) -> None:
    async with client.responses.connect() as connection:
        for _ in range(turns):
            await connection.send(create(metadata=script(chunks=3)))
            events = await drain_async(connection)
            assert events[-1].type == "response.completed"


def test_100_connections_x_20_turns_end_every_span_once(
    counting: Counting, timing_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=timing_server.base_url, api_key="sk-test")
        await asyncio.gather(*(_connection(client, 20) for _ in range(100)))

    asyncio.run(run())
    assert counting.names["chat gpt-4o-mini"] == 2000
    assert counting.names["openai.websocket.connect"] == 100
    assert counting.names["openai.stream_drain"] == 2000
    assert set(counting.ends.values()) == {1}
    assert not [
        r for r in caplog.records if "end" in r.getMessage().lower() and "span" in r.getMessage().lower()
    ]


LONG_TURNS = 10_000 if os.environ.get("OPENAI_LATENCY_WS_LONG") else 600
"""Turns measured: 10,000 with OPENAI_LATENCY_WS_LONG=1 (about 3 minutes under tracemalloc on a 2-core
machine), 600 in the suite."""


@pytest.mark.slow
def test_memory_stays_flat_over_many_turns(timing_server: Any) -> None:
    instrumentor = OpenAILatencyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    ended = Counter[str]()

    class ByName(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            ended[span.name] += 1

    provider = TracerProvider()
    provider.add_span_processor(ByName())
    instrumentor.instrument(tracer_provider=provider)

    async def turns(n: int) -> None:
        client = openai.AsyncOpenAI(base_url=timing_server.base_url, api_key="sk-test")
        await asyncio.gather(*(_connection(client, n // 20) for _ in range(20)))

    try:
        asyncio.run(turns(200))  # warm-up: model builds, caches, the first connections
        tracemalloc.start()
        asyncio.run(turns(200))
        before_ours, before_all = memory_harness.our_bytes(), _all_bytes()
        asyncio.run(turns(LONG_TURNS))
        after_ours, after_all = memory_harness.our_bytes(), _all_bytes()
    finally:
        tracemalloc.stop()
        instrumentor.uninstrument()
    assert ended["chat gpt-4o-mini"] == 400 + LONG_TURNS
    assert after_ours - before_ours < 16 * 1024, (before_ours, after_ours)
    assert after_all - before_all < 512 * 1024, (before_all, after_all)  # the SDK's and websockets' too


def _all_bytes() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]

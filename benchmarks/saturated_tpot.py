"""TPOT of many concurrent streams in one event loop, against the fake server's own log.

A client whose loop is saturated hands every chunk over later than it arrived, by a lag that changes
along a stream. This runs ``--streams`` async streams at once (the server scripted at a 10 ms pace,
20 tokens), ``--rounds`` times, and prints, against the pace the server's log shows for each stream:

- our ``openai_latency.time_per_output_token``;
- the caller's own clock: first to last content chunk handed over, over tokens - 1 (what any
  in-process stopwatch that reads at hand-over sees);
- the hand-over lag of each stream's first and last token (hand-over minus the server's write).

The server runs in its own process; with ``--pin`` it is pinned to CPU 0 and this process to CPU 1
(the peer comparison of issue 33 pins the same way). Run it on a quiet machine:

    python benchmarks/saturated_tpot.py [--streams 64] [--rounds 3] [--pin]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

import openai
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.fake_server import FakeServer

SCRIPT = {"x-fake-ttft-ms": "30", "x-fake-chunks": "20", "x-fake-chunk-delay-ms": "10"}
MESSAGES = [{"role": "user", "content": "go"}]


async def _stream(client: openai.AsyncOpenAI, seen: dict[str, list[int]] | None) -> None:
    stream = await client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=SCRIPT,
    )
    times = []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter_ns())
    if seen is not None:
        seen[stream.response.headers["x-request-id"]] = times


async def _round(base_url: str, streams: int, seen: dict[str, list[int]]) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    await _stream(client, None)  # the connection and the SDK's lazy model builds
    await asyncio.gather(*(_stream(client, seen) for _ in range(streams)))
    await client.close()


def _line(name: str, errors: list[float]) -> str:
    e = sorted(errors)
    pick = lambda q: e[min(len(e) - 1, int(q * len(e)))] * 100  # noqa: E731
    return (
        f"{name:<14} median {statistics.median(e) * 100:+6.2f} %  p5 {pick(0.05):+6.2f} %  "
        f"p95 {pick(0.95):+6.2f} %  min {e[0] * 100:+6.2f} %  max {e[-1] * 100:+6.2f} %"
    )


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pin", action="store_true", help="server on CPU 0, this process on CPU 1")
    args = parser.parse_args()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAILatencyInstrumentor().instrument(tracer_provider=provider)
    ours: list[float] = []
    caller: list[float] = []
    lags: list[tuple[float, float]] = []
    unset = 0
    with FakeServer.spawn() as server:
        if args.pin:
            os.sched_setaffinity(server.process.pid, {0})
            os.sched_setaffinity(0, {1})
        for _ in range(args.rounds):
            seen: dict[str, list[int]] = {}
            exporter.clear()
            asyncio.run(_round(server.base_url, args.streams, seen))
            for span in exporter.get_finished_spans():
                a: Any = span.attributes
                request_id = a.get("openai_latency.request_id")
                if request_id not in seen:
                    continue
                written = server.record(request_id).content_event_ns
                pace = (written[-1] - written[0]) / (len(written) - 1)
                handed = seen[request_id]
                caller.append((handed[-1] - handed[0]) / (len(handed) - 1) / pace - 1)
                lags.append(((handed[0] - written[0]) / 1e6, (handed[-1] - written[-1]) / 1e6))
                tpot = a.get("openai_latency.time_per_output_token")
                if tpot is None:
                    unset += 1
                else:
                    ours.append(tpot * 1e9 / pace - 1)
    print(f"{args.streams} streams x {args.rounds} rounds, 10 ms pace, 20 tokens; against the server's log")
    print(_line("ours", ours) + f"  (unset on {unset})")
    print(_line("caller clock", caller))
    first, last = sorted(lag[0] for lag in lags), sorted(lag[1] for lag in lags)
    p95 = int(0.95 * len(first))
    print(
        f"hand-over lag  first token p50 {statistics.median(first):.1f} ms p95 {first[p95]:.1f} ms;"
        f"  last token p50 {statistics.median(last):.1f} ms p95 {last[p95]:.1f} ms"
    )


if __name__ == "__main__":
    main()

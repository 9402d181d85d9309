"""Where a streamed request's CPU goes in ``openai-latency bench``, counted in instructions (issue 33).

bench's client CPU per streamed request (~6.5-7.7 ms at c=64 in benchmarks/README.md's peer table)
sets how much load one core drives. This splits it, in instructions (valgrind's callgrind, which load
does not move), into layers, each mode adding one to the one before it:

- ``http``: the HTTP stack the SDK sends through (``httpx2``, or ``httpx`` on openai < 3), each SSE
  ``data:`` line parsed with ``json.loads``: about what a lean load tool does per request;
- ``sdk``: the same requests through ``AsyncOpenAI`` (request building, its SSE decoder, a pydantic
  model per chunk);
- ``ours``: ``sdk`` with the instrumentation on (phases, metrics; spans to memory);
- ``bench-construct``: the ``openai-latency bench`` command with ``--sdk-parse construct`` (the SDK's
  default model construction, as in ``sdk``): its bookkeeping on top (the span tags, the content
  count, the lag sampler, the progress line, the statistics at the end);
- ``bench``: the command as it runs by default, each model validated by pydantic's core instead
  (``cli/bench/run/clients.py``).

Every mode makes ``-c`` requests in flight on one asyncio loop against the fake server (its own
process, outside valgrind) with ``--chunks``-token streams sent without pacing. Each mode runs twice,
``--small`` and ``--large`` requests; (Ir(large) - Ir(small)) / (large - small) is one request's cost,
start-up and imports cancelled out.

Two caveats. Under valgrind the client runs ~50x slower, so the server's chunks reach it in larger
reads than natively at the same load, and bench's timed work (a lag sample every 50 ms, a tick every
250 ms) runs 50x more often per request: the per-read share is a little low and bench's a little high.
And instructions are not time (cache misses are not counted); they tell which layer to cut.

    python benchmarks/bench_instructions.py [--modes http sdk ours bench] [-c 64] [--chunks 32]

Each run takes 1-3 min here. Not a test: it never fails on the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instructions import callgrind

MODES = ("http", "sdk", "ours", "bench-construct", "bench")
WHAT = {
    "http": "the HTTP stack + json.loads per SSE line",
    "sdk": "the openai SDK's own work on top",
    "ours": "the instrumentation on top",
    "bench-construct": "bench's bookkeeping on top (--sdk-parse construct: the SDK's models)",
    "bench": "bench as it runs (--sdk-parse validate: pydantic's validator builds the models)",
}
MESSAGES = [{"role": "user", "content": "hi"}]


# --- worker: runs under valgrind ---------------------------------------------------------------


async def _closed_loop(requests: int, concurrency: int, one: object) -> None:
    order = iter(range(requests))

    async def slot() -> None:
        for _ in order:  # one shared iterator, as bench's closed loop
            await one()  # type: ignore[operator]

    await asyncio.gather(*(slot() for _ in range(concurrency)))


def worker(mode: str, requests: int, base_url: str, concurrency: int, chunks: int) -> None:
    if mode == "http":
        asyncio.run(_http_worker(requests, base_url, concurrency, chunks))
    else:
        asyncio.run(_sdk_worker(mode, requests, base_url, concurrency, chunks))


async def _http_worker(requests: int, base_url: str, concurrency: int, chunks: int) -> None:
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef]
    body = {"model": "m", "messages": MESSAGES, "stream": True, "max_tokens": chunks}
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:

        async def one() -> None:
            async with client.stream("POST", "/chat/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        json.loads(line[6:])

        await _closed_loop(requests, concurrency, one)


async def _sdk_worker(mode: str, requests: int, base_url: str, concurrency: int, chunks: int) -> None:
    import openai

    if mode == "ours":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from openai_latency import OpenAILatencyInstrumentor

        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        OpenAILatencyInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)

    async def one() -> None:
        stream = await client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            max_tokens=chunks,  # type: ignore[arg-type]
        )
        async for _ in stream:
            pass

    await _closed_loop(requests, concurrency, one)


# --- driver -----------------------------------------------------------------------------------


def command(mode: str, requests: int, base_url: str, args: argparse.Namespace, out: Path) -> list[str]:
    if mode.startswith("bench"):
        cli = str(Path(sys.executable).parent / "openai-latency")
        parse = "construct" if mode == "bench-construct" else "validate"
        return [cli, "bench", "--target", f"fake={base_url}", "--model", "m", "-n", str(requests),
                "-c", str(args.concurrency), "--max-tokens", str(args.chunks), "--format", "json",
                "--out", str(out), "--sdk-parse", parse]  # fmt: skip
    worker_args = [mode, str(requests), base_url, str(args.concurrency), str(args.chunks)]
    return [sys.executable, str(Path(__file__).resolve()), "--worker", *worker_args]


def per_request(mode: str, base_url: str, args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        counts = [
            callgrind(command(mode, n, base_url, args, Path(scratch) / "out.json"), mode)
            for n in (args.small, args.large)
        ]
    return (counts[1] - counts[0]) / (args.large - args.small)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("-c", "--concurrency", type=int, default=64)
    parser.add_argument("--chunks", type=int, default=32, help="tokens per stream (default 32)")
    parser.add_argument("--small", type=int, default=64, help="requests in the first run (default 64)")
    parser.add_argument("--large", type=int, default=320, help="requests in the second run (default 320)")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        mode, requests, url, concurrency, chunks = args.worker
        worker(mode, int(requests), url, int(concurrency), int(chunks))
        return
    from openai_latency.fake_server import FakeServer

    results: dict[str, float] = {}
    with FakeServer.spawn({"chunks": args.chunks}) as server:
        for mode in args.modes:
            server.clear()
            results[mode] = per_request(mode, server.base_url, args)
            print(f"  {mode:<15} {results[mode]:>14,.0f} Ir per request", file=sys.stderr, flush=True)
    print(f"Instructions per streamed request ({args.chunks} tokens, c={args.concurrency})")
    print(f"  {'mode':<15} {'Ir':>12} {'added':>12}  what the step adds")
    previous = None
    for mode in args.modes:
        added = "" if previous is None else f"{results[mode] - results[previous]:>+12,.0f}"
        print(f"  {mode:<15} {results[mode]:>12,.0f} {added:>12}  {WHAT[mode]}")
        previous = mode


if __name__ == "__main__":
    main()

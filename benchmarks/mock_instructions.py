"""Instructions per call with no network: the real SDK over ``httpx2.MockTransport``, under callgrind.

instructions.py counts against the fake server, and its per-call figures move by ±30-50 K Ir from
run to run of the same code (each response's ids, timings and headers differ). This one is
deterministic to a few hundred instructions: the transport answers every request with the same
bytes, the handler fires the httpcore ``trace`` events a reused HTTP/1.1 connection fires (so our
callback runs as it does over a socket) and the hash seed is fixed. It is the tool for "did this
change pay", one change at a time; the fake-server counts and overhead.py stay the headline.

Modes: ``baseline`` (the SDK alone), ``phases``, ``off``, ``detailed``, ``official`` (the
opentelemetry-instrumentation-genai-openai package), ``replay`` (the SDK, then exactly the OTel SDK
calls ``phases`` made for that call: replay.py), and ``-noop`` variants of ours (no-op tracer and
meter providers: our code alone). ``phases - replay`` is our own code with the real SDK behind it.

    python benchmarks/mock_instructions.py [--modes baseline phases replay] [--workloads chat embeddings]
    python benchmarks/mock_instructions.py --cache --modes baseline official off replay phases
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MODES = ("baseline", "official", "replay", "off", "phases", "detailed", "off-noop", "phases-noop")
WORKLOADS = ("chat", "embeddings", "stream1", "stream64")
_COLLECTED = re.compile(rb"Collected : (\d+)")
# cachegrind's summary lines (--cache-sim=yes --branch-sim=yes): "==12== I   refs:  5,123,456",
# "==12== D1  misses:  12,345", "==12== Mispredicts:  6,789  (...)"
_CACHE_LINE = re.compile(
    rb"==\d+== (I +refs|I1 +misses|LLi +misses|D +refs|D1 +misses|LLd +misses|Branches|Mispredicts)"
    rb": +([\d,]+)"
)
CACHE_COUNTS = (
    "I refs",
    "D refs",
    "I1 misses",
    "D1 misses",
    "LLi misses",
    "LLd misses",
    "Branches",
    "Mispredicts",
)

_HEADERS = [
    ("content-type", "application/json"),
    ("x-request-id", "req_0123456789abcdef0123456789abcdef"),
    ("openai-processing-ms", "3"),
    ("openai-version", "2020-10-01"),
    ("x-ratelimit-limit-requests", "10000"),
    ("x-ratelimit-limit-tokens", "10000000"),
    ("x-ratelimit-remaining-requests", "9999"),
    ("x-ratelimit-remaining-tokens", "9999000"),
    ("x-ratelimit-reset-requests", "1s"),
    ("x-ratelimit-reset-tokens", "6m0s"),
]
_USAGE = {"prompt_tokens": 8, "completion_tokens": 4, "total_tokens": 12}
_CHAT = {
    "id": "chatcmpl-0123456789",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "gpt-4o-mini-2024-07-18",
    "system_fingerprint": "fp_0123456789",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hello there!"}, "finish_reason": "stop"}
    ],
    "usage": _USAGE,
}
_EMBEDDINGS = {
    "object": "list",
    "model": "text-embedding-3-small",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.001 * i for i in range(64)]}],
    "usage": {"prompt_tokens": 1, "total_tokens": 1},
}
# the events httpcore fires on a reused HTTP/1.1 connection; ours steps out after the headers
_EVENTS = (
    "http11.send_request_headers.started",
    "http11.send_request_headers.complete",
    "http11.send_request_body.started",
    "http11.send_request_body.complete",
    "http11.receive_response_headers.started",
    "http11.receive_response_headers.complete",
    "http11.receive_response_body.started",
    "http11.receive_response_body.complete",
    "http11.response_closed.started",
    "http11.response_closed.complete",
)


def _sse(chunks: int) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> str:
        body = {
            "id": "chatcmpl-0123456789",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else [],
            "usage": usage,
        }
        return f"data: {json.dumps(body)}\n\n"

    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": f"tok{i} "}) for i in range(chunks)]
    parts += [chunk({}, "stop"), chunk({}, usage=_USAGE), "data: [DONE]\n\n"]
    return "".join(parts).encode()


def _handler(stream_body: bytes) -> Callable[[Any], Any]:
    import httpx2

    chat, embeddings = json.dumps(_CHAT).encode(), json.dumps(_EMBEDDINGS).encode()
    sse_headers = [("content-type", "text/event-stream"), *_HEADERS[1:]]

    def handle(request: Any) -> Any:
        for event in _EVENTS:
            trace = request.extensions.get("trace")
            if trace is not None:
                trace(event, {"request": request})
        if request.url.path.endswith("/embeddings"):
            return httpx2.Response(200, headers=_HEADERS, content=embeddings)
        if b'"stream":true' in request.content or b'"stream": true' in request.content:
            return httpx2.Response(200, headers=sse_headers, content=stream_body)
        return httpx2.Response(200, headers=_HEADERS, content=chat)

    return handle


def worker(mode: str, workload: str, calls: int) -> None:
    import httpx2
    import openai
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    chunks = int(workload[len("stream") :]) if workload.startswith("stream") else 0
    transport = httpx2.MockTransport(_handler(_sse(chunks)))
    client = openai.OpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="sk-bench",
        max_retries=0,
        http_client=httpx2.Client(transport=transport),
    )
    messages: list[Any] = [{"role": "user", "content": "hi"}]

    def job() -> None:
        if workload == "embeddings":
            client.embeddings.create(model="text-embedding-3-small", input="hi")
        elif chunks:
            with client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, stream=True
            ) as stream:
                for _ in stream:
                    pass
        else:
            client.chat.completions.create(model="gpt-4o-mini", messages=messages)

    run = job
    if mode == "official":
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    elif mode == "replay":
        sys.path.insert(0, str(Path(__file__).parent))
        import replay

        replayer = replay.Replayer(replay.capture(job), tracer_provider, meter_provider)

        def run() -> None:
            job()
            replayer.replay()

    elif mode != "baseline":
        from opentelemetry.metrics import NoOpMeterProvider
        from opentelemetry.trace import NoOpTracerProvider

        from openai_latency import OpenAILatencyInstrumentor

        phase_spans, _, noop = mode.partition("-")
        OpenAILatencyInstrumentor().instrument(
            tracer_provider=NoOpTracerProvider() if noop else tracer_provider,
            meter_provider=NoOpMeterProvider() if noop else meter_provider,
            phase_spans=phase_spans,
        )
    for _ in range(3):  # warm: first-call caches (the client's attributes, pydantic's validators)
        run()
    exporter.clear()
    # as overhead.py does: what is alive now stays out of the collector's passes, so a pass that one
    # mode's allocations happen to trigger costs little (it moved the counts by several K per call)
    gc.collect()
    gc.freeze()
    for index in range(calls):
        run()
        if index % 20 == 0:
            exporter.clear()


def count(mode: str, workload: str, calls: int, out_file: str) -> int:
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", sys.executable]
    stderr = _valgrind(command, mode, workload, calls)
    found = _COLLECTED.search(stderr)
    if found is None:
        raise SystemExit(
            f"{mode} {workload}: no instruction count:\n{stderr.decode(errors='replace')[-2000:]}"
        )
    return int(found.group(1))


def cache_counts(mode: str, workload: str, calls: int) -> dict[str, int]:
    """cachegrind's simulated cache and branch predictor: references and misses (first level, last
    level), branches and mispredicted branches of a run."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=yes",
        "--branch-sim=yes",
        "--cachegrind-out-file=/dev/null",
    ]
    stderr = _valgrind([*command, sys.executable], mode, workload, calls)
    found = {
        " ".join(name.decode().split()): int(value.replace(b",", b""))
        for name, value in _CACHE_LINE.findall(stderr)
    }
    if set(found) != set(CACHE_COUNTS):
        raise SystemExit(f"{mode} {workload}: no cache summary:\n{stderr.decode(errors='replace')[-2000:]}")
    return found


def _valgrind(command: list[str], mode: str, workload: str, calls: int) -> bytes:
    command = [*command, str(Path(__file__).resolve()), "--worker", mode, workload, str(calls)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{mode} {workload}: worker failed:\n{done.stderr.decode(errors='replace')[-2000:]}")
    return done.stderr


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", nargs="+", default=["baseline", "replay", "phases", "off"], choices=MODES)
    parser.add_argument("--workloads", nargs="+", default=["chat", "embeddings"], choices=WORKLOADS)
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--large", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=2, help="valgrind runs at a time (default 2)")
    parser.add_argument("--keep", help="keep the callgrind files as KEEP.<mode>.<workload>[.small]")
    parser.add_argument(
        "--cache",
        action="store_true",
        help="cachegrind's simulated cache misses, mispredicted branches and a cycle estimate per call "
        "instead of callgrind's instruction count",
    )
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return
    modes = args.modes
    if args.cache:
        _print_cache(modes, args.workloads, args.small, args.large, args.jobs)
        return
    runs = {}
    with ThreadPoolExecutor(args.jobs) as pool:  # instruction counts do not depend on the load
        for workload in args.workloads:
            for mode in modes:
                keep = f"{args.keep}.{mode}.{workload}" if args.keep else "/dev/null"
                runs[workload, mode] = (
                    pool.submit(count, mode, workload, args.small, f"{keep}.small" if args.keep else keep),
                    pool.submit(count, mode, workload, args.large, keep),
                )
    results: dict[str, dict[str, float]] = {}
    for workload in args.workloads:
        for mode in modes:
            small, large = (future.result() for future in runs[workload, mode])
            value = results.setdefault(workload, {})[mode] = (large - small) / (args.large - args.small)
            added = value - results[workload].get("baseline", value)
            print(f"{workload:<11} {mode:<12} {value:>12,.0f} Ir/call  {added:>+11,.0f}", flush=True)
        if "phases" in modes and "replay" in modes:
            own = results[workload]["phases"] - results[workload]["replay"]
            print(f"{workload:<11} own = phases - replay: {own:+,.0f} Ir/call", flush=True)


MISPREDICT_CYCLES = 15
"""Cycles lost per mispredicted branch in the estimate: a typical penalty on current x86 cores (ours,
not valgrind's; its manual's estimate has no branch term)."""
_SHORT = {"I refs": "Ir", "D refs": "Dr", "I1 misses": "I1m", "D1 misses": "D1m", "LLi misses": "LLim"}
_SHORT |= {"LLd misses": "LLdm", "Branches": "Bc+i", "Mispredicts": "Bm"}


def _print_cache(modes: Sequence[str], workloads: Sequence[str], small: int, large: int, jobs: int) -> None:
    """Per call (large run minus small run), added over ``baseline``: references and misses,
    branches and mispredicts, and a cycle estimate that instructions alone cannot give: valgrind
    manual's Ir + 10 x first-level misses + 100 x last-level misses, plus :data:`MISPREDICT_CYCLES`
    per mispredicted branch."""
    with ThreadPoolExecutor(jobs) as pool:
        runs = {
            (workload, mode): (
                pool.submit(cache_counts, mode, workload, small),
                pool.submit(cache_counts, mode, workload, large),
            )
            for workload in workloads
            for mode in modes
        }
    for workload in workloads:
        rows: dict[str, dict[str, float]] = {}
        for mode in modes:
            low, high = (future.result() for future in runs[workload, mode])
            row = {name: (high[name] - low[name]) / (large - small) for name in CACHE_COUNTS}
            first = row["I1 misses"] + row["D1 misses"]
            last = row["LLi misses"] + row["LLd misses"]
            row["estimate"] = row["I refs"] + 10 * first + 100 * last + MISPREDICT_CYCLES * row["Mispredicts"]
            rows[mode] = row
            base = rows.get("baseline", {name: 0.0 for name in row})
            added = "  ".join(f"{_SHORT.get(name, name)} {row[name] - base[name]:+,.0f}" for name in row)
            print(f"{workload:<11} {mode:<12} added per call: {added}", flush=True)


if __name__ == "__main__":
    main()

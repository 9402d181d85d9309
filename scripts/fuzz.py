#!/usr/bin/env python3
"""The fuzz property of tests/core/test_fuzz.py with many more examples and a fresh seed each run.

    python scripts/fuzz.py [--examples 2000] [--seed N]

Random response and chunk shapes served by the in-process fake server; each call runs without and
with instrumentation: the caller's outcome must be the same and the operation span must end once
(exactly one operation span, and no "ended span" warning from the OTel SDK). Prints the seed, so a
failure can be replayed with --seed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, seed, settings
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.support import fuzz_cases

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.fake_server import FakeServer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=random.randrange(2**32))
    args = parser.parse_args()
    print(f"fuzz: {args.examples} examples, seed {args.seed}", flush=True)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAILatencyInstrumentor()

    def on() -> None:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        instrumentor.instrument(tracer_provider=provider, meter_provider=meter_provider)
        exporter.clear()

    def off() -> None:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()

    def operations() -> list[object]:
        return [s for s in exporter.get_finished_spans() if s.parent is None]

    count = 0
    with FakeServer() as server:

        @seed(args.seed)
        @settings(
            max_examples=args.examples,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(case=fuzz_cases.cases())
        def prop(case: fuzz_cases.Case) -> None:
            nonlocal count
            count += 1
            fuzz_cases.check(server, case, on, off, operations)

        start = time.perf_counter()
        try:
            prop()
        finally:
            off()
    print(f"fuzz: {count} calls checked in {time.perf_counter() - start:.1f} s: no difference", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

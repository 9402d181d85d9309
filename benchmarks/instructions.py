"""Instructions openai-latency adds per SDK call and per stream chunk, counted by valgrind.

Wall and CPU time move 2x within seconds on a shared 2-core machine (benchmarks/README.md);
instruction counts do not: ``valgrind --tool=callgrind`` gives the same total for the same
program and inputs, whatever else the machine is doing. Instructions are not microseconds
(cache misses and branch mispredictions are not counted), but at the same code size they compare
modes with each other, and with the official instrumentation, from one run.

Method: the fake server runs in this process's child, outside valgrind. For every mode a worker
(this file with ``--worker``) makes ``--small`` and then ``--large`` calls under callgrind, in two
separate runs; (Ir(large) - Ir(small)) / (large - small) is the cost of one call, start-up and
imports cancelled out. The worker wires the OTel SDK as overhead.py does: SimpleSpanProcessor
with an in-memory exporter, MeterProvider with an InMemoryMetricReader.

Streams (``--chunks N``): under valgrind the SDK's own parsing inside each ``next()`` takes more
than the 2 ms that tells a blocked ``next()`` from a buffered chunk (seen: 0 of 66 chunks buffered,
against 65 of 66 natively), so every gap is "observed" and each stream records its 8
``time_per_output_chunk`` points (~0.12 M Ir each), as a paced real stream does. The per-chunk
figure is that case: the loop plus those points spread over the chunks. benchmarks/chunk_loop.py
times the loop alone.

``--official-python PATH`` also counts ``official``: the interpreter of a separate virtual
environment with ``opentelemetry-instrumentation-genai-openai`` (its dependencies conflict with
ours). That environment's uninstrumented baseline is counted too, and its budget lines
use the official package's own figure instead of the reference in docs/ARCHITECTURE.md "Cost budget".

    python benchmarks/instructions.py [--modes baseline off phases detailed] [--chunks 64]

Each mode takes two callgrind runs of about 30-60 s each here. Not a test: it never fails on the numbers.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

BASELINE = "baseline"
OURS = ("off", "phases", "detailed")
#: ours with no-op tracer and meter providers: our own code alone (the OTel API's no-op calls are nearly free)
OWN = tuple(f"{mode}-noop" for mode in OURS)
OFFICIAL = "official"
#: The budgets (docs/ARCHITECTURE.md "Cost budget"), as a fraction of what the official package adds
#: per non-stream call.
BUDGET_FACTOR = {"off": 0.9, "phases": 1.2, "detailed": 1.8}
#: the workload key of an embeddings call (0: a non-stream chat call, N > 0: an N-chunk stream)
EMBEDDINGS = -1
#: Reference (idle machine, docs/ARCHITECTURE.md): the official package adds 423 µs to a 1,900 µs call.
REFERENCE_OFFICIAL_SHARE = 423.0 / 1900.0
#: Issue 12: at most 1.5 µs per chunk, against the same 1,900 µs call.
REFERENCE_CHUNK_SHARE = 1.5 / 1900.0
_COLLECTED = re.compile(rb"Collected : (\d+)")


# --- worker: runs under valgrind ---------------------------------------------------------------


def worker(mode: str, calls: int, base_url: str, chunks: int) -> None:
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
    if mode == OFFICIAL:
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    elif mode != BASELINE:
        from opentelemetry.metrics import NoOpMeterProvider
        from opentelemetry.trace import NoOpTracerProvider

        from openai_latency import OpenAILatencyInstrumentor

        phase_spans, _, noop = mode.partition("-")
        OpenAILatencyInstrumentor().instrument(
            tracer_provider=NoOpTracerProvider() if noop else tracer_provider,
            meter_provider=NoOpMeterProvider() if noop else meter_provider,
            phase_spans=phase_spans,
        )
    client = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    for index in range(calls):
        if chunks == EMBEDDINGS:
            client.embeddings.create(model="text-embedding-3-small", input="hi")
        elif chunks:
            headers = {"x-fake-chunks": str(chunks)}
            with client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, stream=True, extra_headers=headers
            ) as stream:
                for _ in stream:
                    pass
        else:
            client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        if index % 20 == 0:
            exporter.clear()


# --- driver -----------------------------------------------------------------------------------


def count(python: str, mode: str, calls: int, base_url: str, chunks: int) -> int:
    """Instructions of one worker run (start-up, imports and ``calls`` calls)."""
    worker_args = ["--worker", mode, str(calls), base_url, str(chunks)]
    return callgrind([python, str(Path(__file__).resolve()), *worker_args], mode)


def callgrind(command: Sequence[str], label: str) -> int:
    """The instructions ``command`` executes under ``valgrind --tool=callgrind`` (its children, such
    as a spawned server, run natively: valgrind does not trace children by default)."""
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
    done = subprocess.run(valgrind, capture_output=True, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        tail = done.stderr.decode(errors="replace")[-2000:]
        raise SystemExit(f"{label}: worker failed (exit {done.returncode}):\n{tail}")
    return int(found.group(1))


def per_call(python: str, mode: str, args: argparse.Namespace, base_url: str, chunks: int) -> float:
    small = count(python, mode, args.small, base_url, chunks)
    large = count(python, mode, args.large, base_url, chunks)
    return (large - small) / (args.large - args.small)


def measure(args: argparse.Namespace) -> dict[str, dict[int, float]]:
    """Ir per call, by mode and by chunk count (0 = non-stream call)."""
    from openai_latency.fake_server import FakeServer

    workloads = [0] + ([EMBEDDINGS] if args.embeddings else []) + ([1, args.chunks] if args.chunks else [])
    runs: list[tuple[str, str]] = [(mode, sys.executable) for mode in args.modes]
    if args.official_python:
        runs += [(f"{BASELINE}@official", args.official_python), (OFFICIAL, args.official_python)]
    results: dict[str, dict[int, float]] = {}
    with FakeServer.spawn() as server:
        for label, python in runs:
            mode = label.split("@", 1)[0]
            for chunks in workloads:
                server.clear()
                value = per_call(python, mode, args, server.base_url, chunks)
                results.setdefault(label, {})[chunks] = value
                what = (
                    "embeddings" if chunks == EMBEDDINGS else f"{chunks}-chunk stream" if chunks else "call"
                )
                print(f"  {label:<20} {what:<16} {value:>12,.0f} Ir", file=sys.stderr)
    return results


def report(results: dict[str, dict[int, float]], chunks: int) -> None:
    for workload, title in ((0, "Non-stream chat call"), (EMBEDDINGS, "Embeddings call")):
        if workload in results[BASELINE]:
            report_calls(results, workload, title)
    report_chunks(results, chunks)


def report_calls(results: dict[str, dict[int, float]], workload: int, title: str) -> None:
    base = results[BASELINE][workload]
    official_added = None
    if OFFICIAL in results:
        official_added = results[OFFICIAL][workload] - results[f"{BASELINE}@official"][workload]
    reference = "the official package here" if official_added else "the reference share"
    official_budget = official_added if official_added else REFERENCE_OFFICIAL_SHARE * base
    print(f"{title}, instructions (Ir) per call")
    print(f"  {'mode':<10} {'Ir':>12} {'added':>12} {'of baseline':>12} {'x official':>11} {'budget':>12}")
    print(f"  {BASELINE:<10} {base:>12,.0f}")
    for mode in (*OURS, *OWN, OFFICIAL):
        if mode not in results:
            continue
        own_base = results[f"{BASELINE}@official"][workload] if mode == OFFICIAL else base
        added = results[mode][workload] - own_base
        ratio = f"{added / official_added:.2f}" if official_added else "-"
        budget = BUDGET_FACTOR.get(mode)
        verdict = "-"
        if budget is not None:
            limit = budget * official_budget
            verdict = f"{limit:,.0f} {'ok' if added <= limit else 'OVER'}"
        share = added / own_base
        print(
            f"  {mode:<10} {results[mode][workload]:>12,.0f} {added:>+12,.0f}"
            f" {share:>11.1%} {ratio:>11} {verdict:>12}"
        )
    print(f"  (budget = issue 12's factor x what the official package adds, from {reference})")


def report_chunks(results: dict[str, dict[int, float]], chunks: int) -> None:
    if not chunks:
        return
    chunk_budget = REFERENCE_CHUNK_SHARE * results[BASELINE][0]
    print(f"Per chunk: (Ir of a {chunks}-chunk stream - Ir of a 1-chunk stream) / {chunks - 1}")

    def per_chunk(label: str) -> float:
        return (results[label][chunks] - results[label][1]) / (chunks - 1)

    base_chunk = per_chunk(BASELINE)
    print(f"  {BASELINE:<10} {base_chunk:>10,.0f} Ir per chunk")
    for mode in OURS:
        if mode in results:
            added = per_chunk(mode) - base_chunk
            verdict = "ok" if added <= chunk_budget else "OVER"
            print(f"  {mode:<10} {added:>+10,.0f} Ir per chunk  (budget ~{chunk_budget:,.0f}: {verdict})")
        if mode in results and 1 in results[mode]:
            added_stream = results[mode][1] - results[BASELINE][1]
            print(f"  {'':<10} {added_stream:>+10,.0f} Ir per 1-chunk stream")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", nargs="+", default=[BASELINE, *OURS], choices=[BASELINE, *OURS, *OWN])
    parser.add_argument("--small", type=int, default=20, help="calls in the first run (default 20)")
    parser.add_argument("--large", type=int, default=220, help="calls in the second run (default 220)")
    parser.add_argument("--chunks", type=int, default=0, help="also streams of 1 and N chunks (e.g. 64)")
    parser.add_argument("--embeddings", action="store_true", help="also an embeddings call")
    parser.add_argument(
        "--official-python", help="interpreter with opentelemetry-instrumentation-genai-openai"
    )
    parser.add_argument(
        "--worker", nargs=4, metavar=("MODE", "CALLS", "URL", "CHUNKS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if BASELINE not in args.modes:
        args.modes.insert(0, BASELINE)
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        mode, calls, url, chunks = args.worker
        worker(mode, int(calls), url, int(chunks))
        return
    report(measure(args), args.chunks)


if __name__ == "__main__":
    main()

"""Exporter outage (issue 11 item 8): the OTLP endpoint is down; do calls slow down or fail?

    python benchmarks/exporter_outage.py [--calls 3000] [--rounds 3] [--workloads json,stream]

Modes, each in its own worker process, against one fake server in its own process:

- ``baseline``: not instrumented;
- ``healthy``: instrumented, BatchSpanProcessor to an exporter that succeeds at once;
- ``closed-port``: BatchSpanProcessor and PeriodicExportingMetricReader to OTLP HTTP/protobuf on a port
  nobody listens on (connection refused: the exporter retries with backoff in its worker thread);
- ``blackhole``: the same to a server that accepts connections and never answers (every export
  waits for its timeout).

Each worker makes ``--calls`` chat calls of one workload in a row: ``json`` (non-stream) or ``stream``
(read to the end: the fake server's 5 content chunks, a role and a finish chunk). The
BatchSpanProcessor queue, 2048 spans by default, is full after a few hundred calls when nothing drains
it. A worker reports: errors raised into the caller, per-call latency p50 / p99 / mean, and the
process RSS before, halfway through and after the calls (the growth over the second half shows
whether memory stays bounded once the queue is full). Modes are interleaved over ``--rounds``
rounds in a shuffled order, for each workload. Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODES = ("baseline", "healthy", "closed-port", "blackhole")
WORKLOADS = ("json", "stream")
MESSAGES = [{"role": "user", "content": "hi"}]


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _blackhole() -> int:
    """A port that accepts connections and never reads or answers (a thread keeps them open)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return int(listener.getsockname()[1])


def _dropping_exporter() -> type:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Dropping(SpanExporter):
        """A healthy endpoint: every export succeeds at once (and keeps nothing)."""

        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    return Dropping


def worker(mode: str, workload: str, base_url: str, calls: int) -> dict[str, object]:
    import openai
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from openai_latency import OpenAILatencyInstrumentor

    if mode != "baseline":
        tracer_provider = TracerProvider(shutdown_on_exit=False)
        meter_provider = None
        if mode == "healthy":
            tracer_provider.add_span_processor(BatchSpanProcessor(_dropping_exporter()()))
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            port = _closed_port() if mode == "closed-port" else _blackhole()
            endpoint = f"http://127.0.0.1:{port}"
            tracer_provider.add_span_processor(
                BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
            )
            reader = PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"), export_interval_millis=1000
            )
            meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        OpenAILatencyInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    client = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    messages: Any = MESSAGES

    def call() -> None:
        if workload == "stream":
            for _ in client.chat.completions.create(model="m", messages=messages, stream=True):
                pass
        else:
            client.chat.completions.create(model="m", messages=messages)

    for _ in range(50):  # warm-up
        call()
    rss_before = _rss_mb()
    rss_half = rss_before
    durations: list[float] = []
    errors = 0
    for i in range(calls):
        if i == calls // 2:
            rss_half = _rss_mb()
        start = time.perf_counter()
        try:
            call()
        except Exception:
            errors += 1
        durations.append(time.perf_counter() - start)
    durations.sort()
    return {
        "mode": mode,
        "workload": workload,
        "errors": errors,
        "p50_ms": durations[len(durations) // 2] * 1e3,
        "p99_ms": durations[int(len(durations) * 0.99)] * 1e3,
        "mean_ms": statistics.fmean(durations) * 1e3,
        "rss_before_mb": rss_before,
        "rss_half_mb": rss_half,
        "rss_after_mb": _rss_mb(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated: json, stream")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--workload", choices=WORKLOADS, default="json", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.workload, args.base_url, args.calls)))
        os._exit(0)  # the dead endpoint's exporter threads may still be waiting: do not join them
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown or not workloads:
        parser.error(f"--workloads: unknown {sorted(unknown)} (known: {', '.join(WORKLOADS)})")

    from openai_latency.fake_server import FakeServer

    results: dict[tuple[str, str], list[dict[str, float]]] = {
        (workload, mode): [] for workload in workloads for mode in MODES
    }
    with FakeServer.spawn() as server:
        for round_index in range(args.rounds):
            for workload in workloads:
                order = list(MODES)
                random.shuffle(order)
                for mode in order:
                    out = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--worker",
                            mode,
                            "--workload",
                            workload,
                            "--base-url",
                            server.base_url,
                            "--calls",
                            str(args.calls),
                        ],
                        capture_output=True,
                        text=True,
                        timeout=600,
                    )
                    if out.returncode != 0:
                        print(out.stderr, file=sys.stderr)
                        return 1
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                    results[(workload, mode)].append(row)
                    print(f"round {round_index + 1} {workload:>6} {mode:>12}: {row}", flush=True)
    print(
        f"\n{'workload':>8} {'mode':>12} {'errors':>6} {'p50 ms':>7} {'p99 ms':>7} {'mean ms':>8}"
        f" {'RSS growth MB':>13} {'2nd half MB':>11} (medians over rounds; errors summed)"
    )
    for (workload, mode), rows in results.items():

        def med(key: str, rows: list[dict[str, float]] = rows) -> float:
            return statistics.median(row[key] for row in rows)

        growth = statistics.median(row["rss_after_mb"] - row["rss_before_mb"] for row in rows)
        # bounded: a full queue stops the growth, so the second half of the calls adds ~nothing
        second_half = statistics.median(row["rss_after_mb"] - row["rss_half_mb"] for row in rows)
        errors = sum(int(row["errors"]) for row in rows)
        print(
            f"{workload:>8} {mode:>12} {errors:>6} {med('p50_ms'):>7.3f} {med('p99_ms'):>7.3f}"
            f" {med('mean_ms'):>8.3f} {growth:>13.1f} {second_half:>11.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

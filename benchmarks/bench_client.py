"""How much load can ``openai-latency bench`` drive from one core, and how much does it add to TTFT?

1. ``-n 1000`` closed loops against the fake server (its own process): an LLM-like pace (first
   token after 300 ms, 32 chunks 20 ms apart: ~1 s per request, so 64 in flight need ~60
   requests/s) at ``-c 16`` and ``-c 64``, the latter also with ``--ramp-up 0`` (all 64 workers
   started at one instant, as before the ramp existed); and a pace no LLM has (50 ms, 8 chunks 5 ms
   apart: 64 in flight would need ~700/s, more than one core of Python sends). Each: requests/s,
   the bench process's CPU time per request (during the run, and with the process start), its
   event-loop lag, and the client's share of TTFT per request: bench's TTFT of the call minus the
   server's own for it (first content chunk written - request received, from the server's log,
   matched by request id through the ``--out`` file). The ``-c 64`` runs again with ``--workers 2``
   (two client processes).
2. Open-loop rates in steps: the highest rate at which arrivals still reach the server on time
   (achieved rate within 5 % of the target and no arrival late for a free slot) from one process;
   the rates it missed, again with ``--workers 2``.

The load average of the machine is printed with each result: on a shared machine the lag and the
client's share of TTFT move with it (the CPU time per request much less).

Usage: python benchmarks/bench_client.py [--requests 1000] [--concurrency 64] [--rates 50,100,200,400]
       [--only closed|open]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from openai_latency.cli.spans.collect import collect_calls
from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats
from openai_latency.fake_server import FakeServer, SpawnedServer

COMMAND = str(Path(sys.executable).with_name("openai-latency"))
LLM_PACE = {"ttft-ms": 300, "chunks": 32, "chunk-delay-ms": 20}
SATURATING = {"ttft-ms": 50, "chunks": 8, "chunk-delay-ms": 5}
SCRIPT = SATURATING  # the open-loop steps: the server answers fast, so the client is what is measured


def _bench(url: str, *extra: str) -> tuple[dict[str, Any], float, float]:
    """Run the bench command; (its JSON, wall seconds, CPU seconds of the bench process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    command = [COMMAND, "bench", "--target", f"fake={url}", "--model", "m", "--format", "json"]
    done = subprocess.run(
        [*command, "--no-progress", *extra],
        capture_output=True,
        text=True,
        check=True,
        env={"OPENAI_API_KEY": "sk-bench", "PATH": "/usr/bin:/bin"},
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report: dict[str, Any] = json.loads(done.stdout)
    return report, wall, cpu


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _added_ttft(server: SpawnedServer, spans: str) -> list[float]:
    """Per call: bench's TTFT minus the server's (its first content chunk written - request received)."""
    records = {r.request_id: r for r in server.records(wait=5) if r.path.endswith("/chat/completions")}
    added = []
    for call in collect_calls(read_spans([spans], ReadStats())).calls:
        record = records.get(call.request_id or "")
        if call.ttft is not None and record is not None and record.first_content_ns:
            added.append(call.ttft - (record.first_content_ns - record.received_ns) / 1e9)
    return added


def closed_loop(requests: int, concurrency: int, script: dict[str, int], name: str, *extra: str) -> None:
    with FakeServer.spawn(script) as server, tempfile.TemporaryDirectory() as folder:
        _bench(server.base_url, "-n", "20")  # warm the server
        server.clear()
        spans = os.path.join(folder, "spans.jsonl")
        load = os.getloadavg()[0]
        report, wall, cpu = _bench(
            server.base_url, "-n", str(requests), "-c", str(concurrency), "--out", spans, *extra
        )
        added = _added_ttft(server, spans)
    (entry,) = report["results"]
    client = report["client"]
    ttft = entry["ttft"]
    options = " ".join(("-c", str(concurrency), *extra))
    print(f"closed loop, {name}: {requests} requests at {options}", end=": ")
    print(f"{entry['requests']} done, {entry['errors']} errors; load average {load:.1f}")
    print(f"  wall {wall:.1f} s (process start included), {entry['requests_per_s']:.0f} requests/s running")
    print(
        f"  bench CPU per request: {client['cpu_per_request_s'] * 1000:.2f} ms during the run,"
        f" {cpu / requests * 1000:.2f} ms with the process start"
    )
    p50, p95 = _quantile(added, 0.50), _quantile(added, 0.95)
    print(
        f"  ttft p50 {ttft['p50'] * 1000:.1f} ms, p95 {ttft['p95'] * 1000:.1f} ms; the client's own share per"
        f" request: p50 {p50 * 1000:.1f} ms ({p50 / ttft['p50'] * 100:.1f}% of TTFT), p95 {p95 * 1000:.1f} ms"
    )
    lag = client["loop_lag"]
    print(
        f"  event-loop lag p50 {lag['p50'] * 1000:.1f} ms, p95 {lag['p95'] * 1000:.1f} ms;"
        f" bench flags the client as a bottleneck: {client['bottleneck']}"
    )


def open_loop(rates: list[float], seconds: float, *extra: str) -> list[float]:
    """Each rate in turn; the rates that were not sustained."""
    missed = []
    with FakeServer.spawn(SCRIPT) as server:
        for rate in rates:
            server.clear()
            requests = int(rate * seconds)
            load = os.getloadavg()[0]
            report, _, _ = _bench(
                server.base_url, "--rate", f"{rate:g}", "-n", str(requests), "-c", "256", *extra
            )
            records = server.records(wait=5)
            arrivals = sorted(r.received_ns for r in records if r.path.endswith("/chat/completions"))
            achieved = (len(arrivals) - 1) / ((arrivals[-1] - arrivals[0]) / 1e9)
            late = report["late_arrivals"]
            sustained = abs(achieved - rate) <= 0.05 * rate and late == 0
            per_request = report["client"]["cpu_per_request_s"] * 1000
            print(
                f"open loop {rate:g}/s {' '.join(extra)}: achieved {achieved:.1f}/s at the server, late"
                f" {late}, CPU {per_request:.2f} ms per request during the run; load average {load:.1f}"
                f" -> {'sustained' if sustained else 'NOT sustained'}"
            )
            if not sustained:
                missed.append(rate)
    return missed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rates", default="50,100,200,400")
    parser.add_argument("--seconds", type=float, default=5.0, help="per open-loop rate")
    parser.add_argument("--only", choices=("closed", "open"))
    args = parser.parse_args()
    if args.only != "open":
        for concurrency in sorted({16, args.concurrency}):
            closed_loop(args.requests, concurrency, LLM_PACE, "LLM-like pace")
        closed_loop(args.requests, args.concurrency, LLM_PACE, "LLM-like pace", "--ramp-up", "0")
        closed_loop(args.requests, args.concurrency, LLM_PACE, "LLM-like pace", "--workers", "2")
        closed_loop(args.requests, args.concurrency, SATURATING, "saturating pace")
        closed_loop(args.requests, args.concurrency, SATURATING, "saturating pace", "--workers", "2")
    if args.only != "closed":
        missed = open_loop([float(r) for r in args.rates.split(",")], args.seconds)
        if missed:  # what two client processes make of the rates one could not
            open_loop(missed, args.seconds, "--workers", "2")


if __name__ == "__main__":
    main()

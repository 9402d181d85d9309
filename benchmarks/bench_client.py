"""How much load can ``openai-latency bench`` drive from one core, and how much does it add to TTFT?

1. ``-n 1000 -c 64`` against the fake server (its own process), twice: with an LLM-like pace (first
   token after 300 ms, 32 chunks 20 ms apart: ~1 s per request, so 64 in flight need ~60 requests/s)
   and with a pace no LLM has (50 ms, 8 chunks 5 ms apart: 64 in flight would need ~700/s, more than
   one core of Python sends). Each: wall time, requests/s, the bench process's CPU time per request,
   and the client's share of TTFT: bench's TTFT minus the server's own (first content chunk written -
   request received, from the server's log).
2. Open-loop rates in steps: the highest rate at which arrivals still reach the server on time
   (achieved rate within 5 % of the target and no arrival late for a free slot).

Usage: python benchmarks/bench_client.py [--requests 1000] [--concurrency 64] [--rates 50,100,200,400]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from openai_latency.fake_server import FakeServer

COMMAND = str(Path(sys.executable).with_name("openai-latency"))
LLM_PACE = {"ttft-ms": 300, "chunks": 32, "chunk-delay-ms": 20}
SATURATING = {"ttft-ms": 50, "chunks": 8, "chunk-delay-ms": 5}
SCRIPT = SATURATING  # the open-loop steps: the server answers fast, so the client is what is measured


def _bench(url: str, *extra: str) -> tuple[dict, float, float]:
    """Run the bench command; (its JSON, wall seconds, CPU seconds of the bench process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        [
            COMMAND,
            "bench",
            "--target",
            f"fake={url}",
            "--model",
            "m",
            "--format",
            "json",
            "--no-progress",
            *list(extra),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"OPENAI_API_KEY": "sk-bench", "PATH": "/usr/bin:/bin"},
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), wall, cpu


def closed_loop(requests: int, concurrency: int, script: dict[str, int], name: str) -> None:
    with FakeServer.spawn(script) as server:
        _bench(server.base_url, "-n", "20")  # warm the server
        server.clear()
        report, wall, cpu = _bench(server.base_url, "-n", str(requests), "-c", str(concurrency))
        records = [r for r in server.records(wait=5) if r.path.endswith("/chat/completions")]
    (entry,) = report["results"]
    server_ttft = sorted((r.first_content_ns - r.received_ns) / 1e9 for r in records if r.first_content_ns)
    client_ttft = entry["ttft"]
    server_p50 = statistics.median(server_ttft)
    print(f"closed loop, {name}: {requests} requests at -c {concurrency}:", end=" ")
    print(f"{entry['requests']} done, {entry['errors']} errors")
    print(f"  wall {wall:.1f} s (process start included), {entry['requests_per_s']:.0f} requests/s running")
    print(f"  bench process CPU {cpu:.1f} s = {cpu / requests * 1000:.2f} ms per request")
    print(
        f"  ttft p50: bench {client_ttft['p50'] * 1000:.1f} ms, server {server_p50 * 1000:.1f} ms"
        f" -> the client adds {(client_ttft['p50'] - server_p50) * 1000:.1f} ms at p50;"
        f" p95 bench {client_ttft['p95'] * 1000:.1f} ms"
    )
    lag = report["client"]["loop_lag"]
    print(
        f"  event-loop lag p50 {lag['p50'] * 1000:.1f} ms, p95 {lag['p95'] * 1000:.1f} ms;"
        f" bench flags the client as a bottleneck: {report['client']['bottleneck']}"
    )


def open_loop(rates: list[float], seconds: float) -> None:
    with FakeServer.spawn(SCRIPT) as server:
        for rate in rates:
            server.clear()
            requests = int(rate * seconds)
            report, _, cpu = _bench(server.base_url, "--rate", f"{rate:g}", "-n", str(requests), "-c", "256")
            records = server.records(wait=5)
            arrivals = sorted(r.received_ns for r in records if r.path.endswith("/chat/completions"))
            achieved = (len(arrivals) - 1) / ((arrivals[-1] - arrivals[0]) / 1e9)
            late = report["late_arrivals"]
            verdict = "sustained" if abs(achieved - rate) <= 0.05 * rate and late == 0 else "NOT sustained"
            print(
                f"open loop {rate:g}/s: achieved {achieved:.1f}/s at the server, late {late},"
                f" CPU {cpu / requests * 1000:.2f} ms per request -> {verdict}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rates", default="50,100,200,400")
    parser.add_argument("--seconds", type=float, default=5.0, help="per open-loop rate")
    args = parser.parse_args()
    for concurrency in sorted({16, args.concurrency}):
        closed_loop(args.requests, concurrency, LLM_PACE, "LLM-like pace")
    closed_loop(args.requests, args.concurrency, SATURATING, "saturating pace")
    open_loop([float(r) for r in args.rates.split(",")], args.seconds)


if __name__ == "__main__":
    main()

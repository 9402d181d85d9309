"""Does bench say so whenever its TPOT is off? bench at c=64 with CPU burners beside it on its core.

The truth server of ``peer_bench.py`` (32 chunks 10 ms apart) runs on CPU 0; ``openai-latency bench``
runs on CPU 1 next to busy-looping processes that take a share of that core: none, one at nice 19,
10, 5 or 0 (bench keeps ~98 %, ~90 %, ~75 %, ~50 % of the core), or 2, 3, 5 at nice 0 (~33 % down to
~17 %). For each run: bench's TPOT error against the server's log (p50 / p95), the requests without
a TPOT, and whether bench's JSON set ``client.bottleneck`` (its warning).

    python benchmarks/starved_bench.py [--rounds 2] [--shares none,19,10,5,0,x2,x3,x5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import peer_bench

from openai_latency.fake_server import FakeServer
from openai_latency.fake_server.server import SpawnedServer

BURN = "while True: pass"


def burners(share: str) -> list[subprocess.Popen[bytes]]:
    """``none``; a nice level (one burner at that level); ``xN`` (N burners at nice 0)."""
    if share == "none":
        return []
    count, nice = (int(share[1:]), 0) if share.startswith("x") else (1, int(share))

    def pin_and_nice() -> None:
        os.sched_setaffinity(0, {1})
        os.nice(nice)

    return [subprocess.Popen([sys.executable, "-c", BURN], preexec_fn=pin_and_nice) for _ in range(count)]


def run(server: SpawnedServer) -> tuple[float, float, int, bool]:
    """TPOT error p50 and p95 (ratio - 1), requests without a TPOT, bench's bottleneck flag."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "spans.jsonl"
        cmd = [*peer_bench.OPENAI_LATENCY, "bench", "--target", f"truth={server.base_url}",
               "--model", "m", "-n", "400", "--max-tokens", "32", "-c", "64", "--out", str(out),
               "--format", "json"]  # fmt: skip
        server.clear()
        _, output = peer_bench._child(cmd, pin=True)
        calls = peer_bench.collect_calls(peer_bench.read_spans([str(out)], peer_bench.ReadStats())).calls
    errors = []
    for call in calls:
        record = server.record(call.request_id) if call.request_id else None
        if record is not None and call.tpot:
            errors.append(call.tpot / peer_bench._pace(record) - 1)
    errors.sort()
    p95 = errors[max(int(0.95 * len(errors)) - 1, 0)] if errors else float("nan")
    p50 = statistics.median(errors) if errors else float("nan")
    return p50, p95, len(calls) - len(errors), bool(json.loads(output)["client"]["bottleneck"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shares", default="none,19,10,5,0,x2,x3,x5")
    args = parser.parse_args()
    print("| burners on bench's core | TPOT error p50 / p95 (%) | no TPOT | bench warned |")
    print("|---|---|---|---|")
    with FakeServer.spawn(peer_bench.TRUTH) as server:
        os.sched_setaffinity(server.process.pid, {0})
        for _ in range(args.rounds):
            for share in args.shares.split(","):
                running = burners(share)
                time.sleep(0.3)
                try:
                    p50, p95, missing, warned = run(server)
                finally:
                    for process in running:
                        process.kill()
                        process.wait()
                label = {"none": "none"}.get(share) or (
                    f"{share[1:]} at nice 0" if share.startswith("x") else f"1 at nice {share}"
                )
                warning = "yes" if warned else "no"
                print(f"| {label} | {p50:+.2%} / {p95:+.2%} | {missing} | {warning} |", flush=True)


if __name__ == "__main__":
    main()

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
import os
import statistics
import subprocess
import sys
import time

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
    server.clear()
    offset_ns = time.time_ns() - time.monotonic_ns()
    result = peer_bench.run_ours(server, "c=64", 400, True, offset_ns, [])
    errors = [s.tpot_error for s in result.samples if s.tpot_error is not None]
    missing = len(result.samples) - len(errors) + result.unmatched
    if not errors:
        return float("nan"), float("nan"), missing, result.bottleneck
    return statistics.median(errors), peer_bench._q(errors, 0.95), missing, result.bottleneck


def _label(share: str) -> str:
    if share == "none":
        return "none"
    return f"{share[1:]} at nice 0" if share.startswith("x") else f"1 at nice {share}"


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
                label = _label(share)
                warning = "yes" if warned else "no"
                print(f"| {label} | {p50:+.2%} / {p95:+.2%} | {missing} | {warning} |", flush=True)


if __name__ == "__main__":
    main()

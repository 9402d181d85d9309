"""Long runs and memory (issue 11 item 7): does what openai-latency keeps alive grow with use?

    python benchmarks/long_run.py [--calls 100000] [--abandoned 10000] [--held 1000] [--samples 10]

Runs ``--calls`` calls and ``--abandoned`` streams dropped after one chunk, against the in-process
fake server, instrumented (spans to an exporter that drops them, metrics to an in-memory reader), with
``tracemalloc`` on. The calls take turns over nine kinds: chat, chat stream read to the end and
embeddings on ``OpenAI``; chat and chat stream on ``AsyncOpenAI``; a chat call and an async stream
each retried after a 429; a call that raises ``InternalServerError``; an async stream that raises
``APIError`` mid-way. Abandoned streams alternate between ``OpenAI`` and ``AsyncOpenAI``. After a warm-up
of 5 % it samples, ``--samples`` times: the bytes our package's code still holds (tracemalloc,
fake server excluded), live ``Operation`` objects, entries of our module-level maps, and the
process RSS. Then it opens ``--held`` streams at once (first chunk read) and reports the bytes per
open stream, ours and in total. Not a test: it prints numbers; tests/core/test_long_run.py is the short,
asserting version. The harness is tests/memory_harness.py.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import memory_harness


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--abandoned", type=int, default=10_000)
    parser.add_argument("--held", type=int, default=1_000)
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args()
    tracemalloc.start()
    start = time.perf_counter()
    with memory_harness.harness(max_connections=max(100, args.held + 10)) as h:
        memory_harness.calls(h, args.calls // 20)
        memory_harness.abandoned(h, args.abandoned // 20)
        print(f"warm-up done after {time.perf_counter() - start:.0f} s", flush=True)
        print(
            f"{'calls':>8} {'abandoned':>9} {'our bytes':>10} {'max RSS MB':>10}  tracked state", flush=True
        )
        rows = []
        step_calls = (args.calls - args.calls // 20) // args.samples
        step_abandoned = (args.abandoned - args.abandoned // 20) // args.samples
        done_calls, done_abandoned = args.calls // 20, args.abandoned // 20
        for sample in range(args.samples + 1):
            state, ours = memory_harness.tracked_state(), memory_harness.our_bytes()
            rows.append(ours)
            print(f"{done_calls:>8} {done_abandoned:>9} {ours:>10} {_rss_mb():>10.1f}  {state}", flush=True)
            if sample == args.samples:
                break
            memory_harness.calls(h, step_calls)
            memory_harness.abandoned(h, step_abandoned)
            done_calls += step_calls
            done_abandoned += step_abandoned
        growth = rows[-1] - rows[0]
        print(f"our bytes after warm-up -> end: {rows[0]} -> {rows[-1]} ({growth:+d} B)", flush=True)
        if args.held:
            ours_per_stream, total = memory_harness.bytes_per_open_stream(h, args.held)
            print(
                f"{args.held} streams open at once: {ours_per_stream:.0f} B of ours per stream,"
                f" {total:.0f} B in total"
            )
        print(f"spans exported: {h.exporter.count}; wall time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

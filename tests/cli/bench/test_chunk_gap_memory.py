"""bench's chunk gaps in bounded memory (:mod:`openai_latency.cli.stats.sketch`): millions of gaps
held in a fixed size, the figures within the stated bound of the exact ones (n, min, max exact; the
mean to rounding; p50, p95, p99 within ALPHA, relative); and a real multi-level bench run (the bound
lowered so that it folds) whose reported gaps match the exact ones that the client measured."""

from __future__ import annotations

import json
import math
import os
import pickle
import random
import subprocess
import sys
import tracemalloc
from array import array
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

import openai_latency.cli.stats.sketch as sketch_module
from openai_latency.cli.stats.percentiles import Dist
from openai_latency.cli.stats.sketch import ALPHA, EXACT, GAMMA, Sketch
from tests.support.cli_runs import servers

pytestmark = pytest.mark.slow  # millions of gaps, memory measured: long by design

#: A bound a little over ALPHA: float rounding at a bucket's edge (a few ulps).
BOUND = ALPHA * (1 + 1e-9)


def _gaps(count: int, seed: int) -> Iterator[float]:
    """Gaps as a loaded client sees them: mostly a decode pace (lognormal around 20 ms), some chunks
    read together (0), a stalled tail (0.5-3 s), microsecond reads of coalesced chunks."""
    rng = random.Random(seed)
    for _ in range(count):
        kind = rng.random()
        if kind < 0.02:
            yield 0.0
        elif kind < 0.04:
            yield rng.uniform(1e-6, 5e-5)
        elif kind < 0.05:
            yield rng.uniform(0.5, 3.0)
        else:
            yield rng.lognormvariate(math.log(0.02), 0.6)


def _within(found: Dist, exact: Dist) -> None:
    assert (found.n, found.min, found.max) == (exact.n, exact.min, exact.max)
    assert math.isclose(found.mean, exact.mean, rel_tol=1e-12)
    for name in ("p50", "p95", "p99"):
        value, truth = getattr(found, name), getattr(exact, name)
        assert abs(value - truth) <= BOUND * truth, (name, value, truth)


def _buckets_bound(low: float, high: float) -> int:
    """Counters a sketch may hold for values in [low, high] (zero apart): one per bucket in between."""
    return math.ceil(math.log(high / low) / math.log(GAMMA)) + 2


def test_two_million_gaps_in_fixed_memory_within_the_bound() -> None:
    values = array("d", _gaps(2_000_000, seed=3))
    gaps = Sketch()
    held = []
    for start in range(0, len(values), 100_000):
        for value in values[start : start + 100_000]:
            gaps.add(value)
        held.append(gaps.held)
    positive = [v for v in values if v > 0]
    limit = EXACT + _buckets_bound(min(positive), max(positive)) + 1
    assert max(held) <= limit < 7_000, (max(held), limit)  # counters, not values: 2 million went in
    assert not gaps.exact and len(gaps) == len(values)
    _within(gaps.dist(), Dist.of(values))  # type: ignore[arg-type]


def test_the_memory_held_does_not_grow_with_the_values() -> None:
    """What the sketch's own code keeps allocated (tracemalloc, allocations made in sketch.py), after
    100,000 gaps and after 700,000: bounded by the buffer and the counters, not by the count."""
    gaps = Sketch()
    source = _gaps(700_000, seed=5)
    tracemalloc.start()
    try:
        sizes = []
        for count in (100_000, 600_000):
            for _ in range(count):
                gaps.add(next(source))
            snapshot = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(True, sketch_module.__file__)]
            )
            sizes.append(sum(stat.size for stat in snapshot.statistics("filename")))
    finally:
        tracemalloc.stop()
    # 4,096 floats (32 KB) and at most a few thousand counters; 700,000 floats would be 5.6 MB
    assert all(size < 400_000 for size in sizes), sizes
    assert sizes[1] < sizes[0] * 1.5, sizes


def test_small_runs_stay_exact_and_sketches_merge_within_the_bound() -> None:
    few = list(_gaps(EXACT - 1, seed=7))
    small = Sketch(few)
    assert small.exact and small.dist() == Dist.of(few)
    # --workers: each process's sketch, pickled to the parent and merged
    parts = [list(_gaps(30_000, seed=s)) for s in (11, 12)] + [few]
    merged = Sketch()
    for part in parts:
        merged.merge(pickle.loads(pickle.dumps(Sketch(part))))
    everything = [v for part in parts for v in part]
    _within(merged.dist(), Dist.of(everything))  # type: ignore[arg-type]
    exact_merge = Sketch(few[:10])
    exact_merge.merge(Sketch(few[10:20]))
    assert exact_merge.exact and exact_merge.dist() == Dist.of(few[:20])


RECORDING = """
import json, sys
from openai_latency.cli.stats import sketch
from openai_latency.cli.stats.percentiles import Dist
from openai_latency.cli.bench.run import runner as run
from openai_latency.cli import main
sketch.EXACT = 32
exact, held = {}, [0]
add = sketch.Sketch.add
def recording(self, value):
    exact.setdefault(id(self), []).append(value)
    add(self, value)
    held[0] = max(held[0], self.held)
sketch.Sketch.add = recording
state_init = run.RunState.__init__
states = []
def keep(self, *args, **kwargs):
    state_init(self, *args, **kwargs)
    states.append(self)
run.RunState.__init__ = keep
code = main(sys.argv[1:])
found = {f"{t} {k.label}": Dist.of(exact[id(s)]).as_dict() for (t, k), s in states[0].chunk_gaps.items()}
print("exact:", json.dumps({"levels": found, "held": held[0]}), file=sys.stderr)
sys.exit(code)
"""


def test_a_multi_level_run_reports_its_gaps_within_the_bound() -> None:
    """Three levels, 16 gaps a request: each level's gaps fold (the exact part lowered to 32), and the
    JSON's chunk_gaps match the gaps the client measured, within the bound."""
    with ExitStack() as stack:
        (server,) = servers(
            stack, {"ttft-ms": 2, "chunks": 17, "chunk-delay-ms": 1, "jitter-ms": 1, "seed": 4}
        )
        done = subprocess.run(
            [sys.executable, "-c", RECORDING, "bench", "--target", f"a={server.base_url}", "--model", "m",
             "-n", "12", "-c", "1,2,4", "--format", "json"],
            capture_output=True, text=True, timeout=120, env={**os.environ, "OPENAI_API_KEY": "sk-x"},
            check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    exact = json.loads(done.stderr.rsplit("exact: ", 1)[1])
    results = {f"a {r['key']['load']}": r["chunk_gaps"] for r in json.loads(done.stdout)["results"]}
    assert set(results) == set(exact["levels"]) == {"a c=1", "a c=2", "a c=4"}
    for level, reported in results.items():
        truth = Dist(**exact["levels"][level])
        assert truth.n == 12 * 16 > 32  # folded
        _within(Dist(**reported), truth)
    assert exact["held"] <= 32 + _buckets_bound(1e-6, 1.0)

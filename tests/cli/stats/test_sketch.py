"""cli/stats/sketch.py: exact up to EXACT values; past it, n, min, max and mean exact and every
percentile within ALPHA (relative) of the exact one; bounded memory; merges."""

from __future__ import annotations

import math
import random

from openai_latency.cli.stats.percentiles import Dist
from openai_latency.cli.stats.sketch import ALPHA, EXACT, GAMMA, Sketch, sketch_dist


def test_up_to_exact_values_the_sketch_is_the_list() -> None:
    values = [0.003, 0.001, 0.002, 0.0, 0.004]
    sketch = Sketch(values)
    assert sketch.exact and len(sketch) == 5
    assert sketch.dist() == Dist.of(values)
    assert Sketch().dist() is None and sketch_dist(None) is None
    full = Sketch(float(v) for v in range(EXACT - 1))
    assert full.exact and full.dist() == Dist.of(float(v) for v in range(EXACT - 1))


def test_past_it_counts_extremes_and_mean_are_exact_and_percentiles_within_alpha() -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(-4, 1) for _ in range(3 * EXACT + 11)]
    sketch = Sketch(values)
    assert not sketch.exact and len(sketch) == len(values)
    exact, folded = Dist.of(values), sketch.dist()
    assert exact is not None and folded is not None
    assert (folded.n, folded.min, folded.max) == (exact.n, exact.min, exact.max)
    assert math.isclose(folded.mean, exact.mean, rel_tol=1e-12)
    for name in ("p50", "p95", "p99"):
        assert abs(getattr(folded, name) - getattr(exact, name)) <= ALPHA * getattr(exact, name), name


def test_a_bucket_stands_for_its_values_within_alpha_and_inside_min_and_max() -> None:
    same = Sketch([1.0] * (EXACT + 1))  # folded: 1.0's bucket value is 2 / (GAMMA + 1), clamped to 1
    assert same.dist() == Dist(EXACT + 1, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    middle = Sketch([1.0, *[2.0] * EXACT, 3.0])
    folded = middle.dist()
    assert folded is not None and (folded.min, folded.max) == (1.0, 3.0)
    assert folded.p50 != 2.0 and abs(folded.p50 - 2.0) <= ALPHA * 2.0
    assert GAMMA == (1 + ALPHA) / (1 - ALPHA)


def test_zeros_have_their_own_bucket() -> None:
    zeros = Sketch([0.0] * EXACT + [0.5])
    folded = zeros.dist()
    assert folded is not None
    assert (folded.p50, folded.p95, folded.min, folded.max) == (0.0, 0.0, 0.0, 0.5)


def test_memory_is_bounded_whatever_the_number_of_values() -> None:
    rng = random.Random(1)
    sketch = Sketch()
    for _ in range(25 * EXACT):
        sketch.add(10 ** rng.uniform(-3, 0))  # 1 ms to 1 s
    buckets = math.log(1000) / math.log(GAMMA) + 2
    assert sketch.held <= EXACT + buckets + 1


def test_merged_sketches_are_the_sketch_of_all_values() -> None:
    rng = random.Random(3)
    first = [rng.uniform(0.001, 0.1) for _ in range(EXACT + 100)]
    second = [rng.uniform(0.001, 0.1) for _ in range(2 * EXACT)]
    merged = Sketch(first)
    merged.merge(Sketch(second))
    together, alone = merged.dist(), Sketch(first + second).dist()
    assert together is not None and alone is not None
    assert (together.n, together.p50, together.p95, together.p99) == (
        alone.n,
        alone.p50,
        alone.p95,
        alone.p99,
    )
    assert (together.min, together.max) == (alone.min, alone.max)
    assert math.isclose(together.mean, alone.mean, rel_tol=1e-12)  # the sums' rounding differs
    small = Sketch([0.1, 0.2])
    small.merge(Sketch([0.3]))  # both exact: still the list
    assert small.exact and small.dist() == Dist.of([0.1, 0.2, 0.3])

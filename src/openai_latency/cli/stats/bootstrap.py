"""Bootstrap confidence intervals of a difference between two samples: numbers only.

The percentile bootstrap, each side resampled on its own (the two samples are independent runs or
targets): :data:`RESAMPLES` resamples per side from one :class:`random.Random` seeded with
:data:`SEED`, so the same data always give the same interval. The interval is the 2.5th and 97.5th
percentile of the resampled differences (95 %).

A resample's quantile needs no resample. A resample of n values is n uniform draws of an index, and
its k-th smallest value is the value at the k-th smallest index; the k-th smallest of n uniforms is
Beta(k, n - k + 1), the next one is that plus (1 - it) * Beta(1, n - k). So each resampled quantile
(linear interpolation between the closest ranks, as :func:`~.percentiles.percentile`) costs two beta
draws, whatever n: exact, and as fast for 100,000 calls as for 10. A resampled count of errors is a
binomial draw, also made from beta draws (:func:`binomial`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .percentiles import percentile

#: Resamples per side and interval.
RESAMPLES = 2000
#: The seed of every interval's generator.
SEED = 0
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """``estimate`` = statistic(current) - statistic(baseline); ``low``..``high`` its 95 % interval."""

    estimate: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def resampled_quantile(rng: random.Random, sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of one bootstrap resample of ``sorted_values`` (see the module docstring)."""
    n = len(sorted_values)
    if n == 1:
        return sorted_values[0]
    h = (n - 1) * q
    k = math.floor(h)  # 0-based rank: the (k+1)-th smallest
    u = rng.betavariate(k + 1, n - k)
    low = sorted_values[min(int(n * u), n - 1)]
    fraction = h - k
    if fraction == 0 or k + 1 >= n:
        return low
    u_next = u + (1 - u) * rng.betavariate(1, n - k - 1)
    high = sorted_values[min(int(n * u_next), n - 1)]
    return low + fraction * (high - low)


def binomial(rng: random.Random, n: int, p: float) -> int:
    """A Binomial(n, p) draw: how many of n uniforms fall below p, found by halving on order statistics."""
    count = 0
    while n > 0 and 0 < p < 1:
        if n <= 16:
            return count + sum(1 for _ in range(n) if rng.random() < p)
        k = (n + 1) // 2
        u = rng.betavariate(k, n + 1 - k)  # the k-th smallest of the n uniforms
        if u < p:  # k of them are below p; the other n - k are uniform on (u, 1)
            count += k
            n, p = n - k, (p - u) / (1 - u)
        else:  # the k - 1 smaller ones are uniform on (0, u)
            n, p = k - 1, p / u
    return count + (n if p >= 1 and n > 0 else 0)


def _interval(estimate: float, draw: Callable[[], float]) -> Interval:
    diffs = sorted(draw() for _ in range(RESAMPLES))
    tail = (1 - CONFIDENCE) / 2
    return Interval(estimate, percentile(diffs, tail), percentile(diffs, 1 - tail))


def quantile_interval(
    values: Sequence[float], q: float, rng: random.Random | None = None, confidence: float = CONFIDENCE
) -> Interval:
    """One sample's q-quantile with its percentile-bootstrap interval (``values`` sorted, non-empty);
    ``rng`` default: seeded with :data:`SEED`. benchmarks/overhead.py's estimate: the median of
    per-round differences."""
    rng = random.Random(SEED) if rng is None else rng
    draws = sorted(resampled_quantile(rng, values, q) for _ in range(RESAMPLES))
    tail = (1 - confidence) / 2
    return Interval(percentile(values, q), percentile(draws, tail), percentile(draws, 1 - tail))


def quantile_difference(baseline: Sequence[float], current: Sequence[float], q: float) -> Interval:
    """quantile(current) - quantile(baseline) with its interval (both samples sorted, non-empty)."""
    rng = random.Random(SEED)
    estimate = percentile(current, q) - percentile(baseline, q)
    return _interval(
        estimate, lambda: resampled_quantile(rng, current, q) - resampled_quantile(rng, baseline, q)
    )


def rate_difference(baseline: tuple[int, int], current: tuple[int, int]) -> Interval:
    """(hits, n) each side: rate(current) - rate(baseline) with its interval (both n > 0)."""
    rng = random.Random(SEED)
    (hits_a, n_a), (hits_b, n_b) = baseline, current
    p_a, p_b = hits_a / n_a, hits_b / n_b
    return _interval(p_b - p_a, lambda: binomial(rng, n_b, p_b) / n_b - binomial(rng, n_a, p_a) / n_a)

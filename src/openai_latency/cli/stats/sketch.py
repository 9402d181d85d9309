"""A distribution of any number of values in bounded memory: bench's chunk gaps, one per content chunk
of every request of a long run.

The first :data:`EXACT` values are kept as they are: a distribution of up to that many is exact (what
:meth:`Dist.of` gives on the list). Past it, the values are folded into a histogram of logarithmic
buckets (DDSketch's rule): bucket ``i`` holds the values in (g^(i-1), g^i], g = (1 + a) / (1 - a),
represented by 2g^i / (g + 1), which is within a (:data:`ALPHA`, 0.5 %) of every value in it. Zero
has a bucket of its own (the values are gaps: never negative). So:

- ``n``, ``min``, ``max`` stay exact, and ``mean`` is the exact sum over n (rounding aside);
- each percentile is within a of the exact one, relative: the value at each rank is within a of
  the exact value at that rank, and the linear interpolation between two ranks (type 7, as
  :func:`.percentiles.percentile`) keeps that bound, being a weighted mean of the two with weights
  that sum to one;
- memory: at most :data:`EXACT` floats waiting to be folded (32 KB) and one counter per bucket with a
  value in it: ln(max / min) / ln g + 2 of them at most, 2,765 from 1 ns to 1,000 s, whatever the
  number of values.

Sketches merge (``--workers``: each process's per level) by adding their buckets, with the same bound.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable

from .percentiles import QUANTILES, Dist

#: Relative error of every percentile once values are folded.
ALPHA = 0.005
#: Values kept as they are before the first fold (and the most waiting between two folds).
EXACT = 4096
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)


class Sketch:
    """Values added one at a time (:meth:`add`: an append), summarised by :meth:`dist`."""

    __slots__ = ("_buckets", "_buffer", "_high", "_low", "_n", "_total", "_zeros")

    def __init__(self, values: Iterable[float] = ()) -> None:
        self._buffer = array("d")
        #: bucket index -> values in it (only once values were folded).
        self._buckets: dict[int, int] = {}
        self._zeros = 0
        self._n = 0  # values folded
        self._total = 0.0
        self._low = math.inf
        self._high = -math.inf
        for value in values:
            self.add(value)

    def add(self, value: float) -> None:
        buffer = self._buffer
        buffer.append(value)
        if len(buffer) >= EXACT:
            self._fold()

    def __len__(self) -> int:
        return self._n + len(self._buffer)

    @property
    def exact(self) -> bool:
        """True while no value was folded: :meth:`dist` is then exact."""
        return self._n == 0

    @property
    def held(self) -> int:
        """What this sketch holds: values waiting to be folded plus bucket counters (the memory bound)."""
        return len(self._buffer) + len(self._buckets) + 1

    def _fold(self) -> None:
        buffer = self._buffer
        if not buffer:
            return
        buckets, scale = self._buckets, 1 / _LOG_GAMMA
        for value in buffer:
            if value <= 0.0:
                self._zeros += 1
                continue
            index = math.ceil(math.log(value) * scale)
            buckets[index] = buckets.get(index, 0) + 1
        self._n += len(buffer)
        self._total += math.fsum(buffer)
        self._low = min(self._low, min(buffer))
        self._high = max(self._high, max(buffer))
        self._buffer = array("d")

    def merge(self, other: Sketch) -> None:
        """Adds ``other``'s values (the bound holds for the merged sketch)."""
        if other.exact:
            for value in other._buffer:
                self.add(value)
            return
        self._fold()
        other._fold()
        for index, count in other._buckets.items():
            self._buckets[index] = self._buckets.get(index, 0) + count
        self._zeros += other._zeros
        self._n += other._n
        self._total += other._total
        self._low = min(self._low, other._low)
        self._high = max(self._high, other._high)

    def dist(self) -> Dist | None:
        """The summary: exact while :attr:`exact`, else percentiles within :data:`ALPHA`."""
        if self.exact:
            return Dist.of(self._buffer)
        self._fold()
        values = _ValueAt(self)
        p50, p95, p99 = (values.quantile(q) for _, q in QUANTILES)
        return Dist(self._n, p50, p95, p99, self._low, self._high, self._total / self._n)


class _ValueAt:
    """The folded values' order statistics: rank -> its bucket's value (min and max exact)."""

    def __init__(self, sketch: Sketch) -> None:
        self._sketch = sketch
        self._order = sorted(sketch._buckets)
        self._n = sketch._n

    def at(self, rank: int) -> float:
        sketch = self._sketch
        if rank <= 0:
            return sketch._low
        if rank >= self._n - 1:
            return sketch._high
        seen = sketch._zeros
        if rank < seen:
            return 0.0
        for index in self._order:
            seen += sketch._buckets[index]
            if rank < seen:
                value = 2 * GAMMA**index / (GAMMA + 1)
                return min(max(value, sketch._low), sketch._high)
        return sketch._high

    def quantile(self, q: float) -> float:
        """Type 7 (:func:`.percentiles.percentile`) on the ranks' values."""
        h = (self._n - 1) * q
        low = math.floor(h)
        below, above = self.at(low), self.at(min(low + 1, self._n - 1))
        return below + (h - low) * (above - below)


def sketch_dist(sketch: Sketch | None) -> Dist | None:
    return None if sketch is None else sketch.dist()

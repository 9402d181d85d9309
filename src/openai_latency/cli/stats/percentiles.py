"""One percentile for every number the CLI prints, and :class:`Dist`, a distribution's summary.

Percentiles use linear interpolation between the closest ranks (numpy's default ``linear``, Hyndman
and Fan type 7, ``statistics.quantiles(method="inclusive")``): for n sorted values and q in [0, 1],
h = (n - 1) q and the result is ``x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (see the module docstring)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    h = (len(sorted_values) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (h - low) * (sorted_values[high] - sorted_values[low])


@dataclass(frozen=True)
class Dist:
    n: int
    p50: float
    p95: float
    p99: float
    min: float
    max: float
    mean: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Dist | None:
        ordered = sorted(values)
        if not ordered:
            return None
        p50, p95, p99 = (percentile(ordered, q) for _, q in QUANTILES)
        return cls(len(ordered), p50, p95, p99, ordered[0], ordered[-1], statistics.fmean(ordered))

    def as_dict(self) -> dict[str, float | int]:
        return {
            "n": self.n, "p50": self.p50, "p95": self.p95, "p99": self.p99,
            "min": self.min, "max": self.max, "mean": self.mean,
        }  # fmt: skip


def dist_dict(dist: Dist | None) -> dict[str, float | int] | None:
    """:meth:`Dist.as_dict`, or None (JSON null) for no values."""
    return None if dist is None else dist.as_dict()


def json_number(value: float | None) -> float | None:
    """A number for JSON: NaN (unknown) and None become null."""
    return None if value is None or math.isnan(value) else value

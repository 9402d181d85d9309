"""Numbers as the tables print them: durations, shares, p50 / p95 / p99."""

from __future__ import annotations

import math

from ..stats.percentiles import Dist


def format_duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 0.001:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds * 1_000_000:.0f} µs"


def format_share(value: float) -> str:
    """A share of a whole (0.42 -> ``42%``, 0.05 -> ``5.0%``); NaN (unknown) -> ``-``."""
    if math.isnan(value):
        return "-"
    return f"{value * 100:.0f}%" if value >= 0.1 else f"{value * 100:.1f}%"


def triple(dist: Dist | None) -> str:
    """``p50 / p95 / p99`` as durations; ``-`` for no values."""
    if dist is None:
        return "-"
    return " / ".join(format_duration(value) for value in (dist.p50, dist.p95, dist.p99))

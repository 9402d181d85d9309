"""``bench --sweep [N]``: where does the endpoint saturate, and how does latency grow toward it?

1. **The highest sustainable throughput**, closed loop: concurrency 1, 2, 4, 8, ... (each level
   ``-n`` requests per target, or ``--duration``), until no target's throughput (its completed
   requests per second of the level) grew by :data:`GROWTH` or more over the previous level, or
   concurrency reached :data:`MAX_CONCURRENCY`. The **knee** is the lowest concurrency whose
   throughput is within :data:`GROWTH` of the highest: past it, load adds queueing, not throughput.
2. **Rates**: N open-loop levels (constant spacing, per target) evenly from the throughput at
   concurrency 1 up to the highest found, like guidellm's sweep: latency against load.

``--stop-over-saturated`` ends a rate level early when it is over-saturated, by this test: sampled
every :data:`SAMPLE_S` seconds, the requests in flight grew and the mean TTFT of the requests that
finished since the previous sample grew, :data:`STEADY` samples in a row (one second of steady
growth: the queue only lengthens). Its unfinished requests are cancelled (counted apart).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..plan import Load, Schedule
from .record import TargetProgress

#: Throughput growth under this share is "stopped growing".
GROWTH = 0.10
MAX_CONCURRENCY = 256
SAMPLE_S = 0.25
STEADY = 4
#: Open-loop levels cap their requests in flight here (as ``--rate`` without ``-c``).
RATE_CAP = 1000
#: Why ``--sweep`` refuses ``--workers`` (the usage error; :func:`sweep_refusal`).
SWEEP_WORKERS = (
    "--sweep runs in one client process: it picks each next level from the throughput measured live at"
    " the one before (and --stop-over-saturated samples the requests in flight 4 times a second),"
    " which --workers processes report only when their level ends; leave out --workers, or run the"
    " levels yourself (-c 1,2,4 or --rate) with --workers"
)


def sweep_refusal(concurrency: object, rate: float | None, workers: int) -> str | None:
    """What ``--sweep`` cannot run with, as a usage error (None: nothing)."""
    if workers > 1:
        return SWEEP_WORKERS
    if concurrency or rate is not None:
        return "--sweep chooses the load itself: leave out -c and --rate"
    return None


@dataclass
class Sweep:
    """What the sweep found: the throughput per closed-loop level, the knee, the rate levels."""

    rates: int
    #: (load level label, completed requests/s per target) of the search, in order.
    search: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    knee: str | None = None
    max_throughput: float | None = None
    levels: list[Load] = field(default_factory=list)
    #: Rate levels ended early by ``--stop-over-saturated``.
    stopped: list[str] = field(default_factory=list)

    @property
    def knee_rule(self) -> str:
        """How the knee was found, in words (the ``--html`` chart says it)."""
        top = f" ({self.max_throughput:,.1f} requests/s)" if self.max_throughput else ""
        return (
            f"the lowest concurrency whose steady throughput is within {GROWTH:.0%} of the highest{top};"
            f" closed loop at concurrency 1, 2, 4, ... until it grew by less than {GROWTH:.0%}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "search": [{"load": label, "requests_per_s": rates} for label, rates in self.search],
            "knee": self.knee,
            "max_requests_per_s": self.max_throughput,
            "rates": [load.label for load in self.levels if load.rate is not None],
            "stopped_over_saturated": self.stopped,
        }


Run = Callable[[Load], Awaitable[None]]


async def run_sweep(
    sweep: Sweep,
    schedule: Schedule,
    run: Run,
    progress: Mapping[str, TargetProgress],
    in_flight: Callable[[], int],
    stop_over_saturated: bool,
) -> None:
    """Both parts of the sweep; ``run(load)`` runs one level (its requests or its duration)."""
    best: dict[str, float] = {}
    concurrency = 1
    while True:
        load = Load(concurrency)
        before = {name: p.done for name, p in progress.items()}
        start = time.monotonic()
        await run(load)
        wall = max(time.monotonic() - start, 1e-9)
        rates = {name: steady_rate(p, p.done - before.get(name, 0), wall) for name, p in progress.items()}
        sweep.search.append((load.label, rates))
        sweep.levels.append(load)
        grew = any(rate >= best.get(name, 0.0) * (1 + GROWTH) for name, rate in rates.items())
        for name, rate in rates.items():
            best[name] = max(best.get(name, 0.0), rate)
        if not grew or concurrency >= MAX_CONCURRENCY:
            break
        concurrency *= 2
    top = max(best.values(), default=0.0)
    sweep.max_throughput = top
    for label, rates in sweep.search:
        if rates and max(rates.values()) >= top * (1 - GROWTH):
            sweep.knee = label
            break
    low = max(sweep.search[0][1].values(), default=0.0)
    if top <= 0 or sweep.rates < 1:
        return
    count = sweep.rates
    steps = [top] if count == 1 else [low + (top - low) * i / (count - 1) for i in range(count)]
    for rate in steps:
        if rate <= 0:
            continue
        load = Load(RATE_CAP, round(rate, 3))
        sweep.levels.append(load)
        if not stop_over_saturated:
            await run(load)
        elif await _until_saturated(run(load), progress, in_flight):
            sweep.stopped.append(load.label)


class Saturation:
    """The over-saturation test, one sample at a time: True once the requests in flight grew and
    the mean TTFT of the requests finished since the previous sample exceeded the previous
    interval's, :data:`STEADY` samples in a row."""

    def __init__(self, in_flight: int, ttft_sum: float, ttft_count: int) -> None:
        self._last = (in_flight, ttft_sum, ttft_count)
        self._previous: float | None = None
        self._growth = 0

    def observe(self, in_flight: int, ttft_sum: float, ttft_count: int) -> bool:
        flight, total, count = self._last
        mean = (ttft_sum - total) / (ttft_count - count) if ttft_count > count else None
        previous = self._previous
        rising = in_flight > flight and mean is not None and previous is not None and mean > previous
        self._growth = self._growth + 1 if rising else 0
        self._last = (in_flight, ttft_sum, ttft_count)
        if mean is not None:
            self._previous = mean
        return self._growth >= STEADY


async def _until_saturated(
    level: Awaitable[None], progress: Mapping[str, TargetProgress], in_flight: Callable[[], int]
) -> bool:
    """Runs the level; True when it was ended early as over-saturated (:class:`Saturation`)."""
    task = asyncio.ensure_future(level)
    test = Saturation(in_flight(), *_ttft_sum(progress))
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=SAMPLE_S)
            if not task.done() and test.observe(in_flight(), *_ttft_sum(progress)):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return True
        await task
        return False
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def steady_rate(progress: TargetProgress, count: int, wall: float) -> float:
    """Completed requests per second of a level in its steady state: the completions between the
    level's 25th and 75th percentile end times, over that time. Whole-level rates (count / wall)
    understate it by the ramp-up and the last round's tail; a closed loop's completions come in
    rounds, which the middle half spans whole."""
    ends = sorted(list(progress.ends)[-count:]) if count else []
    if len(ends) < 4:
        return count / wall
    low, high = (len(ends) - 1) // 4, (3 * (len(ends) - 1)) // 4
    span = (ends[high] - ends[low]) / 1e9
    return (high - low) / span if span > 0 else count / wall


def _ttft_sum(progress: Mapping[str, TargetProgress]) -> tuple[float, int]:
    """(sum of TTFTs, count) of every finished request so far."""
    return (sum(p.ttft_sum for p in progress.values()), sum(p.ttft_count for p in progress.values()))

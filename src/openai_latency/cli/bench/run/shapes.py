"""A load shape: the load levels of a bench run, one at a time, each chosen from what the last one
measured (guidellm's profiles work this way); and :func:`run_levels`, the one loop that runs any
shape.

- :class:`Levels`: the levels given (``-c 1,4,16``, ``--rate``, ``--replay``), in order, whatever
  they measured.
- :class:`SweepShape`: ``--sweep``'s search (concurrency 1, 2, 4, ... while the throughput grows),
  then its rate levels up to the highest throughput found (:mod:`.sweep` says how, and keeps what
  it found).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from ..plan import Load, Schedule
from .record import TargetProgress
from .sweep import GROWTH, MAX_CONCURRENCY, RATE_CAP, Sweep, steady_rate, until_saturated


class Step(NamedTuple):
    """The next level to run, and whether ``--stop-over-saturated`` may end it early."""

    load: Load
    stop_over_saturated: bool = False


@dataclass(frozen=True)
class LevelResult:
    """What the loop measured of one level: each target's steady completed requests per second
    (:func:`.sweep.steady_rate`), and whether it was ended early as over-saturated."""

    load: Load
    rates: dict[str, float]
    stopped: bool = False


class Shape(Protocol):
    #: Levels known before the run (the progress display's "2 of 3"; 0: chosen as it goes).
    planned: int

    def next(self, last: LevelResult | None) -> Step | None:
        """The level after ``last`` (None: the first), or None: the run is over."""
        ...


@dataclass
class Levels:
    """The levels given, in order."""

    levels: Sequence[Load]
    planned: int = 0
    _done: int = 0

    def __post_init__(self) -> None:
        self.planned = len(self.levels)

    def next(self, last: LevelResult | None) -> Step | None:
        if self._done >= len(self.levels):
            return None
        self._done += 1
        return Step(self.levels[self._done - 1])


@dataclass
class SweepShape:
    """``--sweep``: closed loop at concurrency 1, 2, 4, ... until no target's throughput grew by
    :data:`.sweep.GROWTH` (or concurrency reached :data:`.sweep.MAX_CONCURRENCY`); then ``sweep.rates``
    open-loop levels evenly from the throughput at concurrency 1 up to the highest. What it finds
    (the search, the knee, the levels, those stopped) is written to ``sweep``."""

    sweep: Sweep
    stop_over_saturated: bool = False
    planned: int = 0
    _best: dict[str, float] = field(default_factory=dict)
    #: The rate levels still to run (None: still searching).
    _rates: list[Load] | None = None

    def next(self, last: LevelResult | None) -> Step | None:
        if last is None:
            return Step(Load(1))
        if self._rates is None:
            if self._grew(last) and last.load.concurrency < MAX_CONCURRENCY:
                return Step(Load(last.load.concurrency * 2))
            self._rates = self._rate_levels()
        elif last.stopped:
            self.sweep.stopped.append(last.load.label)
        if not self._rates:
            return None
        load = self._rates.pop(0)
        self.sweep.levels.append(load)
        return Step(load, self.stop_over_saturated)

    def _grew(self, last: LevelResult) -> bool:
        """Records a search level; whether some target's throughput grew by GROWTH or more."""
        self.sweep.search.append((last.load.label, last.rates))
        self.sweep.levels.append(last.load)
        best = self._best
        grew = any(rate >= best.get(name, 0.0) * (1 + GROWTH) for name, rate in last.rates.items())
        for name, rate in last.rates.items():
            best[name] = max(best.get(name, 0.0), rate)
        return grew

    def _rate_levels(self) -> list[Load]:
        """The knee (the lowest concurrency within GROWTH of the highest throughput) and the rates."""
        sweep = self.sweep
        top = max(self._best.values(), default=0.0)
        sweep.max_throughput = top
        for label, rates in sweep.search:
            if rates and max(rates.values()) >= top * (1 - GROWTH):
                sweep.knee = label
                break
        low = max(sweep.search[0][1].values(), default=0.0)
        if top <= 0 or sweep.rates < 1:
            return []
        count = sweep.rates
        steps = [top] if count == 1 else [low + (top - low) * i / (count - 1) for i in range(count)]
        return [Load(RATE_CAP, round(rate, 3)) for rate in steps if rate > 0]


def shape_for(schedule: Schedule) -> tuple[Shape, Sweep | None]:
    """The run's shape, and the sweep's record when it is a ``--sweep``."""
    if schedule.sweep is None:
        return Levels(schedule.levels), None
    sweep = Sweep(schedule.sweep)
    return SweepShape(sweep, schedule.stop_over_saturated), sweep


async def run_levels(
    shape: Shape,
    run: Callable[[Load], Awaitable[None]],
    progress: Mapping[str, TargetProgress],
    in_flight: Callable[[], int],
    enter: Callable[[str, int, int], None],
) -> None:
    """Every level of ``shape``: ``enter(label, number, planned)``, then ``run(load)`` (its requests or
    its duration; under the over-saturation test when the step says so), then its result measured
    from ``progress`` and given to the shape for the next level."""
    last: LevelResult | None = None
    number = 0
    while (step := shape.next(last)) is not None:
        number += 1
        enter(step.load.label, number, shape.planned)
        before = {name: p.done for name, p in progress.items()}
        start = time.monotonic()
        stopped = False
        if step.stop_over_saturated:
            stopped = await until_saturated(run(step.load), progress, in_flight)
        else:
            await run(step.load)
        wall = max(time.monotonic() - start, 1e-9)
        rates = {name: steady_rate(p, p.done - before.get(name, 0), wall) for name, p in progress.items()}
        last = LevelResult(step.load, rates, stopped)

"""A load shape yields its next level from the last one's result (cli/bench/run/shapes.py), and one
loop runs any shape: hand-made results, no server."""

from __future__ import annotations

import asyncio

from openai_latency.cli.bench.plan import Load, Schedule
from openai_latency.cli.bench.run.record import TargetProgress
from openai_latency.cli.bench.run.shapes import LevelResult, Levels, Step, SweepShape, run_levels, shape_for
from openai_latency.cli.bench.run.sweep import MAX_CONCURRENCY, RATE_CAP, Sweep


def _walk(shape: SweepShape, rates: dict[int, float], stopped: frozenset[str] = frozenset()) -> list[Step]:
    """The steps the shape takes when concurrency c measures ``rates[c]`` requests/s (one target)."""
    steps: list[Step] = []
    last = None
    while (step := shape.next(last)) is not None:
        steps.append(step)
        rate = rates.get(step.load.concurrency, 0.0) if step.load.rate is None else step.load.rate
        last = LevelResult(step.load, {"a": rate}, step.load.label in stopped)
    return steps


def test_the_given_levels_run_in_order_whatever_they_measured() -> None:
    loads = [Load(1), Load(4), Load(1000, 2.5)]
    shape = Levels(loads)
    assert shape.planned == 3
    first = shape.next(None)
    assert first == Step(Load(1), False)
    second = shape.next(LevelResult(Load(1), {"a": 0.0}))
    assert second == Step(Load(4), False)
    assert shape.next(LevelResult(Load(4), {"a": 99.0}, stopped=True)) == Step(Load(1000, 2.5), False)
    assert shape.next(LevelResult(Load(1000, 2.5), {})) is None


def test_the_sweep_doubles_concurrency_while_throughput_grows_then_runs_its_rates() -> None:
    sweep = Sweep(3)
    # grows by 100 %, 100 %, then 5 % (under the 10 % rule): the search stops at c=8
    steps = _walk(SweepShape(sweep), {1: 10.0, 2: 20.0, 4: 40.0, 8: 42.0})
    assert [step.load for step in steps] == [
        Load(1), Load(2), Load(4), Load(8),
        Load(RATE_CAP, 10.0), Load(RATE_CAP, 26.0), Load(RATE_CAP, 42.0),
    ]  # fmt: skip
    assert not any(step.stop_over_saturated for step in steps)
    assert sweep.search == [
        ("c=1", {"a": 10.0}),
        ("c=2", {"a": 20.0}),
        ("c=4", {"a": 40.0}),
        ("c=8", {"a": 42.0}),
    ]
    assert sweep.max_throughput == 42.0
    assert sweep.knee == "c=4"  # 40 is within 10 % of 42
    assert sweep.levels == [step.load for step in steps]
    assert sweep.stopped == []


def test_the_sweep_marks_its_rate_levels_for_the_over_saturation_test_and_records_those_stopped() -> None:
    sweep = Sweep(2)
    steps = _walk(
        SweepShape(sweep, stop_over_saturated=True),
        {1: 5.0, 2: 5.2},
        stopped=frozenset({"rate=5.2/s c<=1000"}),
    )
    assert [(step.load.label, step.stop_over_saturated) for step in steps] == [
        ("c=1", False), ("c=2", False), ("rate=5/s c<=1000", True), ("rate=5.2/s c<=1000", True),
    ]  # fmt: skip
    assert sweep.knee == "c=1"
    assert sweep.stopped == ["rate=5.2/s c<=1000"]


def test_the_sweep_stops_at_its_highest_concurrency_and_runs_no_rate_without_throughput() -> None:
    always = {c: float(c) for c in range(1, 2 * MAX_CONCURRENCY + 1)}
    steps = _walk(SweepShape(Sweep(1)), always)
    assert [s.load.concurrency for s in steps if s.load.rate is None][-1] == MAX_CONCURRENCY
    assert steps[-1].load == Load(RATE_CAP, float(MAX_CONCURRENCY))  # one rate: the highest
    nothing = Sweep(5)  # no target measured anything: no growth, no throughput, no rate level
    shape = SweepShape(nothing)
    assert shape.next(None) == Step(Load(1))
    assert shape.next(LevelResult(Load(1), {})) is None
    assert nothing.max_throughput == 0.0 and nothing.levels == [Load(1)] and nothing.knee is None


def test_the_schedule_picks_its_shape() -> None:
    given, found = shape_for(Schedule([Load(2), Load(8)], 10, None))
    assert isinstance(given, Levels) and given.levels == [Load(2), Load(8)] and found is None
    sweep_shape, sweep = shape_for(Schedule([Load(1)], 10, None, sweep=4, stop_over_saturated=True))
    assert isinstance(sweep_shape, SweepShape) and sweep is sweep_shape.sweep
    assert sweep is not None and sweep.rates == 4 and sweep_shape.stop_over_saturated


def test_one_loop_runs_a_shape_and_gives_it_each_levels_measured_result() -> None:
    """run_levels announces each level, runs it, and hands the shape the completions it saw."""
    progress = {"a": TargetProgress()}
    ran: list[str] = []
    entered: list[tuple[str, int, int]] = []
    results: list[LevelResult | None] = []

    class Recording(Levels):
        def next(self, last: LevelResult | None) -> Step | None:
            results.append(last)
            return super().next(last)

    async def run(load: Load) -> None:
        ran.append(load.label)
        for _ in range(load.concurrency):  # completions, 1 ms apart
            progress["a"].done += 1
            progress["a"].ends.append(len(progress["a"].ends) * 1_000_000)

    shape = Recording([Load(2), Load(8)])
    asyncio.run(run_levels(shape, run, progress, lambda: 0, lambda *args: entered.append(args)))
    assert ran == ["c=2", "c=8"]
    assert entered == [("c=2", 1, 2), ("c=8", 2, 2)]
    assert results[0] is None
    second, third = results[1], results[2]
    assert second is not None and third is not None
    assert second.load == Load(2) and not second.stopped
    assert third.load == Load(8) and third.rates == {"a": 1000.0}  # 8 ends 1 ms apart: 1,000/s

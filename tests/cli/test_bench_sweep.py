"""``--stop-over-saturated``'s test on hand-made samples (no server): steady growth of the requests in
flight and of TTFT over four samples (one second) ends the level; anything else lets it run."""

from __future__ import annotations

import asyncio

from openai_latency.cli.bench.run.record import TargetProgress
from openai_latency.cli.bench.run.sweep import STEADY, Saturation, _until_saturated


def _verdicts(flights: list[int], ttfts: list[float | None]) -> list[bool]:
    """Each sample: requests in flight, and the mean TTFT of the two that finished since (None: none)."""
    test = Saturation(flights[0], 0.0, 0)
    total, count, verdicts = 0.0, 0, []
    for flight, ttft in zip(flights[1:], ttfts[1:], strict=True):
        if ttft is not None:
            total, count = total + 2 * ttft, count + 2
        verdicts.append(test.observe(flight, total, count))
    return verdicts


def test_steady_growth_for_four_samples_is_over_saturated() -> None:
    growing = list(range(4, 4 + 2 * 8, 2))
    verdicts = _verdicts(growing, [0.1 * (i + 1) for i in range(8)])
    # the first sample has no previous interval to compare with: growth counts from the second
    assert verdicts.index(True) == STEADY


def test_no_steady_growth_is_not() -> None:
    growing = list(range(4, 20, 2))
    assert not any(_verdicts([8] * 8, [0.1 * (i + 1) for i in range(8)]))  # in flight flat
    assert not any(_verdicts(growing, [1.0 - 0.05 * i for i in range(8)]))  # TTFT falling
    dip = [0.1, 0.2, 0.3, 0.4, 0.35, 0.5, 0.6, 0.7]  # one interval's TTFT fell: the count restarts
    assert not any(_verdicts(growing, dip))
    gap = [0.1, 0.2, None, 0.3, 0.4, 0.5, 0.6, 0.7]  # nothing finished in one interval: restart there
    assert _verdicts(growing, gap).index(True) == 2 + STEADY - 1


def test_an_over_saturated_level_is_cancelled() -> None:
    progress = {"a": TargetProgress()}
    flight = [0]
    cancelled = []

    async def level() -> None:
        try:
            for step in range(200):
                flight[0] = step
                progress["a"].ttft_sum += step
                progress["a"].ttft_count += 1
                await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    assert asyncio.run(_until_saturated(level(), progress, lambda: flight[0])) is True
    assert cancelled == [True]


def test_the_sweep_table_says_where_the_client_was_the_bottleneck() -> None:
    from openai_latency.cli.bench.plan import Load
    from openai_latency.cli.bench.results.levels import level_client, sweep_lines
    from openai_latency.cli.bench.run.runner import RunState
    from openai_latency.cli.bench.run.sweep import Sweep

    state = RunState(planned={}, chunk_gaps={})
    found = Sweep(1, knee="c=2", max_throughput=10.0, levels=[Load(1), Load(2), Load(1000, 9.0)])
    for label, lag in (("c=1", 0.001), ("c=2", 0.002), ("rate=9/s c<=1000", 0.030)):
        state.level_cpu[label] = 0.5
        state.level_lag[label] = [lag] * 20
    clients = {load.label: level_client(load.label, [], state) for load in found.levels}
    styled = sweep_lines(found, [], clients, markdown=False)
    lines = [line for line, _ in styled]
    assert [line for line, style in styled if style == "bold"] == [lines[-2]]  # the knee's sentence
    assert lines[-2].startswith("knee: c=2")
    (knee,) = [line for line in lines if line.startswith("c=2")]
    assert knee.rstrip().endswith("<- knee")
    (busy,) = [line for line in lines if line.startswith("rate=9/s")]
    assert "30.0 ms !" in busy
    assert lines[-1].startswith("the client, not the server, was the bottleneck at rate=9/s c<=1000")

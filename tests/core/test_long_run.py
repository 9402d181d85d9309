"""Long runs (short version; ``benchmarks/long_run.py`` is the long one): what our code keeps alive
does not grow with the number of calls or abandoned streams, and an open stream costs O(1) memory.

The calls cover sync and async clients, streams, a call retried after a 429 and calls that fail with
an API error; the abandoned streams are sync and async (``tests/memory_harness.py``)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import pytest

from tests.support import memory_harness

WARM_CALLS, CALLS = 45, 135  # 5 and 15 rounds of memory_harness's 9 kinds of call
WARM_ABANDONED, ABANDONED = 16, 48  # half sync, half async


@pytest.fixture
def tracing() -> Iterator[None]:
    """Stops tracemalloc at the end; tests start it after their warm-up (tracing slows calls ~4x)."""
    try:
        yield
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_tracked_state_stays_flat(tracing: None) -> None:
    with memory_harness.harness() as h:
        memory_harness.calls(h, WARM_CALLS)
        memory_harness.abandoned(h, WARM_ABANDONED)
        tracemalloc.start()
        before_state, before_bytes = memory_harness.tracked_state(), memory_harness.our_bytes()
        memory_harness.calls(h, CALLS)
        memory_harness.abandoned(h, ABANDONED)
        after_state, after_bytes = memory_harness.tracked_state(), memory_harness.our_bytes()
        assert h.exporter.count > CALLS  # the spans were made and exported
    assert after_state == before_state, (before_state, after_state)
    assert after_state["operations_alive"] == 0 and after_state["by_response"] == 0
    # of what our modules allocated during 3x the warm-up's calls, almost nothing is still held
    assert after_bytes - before_bytes < 8 * 1024, (before_bytes, after_bytes)


def test_open_streams_cost_constant_memory_each(tracing: None) -> None:
    with memory_harness.harness() as h:
        memory_harness.calls(h, 15)
        tracemalloc.start()
        small = memory_harness.bytes_per_open_stream(h, 6)
        large = memory_harness.bytes_per_open_stream(h, 24)
        after = memory_harness.tracked_state()
    ours_small, ours_large = small[0], large[0]
    assert 0 < ours_large < 16 * 1024, large  # a few KB per stream, not a function of the stream count
    assert abs(ours_large - ours_small) < 0.25 * ours_large, (small, large)
    assert after["operations_alive"] == 0

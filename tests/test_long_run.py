"""Long runs (short version; ``benchmarks/long_run.py`` is the long one): what our code keeps alive
does not grow with the number of calls or abandoned streams, and an open stream costs O(1) memory."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import pytest

from tests import memkit

WARM_CALLS, CALLS = 60, 240
WARM_ABANDONED, ABANDONED = 20, 80


@pytest.fixture
def tracing() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def test_tracked_state_stays_flat(tracing: None) -> None:
    with memkit.harness() as h:
        memkit.calls(h, WARM_CALLS)
        memkit.abandoned(h, WARM_ABANDONED)
        before_state, before_bytes = memkit.tracked_state(), memkit.our_bytes()
        memkit.calls(h, CALLS)
        memkit.abandoned(h, ABANDONED)
        after_state, after_bytes = memkit.tracked_state(), memkit.our_bytes()
        assert h.exporter.count > CALLS  # the spans were made and exported
    print(f"our bytes {before_bytes} -> {after_bytes}; state {after_state}")
    assert after_state == before_state, (before_state, after_state)
    assert after_state["operations_alive"] == 0 and after_state["by_response"] == 0
    # what our modules allocated and still hold did not grow with 4x the calls
    assert after_bytes - before_bytes < 16 * 1024, (before_bytes, after_bytes)


def test_open_streams_cost_constant_memory_each(tracing: None) -> None:
    with memkit.harness() as h:
        memkit.calls(h, 15)
        small = memkit.bytes_per_open_stream(h, 10)
        large = memkit.bytes_per_open_stream(h, 40)
        after = memkit.tracked_state()
    ours_small, ours_large = small[0], large[0]
    print(
        f"bytes per open stream: ours {ours_small:.0f} / {ours_large:.0f},"
        f" all {small[1]:.0f} / {large[1]:.0f}"
    )
    assert 0 < ours_large < 16 * 1024, large  # a few KB per stream, not a function of the stream count
    assert abs(ours_large - ours_small) < 0.25 * ours_large, (small, large)
    assert after["operations_alive"] == 0

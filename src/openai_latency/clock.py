"""The one clock of the project, the first design rule (docs/ARCHITECTURE.md): every mark is
``time.perf_counter_ns()`` (CLOCK_MONOTONIC on Linux, the clock the fake server logs on), mapped to
the epoch time a span wants once per process (:func:`to_epoch_ns`)."""

from __future__ import annotations

import time

clock = time.perf_counter_ns
"""The one clock of the project: CLOCK_MONOTONIC on Linux, shared with the fake server's log."""

EPOCH_OFFSET_NS = time.time_ns() - time.perf_counter_ns()
"""Added to a monotonic mark to get the epoch timestamp a span wants; measured once per process."""


def to_epoch_ns(mono_ns: int) -> int:
    return mono_ns + EPOCH_OFFSET_NS


def seconds(ns: int) -> float:
    """A duration in nanoseconds as seconds, exact to the nanosecond in its shortest form: one
    correctly rounded division (``150945173 / 1e9`` is ``0.150945173``, where ``* 1e-9`` rounds twice
    and gives ``0.15094517300000002``). Negative durations (marks out of order) are 0."""
    return ns / 1e9 if ns > 0 else 0.0


def to_monotonic_ns(epoch_ns: int) -> int:
    """The inverse of :func:`to_epoch_ns`: lets tests compare span times with a server's log."""
    return epoch_ns - EPOCH_OFFSET_NS

"""Timing on a shared, loaded machine: a few runs, one must pass, for the timing comparison only.

A test that compares our clock with the fake server's (±3 ms, or an upper bound on a scripted delay)
can miss when another process takes the core at the wrong moment; a real bug misses in every run. So
a timing test is split in two: ``run`` makes one run and checks everything that does not depend on
the scheduler (the phases' names and order, attributes set or unset, counts, lower bounds), and
``timing`` compares the run's times with the server's log. An ``AssertionError`` in ``run`` fails
the test at once, never retried; only a miss in ``timing`` (or an exception of ``also`` that ``run``
raises: a known upstream race) gets another run. The last run's miss is what the test reports.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: Runs a timing comparison gets (one must pass).
ATTEMPTS = 3


def retry_timing(
    run: Callable[[], T],
    timing: Callable[[T], None],
    attempts: int = ATTEMPTS,
    also: tuple[type[BaseException], ...] = (),
) -> T:
    """``run()``, then ``timing(result)``; another run only when ``timing`` misses (see the module)."""
    for attempt in range(1, attempts + 1):
        try:
            result = run()
        except also:
            if attempt == attempts:
                raise
            continue
        try:
            timing(result)
        except AssertionError:
            if attempt == attempts:
                raise
            continue
        return result
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


async def retry_timing_async(
    run: Callable[[], Awaitable[T]],
    timing: Callable[[T], None],
    attempts: int = ATTEMPTS,
    also: tuple[type[BaseException], ...] = (),
) -> T:
    """:func:`retry_timing` for a run that is a coroutine."""
    for attempt in range(1, attempts + 1):
        try:
            result = await run()
        except also:
            if attempt == attempts:
                raise
            continue
        try:
            timing(result)
        except AssertionError:
            if attempt == attempts:
                raise
            continue
        return result
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

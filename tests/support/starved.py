"""A caller starved of CPU, in this process: a thread that computes and keeps the GIL from it.

:func:`cpu_burner` computes without pause and takes the GIL back every ``switch_interval`` seconds
(CPython's switch interval): the caller's thread waits up to that long each time it wants to run.
:func:`gil_holder` holds it for a set time, then lets go for a set time: the caller runs at about
half speed, and whatever it waits for in the held time is late by up to that time."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def _running(step: Callable[[threading.Event], bool]) -> Iterator[None]:
    """A daemon thread that calls ``step(stop)`` until it returns False, stopped and joined at exit."""
    stop = threading.Event()

    def loop() -> None:
        while step(stop):
            pass

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def cpu_burner(switch_interval: float) -> Iterator[None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)

    def burn(stop: threading.Event) -> bool:
        sum(range(1000))
        return not stop.is_set()

    try:
        with _running(burn):
            yield
    finally:
        sys.setswitchinterval(interval)


@contextmanager
def gil_holder(hold_s: float = 0.04, pause_s: float = 0.02) -> Iterator[None]:
    """A thread that holds the GIL for about ``hold_s`` at a time, then lets go for ``pause_s``: one
    call of a builtin that runs in C (``sum`` over a range) does not give the GIL up at the switch
    interval, so every other thread of the process waits for it to end. The length of the call is
    measured on this CPU first, so the starvation is the same on a fast machine and a slow one."""
    size = 100_000
    while True:
        start = time.perf_counter()
        sum(range(size))
        took = time.perf_counter() - start
        if took > 0.002:
            break
        size *= 4
    size = int(size * hold_s / took)

    def hold(stop: threading.Event) -> bool:
        if stop.wait(pause_s):
            return False
        sum(range(size))
        return True

    with _running(hold):
        yield

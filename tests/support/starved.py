"""A caller starved of CPU, in this process: a thread that computes without pause and takes the GIL
back every ``switch_interval`` seconds (CPython's switch interval), so that the caller's thread waits
up to that long each time it wants to run."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cpu_burner(switch_interval: float) -> Iterator[None]:
    stop = threading.Event()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)

    def burn() -> None:
        while not stop.is_set():
            sum(range(1000))

    thread = threading.Thread(target=burn, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)

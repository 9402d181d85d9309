"""An arrival schedule against what the client did with it (the open loop, ``--replay``).

A schedule asks for arrivals at set times. The client keeps it only while its event loop wakes on
time and a slot is free: a busy loop wakes the sleep late, a full cap makes the arrival wait. Either
way the arrival starts late, the load is lighter than asked, and every number measured under it
describes that lighter load. :class:`Arrivals` counts the arrivals that started more than
:data:`LATE_S` after they were due (whatever held them up), the worst lateness, and the rate asked
against the rate kept, so that the output can say so first.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

#: An arrival that starts later than this after it was due counts as late.
LATE_S = 0.010


@dataclass
class Arrivals:
    started: int = 0
    #: Started more than :data:`LATE_S` after they were due.
    late: int = 0
    #: Found every slot of the cap busy (a cause of lateness the user fixes with ``-c``).
    capped: int = 0
    max_late_s: float = 0.0
    #: ``time.monotonic()`` of the first and last due times, and of the first and last starts.
    first_due: float = math.inf
    last_due: float = -math.inf
    first_start: float = math.inf
    last_start: float = -math.inf

    def start(self, due: float, capped: bool = False) -> None:
        """An arrival due at ``due`` (``time.monotonic()``) starts now."""
        now = time.monotonic()
        lateness = now - due
        self.started += 1
        self.capped += capped
        if lateness > LATE_S:
            self.late += 1
            self.max_late_s = max(self.max_late_s, lateness)
        self.first_due, self.last_due = min(self.first_due, due), max(self.last_due, due)
        self.first_start, self.last_start = min(self.first_start, now), max(self.last_start, now)

    def merge(self, other: Arrivals) -> None:
        """Another process's share of the same schedule (``--workers``: one origin for all)."""
        self.started += other.started
        self.late += other.late
        self.capped += other.capped
        self.max_late_s = max(self.max_late_s, other.max_late_s)
        self.first_due, self.last_due = (
            min(self.first_due, other.first_due),
            max(self.last_due, other.last_due),
        )
        self.first_start = min(self.first_start, other.first_start)
        self.last_start = max(self.last_start, other.last_start)

    @property
    def rate_asked(self) -> float | None:
        """Arrivals per second the schedule asked for (None: fewer than two arrivals)."""
        return _rate(self.started, self.last_due - self.first_due)

    @property
    def rate_kept(self) -> float | None:
        """Arrivals per second the client started."""
        return _rate(self.started, self.last_start - self.first_start)

    @property
    def slipped(self) -> bool:
        return self.late > 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "late": self.late,
            "late_because_cap_full": self.capped,
            "max_late_s": self.max_late_s,
            "rate_asked": self.rate_asked,
            "rate_kept": self.rate_kept,
        }

    def sentence(self, level: str) -> str:
        """The words the output begins with when the schedule slipped."""
        rates = ""
        if self.rate_asked and self.rate_kept:
            rates = f"; it started {self.rate_kept:,.1f} arrivals/s of the {self.rate_asked:,.1f}/s asked"
        cause = (
            f" ({self.capped} found every slot busy: raise -c)"
            if self.capped
            else " (the client's event loop was busy: --workers N)"
        )
        return (
            f"the schedule slipped at {level}: {self.late} of {self.started} arrivals started more than"
            f" {LATE_S * 1000:.0f} ms late (up to {self.max_late_s * 1000:,.0f} ms){cause}{rates}."
            " The numbers below measure a lighter load than asked."
        )


def _rate(count: int, seconds: float) -> float | None:
    return (count - 1) / seconds if count > 1 and seconds > 0 else None

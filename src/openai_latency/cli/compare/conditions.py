"""``--fail-if``: a condition on a verdict that fails the run (exit 1) when it holds *and* the 95 %
interval of the difference excludes zero.

``METRIC.STAT OP CHANGE``: METRIC one of ttft, ttft_answer, e2e, tpot (with ``--by trace``:
duration, llm, tool, other, self, seconds per turn); STAT p50 or p95; OP ``>``
(current above baseline by more than CHANGE) or ``<`` (below, by more than CHANGE: give a negative
CHANGE); CHANGE ``+10%`` (of the baseline's value), ``+50ms``, ``+0.2s``. ``error_rate OP CHANGEpp``:
percentage points of the error rate.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from ..stats.turns import TURN_METRICS
from ..stats.verdict import Estimate, Verdict

TIME_METRICS = ("ttft", "ttft_answer", "e2e", "tpot")
_TIME = re.compile(
    r"^\s*(?P<metric>[a-z0-9_]+)\.(?P<stat>p50|p95)\s*(?P<op>[<>])\s*(?P<value>[-+]?\d+(?:\.\d+)?)\s*(?P<unit>%|ms|s)\s*$"
)
_RATE = re.compile(r"^\s*error_rate\s*(?P<op>[<>])\s*(?P<value>[-+]?\d+(?:\.\d+)?)\s*pp\s*$")
_UNITS = {"ms": 1e-3, "s": 1.0}


@dataclass(frozen=True)
class Condition:
    text: str
    metric: str
    stat: str  # p50, p95, or rate
    op: str
    value: float  # seconds, a share of the baseline (relative), or a rate
    relative: bool = False

    def threshold(self, baseline: float) -> float:
        return self.value * baseline if self.relative else self.value

    def holds(self, estimate: Estimate) -> bool:
        """The difference crosses the threshold and its interval excludes zero."""
        limit = self.threshold(estimate.baseline)
        interval = estimate.interval
        if self.op == ">":
            return interval.estimate > limit and interval.low > 0
        return interval.estimate < limit and interval.high < 0


def parse_condition(text: str) -> Condition:
    """argparse type of ``--fail-if``."""
    rate = _RATE.match(text)
    if rate:
        return Condition(text.strip(), "error_rate", "rate", rate["op"], float(rate["value"]) / 100)
    match = _TIME.match(text)
    if not match or match["metric"] not in (*TIME_METRICS, *TURN_METRICS):
        raise argparse.ArgumentTypeError(
            f"expected METRIC.STAT>CHANGE like 'ttft.p95>+10%', 'e2e.p50>+50ms' or 'error_rate>+1pp'"
            f" (METRIC: {', '.join(TIME_METRICS)}, or with --by trace {', '.join(TURN_METRICS)};"
            f" STAT: p50, p95; OP: > or <), got {text!r}"
        )
    value, unit = float(match["value"]), match["unit"]
    if unit == "%":
        return Condition(
            text.strip(), match["metric"], match["stat"], match["op"], value / 100, relative=True
        )
    return Condition(text.strip(), match["metric"], match["stat"], match["op"], value * _UNITS[unit])


def find_estimate(verdict: Verdict, condition: Condition) -> Estimate | None:
    metric = verdict.metric(condition.metric)
    if metric is None:
        return None
    return next((e for e in metric.estimates if e.stat == condition.stat), None)

"""Which of two sets of calls is faster, by how much, how sure, and which phases made the difference.

Numbers only (the sentence and the tables are :mod:`..render.verdict`'s). For each metric (``ttft``,
``ttft_answer`` when a call reasoned before it answered, ``e2e``, ``tpot``: p50 and p95;
``error_rate``) :func:`compare` gives the difference current - baseline with its 95 % bootstrap
interval (:mod:`.bootstrap`: 2,000 resamples per side, seed 0). A difference is *significant* when its
interval excludes zero and it is at least :data:`MIN_EFFECT_S` and :data:`MIN_EFFECT_SHARE` of the
baseline's value (error rate: the interval alone): below that, two runs of one server on a shared
machine differ without a cause, and the verdict says "no difference detectable with N requests" instead
of ranking noise. A ratio is given only when both sides are at least :data:`RATIO_FLOOR_S` (a thousand
times the clock's resolution).

Which phases account for a difference at a quantile: the calls of each side whose metric lies within
:data:`WINDOW` of that quantile (by rank), and each phase's mean time per call over them (0 for a call
without the phase: a mean over the calls near the quantile, never a median with zeros over all calls,
which hides a tail). The phases sorted by how much they moved, both directions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..spans.calls import Call
from ..spans.names import PHASES, phase_rank
from .bootstrap import Interval, quantile_difference, rate_difference
from .metric_table import METRIC
from .percentiles import percentile

#: The clock's resolution (span times are nanoseconds; the client's own scheduling is microseconds).
CLOCK_RESOLUTION_S = 1e-6
#: Ratios only where both sides are at least this (1,000 x the resolution).
RATIO_FLOOR_S = 1e-3
#: A significant difference is at least this long...
MIN_EFFECT_S = 1e-3
#: ... and at least this share of the baseline's value.
MIN_EFFECT_SHARE = 0.05
#: Fewer calls than this on a side: nothing is compared.
MIN_CALLS = 5
#: Half-width (in quantile) of the window of calls whose phases explain a quantile's difference.
WINDOW = 0.05

STATS = (("p50", 0.50), ("p95", 0.95))
#: Metric -> the phases that can make it (in call order).
METRIC_PHASES: dict[str, tuple[str, ...]] = {
    "ttft": ("request_build", "network_wait", "retry_backoff", "first_token"),
    "ttft_answer": ("request_build", "network_wait", "retry_backoff", "first_token", "reasoning"),
    "e2e": PHASES,
    "tpot": (),
}
METRICS = (*METRIC_PHASES, "error_rate")


@dataclass(frozen=True)
class PhaseShift:
    """A phase's mean time per call near the quantile: baseline, current (seconds)."""

    phase: str
    baseline: float
    current: float

    @property
    def change(self) -> float:
        return self.current - self.baseline


@dataclass(frozen=True)
class Estimate:
    stat: str  # p50, p95, or rate
    baseline: float
    current: float
    interval: Interval
    significant: bool
    #: current / baseline, when both are at least RATIO_FLOOR_S (time metrics only).
    ratio: float | None
    #: Phases near the quantile, most moved first (time metrics with phases).
    phases: tuple[PhaseShift, ...] = ()

    @property
    def difference(self) -> float:
        return self.interval.estimate


@dataclass(frozen=True)
class MetricVerdict:
    metric: str
    calls: tuple[int, int]
    estimates: tuple[Estimate, ...]

    @property
    def significant(self) -> bool:
        return any(e.significant for e in self.estimates)


@dataclass(frozen=True)
class Side:
    """What a side's calls went through, for the sentence: retries, backoff, errors."""

    label: str
    calls: int
    backoff_calls: int
    backoff_s: float
    retry_reasons: dict[str, int]
    errors: dict[str, int]

    @classmethod
    def of(cls, label: str, calls: Sequence[Call]) -> Side:
        backoff = [call.phases["retry_backoff"] for call in calls if "retry_backoff" in call.phases]
        reasons = Counter(reason for call in calls for reason in call.retry_reasons)
        errors = Counter(call.error_type for call in calls if call.error_type is not None)
        return cls(label, len(calls), len(backoff), sum(backoff), dict(reasons.most_common()), dict(errors))


@dataclass(frozen=True)
class Verdict:
    baseline: Side
    current: Side
    metrics: tuple[MetricVerdict, ...] = field(default_factory=tuple)

    @property
    def significant(self) -> bool:
        return any(m.significant for m in self.metrics)

    def metric(self, name: str) -> MetricVerdict | None:
        return next((m for m in self.metrics if m.metric == name), None)


def compare(baseline: Sequence[Call], current: Sequence[Call], labels: tuple[str, str]) -> Verdict:
    """The verdict of ``current`` against ``baseline`` (see the module docstring)."""
    names = [name for name in METRIC_PHASES if name != "ttft_answer" or _reasoned(baseline, current)]
    metrics = [m for name in names if (m := _time_metric(name, baseline, current)) is not None]
    rate = _error_rate(baseline, current)
    if rate is not None:
        metrics.append(rate)
    return Verdict(Side.of(labels[0], baseline), Side.of(labels[1], current), tuple(metrics))


def _reasoned(*sides: Sequence[Call]) -> bool:
    """Whether any call's first answer token came after its first token (else ttft_answer is ttft)."""
    return any(c.ttft_answer is not None and c.ttft_answer != c.ttft for calls in sides for c in calls)


def _measured(name: str, calls: Sequence[Call]) -> list[tuple[float, Call]]:
    value = METRIC[name].of  # None where the call does not count (:mod:`.metric_table`)
    measured = [(v, call) for call in calls if (v := value(call)) is not None and math.isfinite(v)]
    measured.sort(key=lambda item: item[0])
    return measured


def _time_metric(name: str, baseline: Sequence[Call], current: Sequence[Call]) -> MetricVerdict | None:
    a, b = _measured(name, baseline), _measured(name, current)
    if not a or not b:
        return None
    values_a, values_b = [v for v, _ in a], [v for v, _ in b]
    estimates = []
    for stat, q in STATS:
        if len(a) < MIN_CALLS or len(b) < MIN_CALLS:
            continue
        interval = quantile_difference(values_a, values_b, q)
        base, cur = percentile(values_a, q), percentile(values_b, q)
        floor = max(MIN_EFFECT_S, MIN_EFFECT_SHARE * abs(base))
        significant = interval.excludes_zero and abs(interval.estimate) >= floor
        ratio = cur / base if min(base, cur) >= RATIO_FLOOR_S else None
        shifts = _phase_shifts(METRIC_PHASES[name], a, b, q)
        estimates.append(Estimate(stat, base, cur, interval, significant, ratio, shifts))
    return MetricVerdict(name, (len(a), len(b)), tuple(estimates))


def _window(measured: Sequence[tuple[float, Call]], q: float) -> list[Call]:
    """The calls whose rank lies within WINDOW of the quantile (at least the nearest one)."""
    n = len(measured)
    low = max(0, math.floor((q - WINDOW) * (n - 1)))
    high = min(n - 1, math.ceil((q + WINDOW) * (n - 1)))
    return [call for _, call in measured[low : high + 1]]


def _phase_shifts(
    names: Sequence[str], a: Sequence[tuple[float, Call]], b: Sequence[tuple[float, Call]], q: float
) -> tuple[PhaseShift, ...]:
    if not names:
        return ()
    near_a, near_b = _window(a, q), _window(b, q)
    shifts = [
        PhaseShift(name, _mean_phase(near_a, name), _mean_phase(near_b, name))
        for name in names
        if any(name in call.phases for call in (*near_a, *near_b))
    ]
    shifts.sort(key=lambda s: (-abs(s.change), phase_rank(s.phase)))
    return tuple(shifts)


def _mean_phase(calls: Sequence[Call], name: str) -> float:
    return sum(call.phases.get(name, 0.0) for call in calls) / len(calls)


def _error_rate(baseline: Sequence[Call], current: Sequence[Call]) -> MetricVerdict | None:
    if not baseline or not current:
        return None
    counts = [
        (sum(1 for call in calls if call.error_type is not None), len(calls)) for calls in (baseline, current)
    ]
    (errors_a, n_a), (errors_b, n_b) = counts
    estimates: tuple[Estimate, ...] = ()
    if n_a >= MIN_CALLS and n_b >= MIN_CALLS:
        interval = rate_difference(counts[0], counts[1])
        estimates = (
            Estimate("rate", errors_a / n_a, errors_b / n_b, interval, interval.excludes_zero, None),
        )
    return MetricVerdict("error_rate", (n_a, n_b), estimates)

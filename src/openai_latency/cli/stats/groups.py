"""Calls -> groups -> per-group numbers: percentiles of the call and of each phase, errors, slow calls.

:func:`group` splits the calls by their keys (``endpoint``, ``model``, ``target``...) into groups that
keep their calls; :func:`summarize` gives each group's numbers. No text here: the tables are
``render``'s and the commands'.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..spans.calls import Call
from ..spans.names import HTTP_PHASES, PHASES, phase_rank, phase_sort_key
from .metric_table import METRICS
from .percentiles import Dist

#: report's and compare's groups when ``--by`` is not given and the calls are not bench's.
DEFAULT_BY = ("endpoint", "model")
#: ``--by``'s default, in words (report's and compare's help).
DEFAULT_BY_TEXT = (
    "target, and load level when there are several, for the spans of bench --out; else"
    " endpoint,model (endpoint = server.address:server.port)"
)


def default_by(calls: Sequence[Call]) -> list[str]:
    """The grouping keys when ``--by`` is not given: the target (and load level of a sweep) for the
    spans of ``bench --out``, else endpoint and model."""
    if calls and all(call.keys["target"] != "-" for call in calls):
        return ["target", "load"] if len({call.keys["load"] for call in calls}) > 1 else ["target"]
    return list(DEFAULT_BY)


@dataclass(frozen=True)
class Group:
    """The calls that share the values of the grouping keys (``key``: key -> value, in ``by`` order)."""

    key: dict[str, str]
    members: list[Call]

    @property
    def label(self) -> str:
        return " ".join(self.key.values()) or "all calls"


def group(calls: Sequence[Call], by: Sequence[str]) -> list[Group]:
    """The calls by the values of the ``by`` keys, in one pass; groups in natural order of their keys."""
    members: dict[tuple[str, ...], list[Call]] = defaultdict(list)
    for call in calls:
        members[tuple(call.keys[name] for name in by)].append(call)
    ordered = sorted(members, key=lambda key: [_natural(value) for value in key])
    return [Group(dict(zip(by, key, strict=True)), members[key]) for key in ordered]


def _natural(text: str) -> list[tuple[int, int | str]]:
    """Sort key with numbers compared as numbers: ``host:8080`` before ``host:10000``."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part]


@dataclass(frozen=True)
class PhaseStats:
    name: str
    dist: Dist
    #: This phase's time over the group's total call time.
    share: float

    def as_dict(self) -> dict[str, float | int]:
        return {**self.dist.as_dict(), "share": self.share}


def phases_dict(phases: Sequence[PhaseStats]) -> dict[str, dict[str, float | int]]:
    """The phases of a group as JSON: name -> the distribution and the share."""
    return {phase.name: phase.as_dict() for phase in phases}


@dataclass
class SlowCalls:
    rule: str  # "p95" or "threshold"
    threshold: float
    calls: int
    dominant: str | None = None
    dominant_calls: int = 0
    #: Median, over the slow calls, of the dominant phase's share of the call (NaN when unknown).
    median_share: float = math.nan
    by_phase: dict[str, int] = field(default_factory=dict)


@dataclass
class GroupStats:
    group: Group
    errors: dict[str, int]
    #: ``e2e``: every call's duration.
    duration: Dist
    phases: list[PhaseStats]
    http: list[PhaseStats]
    consumer_time: Dist | None
    slow: SlowCalls
    #: Every metric of :mod:`.metric_table` by name, over the calls its table entry counts.
    metrics: dict[str, Dist | None]

    @property
    def ttft(self) -> Dist | None:
        return self.metrics["ttft"]

    @property
    def ttft_answer(self) -> Dist | None:
        return self.metrics["ttft_answer"]

    @property
    def reasoning(self) -> Dist | None:
        return self.metrics["reasoning"]

    @property
    def ttfc(self) -> Dist | None:
        return self.metrics["ttfc"]

    @property
    def tpot(self) -> Dist | None:
        return self.metrics["tpot"]

    @property
    def tokens_per_s(self) -> Dist | None:
        return self.metrics["tokens_per_s"]

    @property
    def key(self) -> dict[str, str]:
        return self.group.key

    @property
    def label(self) -> str:
        return self.group.label

    @property
    def calls(self) -> int:
        return len(self.group.members)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


def summarize(groups: Sequence[Group], slow_threshold: float | None = None) -> list[GroupStats]:
    """Each group's numbers; slow calls take at least ``slow_threshold`` (default: the group's p95)."""
    return [_group_stats(group, slow_threshold) for group in groups]


def _phase_stats(
    calls: Sequence[Call], attribute: str, order: Sequence[str], total: float
) -> list[PhaseStats]:
    values: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        for name, seconds in getattr(call, attribute).items():
            values[name].append(seconds)
    names = sorted(values, key=lambda name: phase_sort_key(name, order))
    result = []
    for name in names:
        dist = Dist.of(values[name])
        if dist is not None:
            result.append(PhaseStats(name, dist, sum(values[name]) / total if total > 0 else 0.0))
    return result


def _group_stats(group: Group, slow_threshold: float | None) -> GroupStats:
    calls = group.members
    metrics = {metric.name: metric.dist(calls) for metric in METRICS}
    duration = metrics["e2e"]
    assert duration is not None  # a group has at least one call
    total = sum(call.duration for call in calls)
    errors = Counter(call.error_type for call in calls if call.error_type is not None)
    return GroupStats(
        group=group,
        errors=dict(sorted(errors.items(), key=lambda item: (-item[1], item[0]))),
        duration=duration,
        phases=_phase_stats(calls, "phases", PHASES, total),
        http=_phase_stats(calls, "http", HTTP_PHASES, total),
        consumer_time=Dist.of(call.consumer_time for call in calls if call.consumer_time is not None),
        slow=slow_calls(calls, duration, slow_threshold),
        metrics=metrics,
    )


def throughput(calls: Sequence[Call]) -> float | None:
    """Output tokens per second: the successful calls' output tokens over the wall time from the first
    call's start to the last call's end (bench's throughput, and its chart against the load level)."""
    if not calls:
        return None
    tokens = sum(call.output_tokens or 0 for call in calls if call.error_type is None)
    wall = (max(call.end_ns for call in calls) - min(call.start_ns for call in calls)) / 1e9
    return tokens / wall if wall > 0 and tokens else None


def slow_calls(calls: Sequence[Call], duration: Dist, threshold: float | None) -> SlowCalls:
    """Slow = duration >= the group's p95 (always at least the slowest call), or >= ``threshold``.

    The dominant phase is the one that is the largest phase of the most slow calls (ties: the larger
    median share, then call order)."""
    rule, limit = ("p95", duration.p95) if threshold is None else ("threshold", threshold)
    slow = [call for call in calls if call.duration >= limit]
    result = SlowCalls(rule, limit, len(slow))
    winners = [(call, found) for call in slow if (found := call.dominant()) is not None]
    if not winners:
        return result
    counts = Counter(phase for _, (phase, _) in winners)

    def median_share(phase: str) -> float:
        shares = [call.phases.get(phase, 0.0) / call.duration for call, _ in winners if call.duration > 0]
        if not shares or all(not call.phases for call, _ in winners):
            return math.nan
        return statistics.median(shares)

    dominant = max(
        counts, key=lambda phase: (counts[phase], _nan_low(median_share(phase)), -phase_rank(phase))
    )
    result.dominant, result.dominant_calls = dominant, counts[dominant]
    result.median_share = median_share(dominant)
    result.by_phase = dict(sorted(counts.items(), key=lambda item: (-item[1], phase_rank(item[0]))))
    return result


def _nan_low(value: float) -> float:
    return -1.0 if math.isnan(value) else value

"""The numbers of ``openai-latency report``: spans -> calls -> per-group percentiles and dominant phases.

Percentiles use linear interpolation between the closest ranks (numpy's default ``linear``, Hyndman
and Fan type 7, ``statistics.quantiles(method="inclusive")``): for n sorted values and q in [0, 1],
h = (n - 1) q and the result is ``x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])``.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .otlp_json import Span, finite

PHASE_KEY = "openai_latency.phase"
PHASE_PREFIX = "openai_latency.phase."
_PREFIX_LENGTH = len(PHASE_PREFIX)
#: Phases of an operation (direct children), in the order of a call.
PHASES = ("request_build", "network_wait", "retry_backoff", "first_token", "stream_drain", "response_read")
#: Sub-phases of network_wait (its children), in order.
HTTP_PHASES = ("pool_wait", "dns", "connect", "tls", "send", "server_wait")
GROUP_KEYS = ("endpoint", "model", "operation", "provider", "service", "target", "load")  # Call.keys order
#: Set on every span of an ``openai-latency bench`` run: the target's name and the load level.
BENCH_TARGET = "openai_latency.bench.target"
BENCH_LOAD = "openai_latency.bench.load"
#: Set by bench on a streamed call whose server sent no usage: the content chunks the client received
#: (the call's output tokens, estimated; ``openai_latency.usage.estimated`` says so).
BENCH_OUTPUT_CHUNKS = "openai_latency.bench.output_chunks"
QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))


class Interval(NamedTuple):
    """One phase span of a call: epoch nanoseconds; depth 0 = a phase, 1 = an http.* sub-phase."""

    phase: str
    start_ns: int
    end_ns: int
    depth: int


@dataclass(slots=True)
class Call:
    """One operation span with its phases summed per name (seconds)."""

    name: str
    #: Shared by the calls with the same keys: read only.
    keys: dict[str, str]
    duration: float
    phases: dict[str, float]
    http: dict[str, float]
    error_type: str | None
    ttft: float | None
    tpot: float | None
    consumer_time: float | None
    dominant_attribute: str | None
    start_ns: int = 0
    end_ns: int = 0
    trace_id: str = ""
    request_id: str | None = None
    category: str | None = None
    #: ``error.type`` of each retried attempt, in order (``openai_latency.retry.error_types``).
    retry_reasons: tuple[str, ...] = ()
    ttfc: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    usage_estimated: bool = False
    stream: bool = False
    end_state: str | None = None
    #: The phase spans in start order (empty when collected with ``intervals=False`` or without
    #: phase spans): what a waterfall draws.
    intervals: list[Interval] = field(default_factory=list)

    def dominant(self) -> tuple[str, float] | None:
        """(phase with the largest time, its share of the call); the span's own answer without phases."""
        if self.phases:
            phase = max(self.phases, key=lambda name: (self.phases[name], -_order(name)))
            return phase, (self.phases[phase] / self.duration if self.duration > 0 else 0.0)
        if self.dominant_attribute:
            return self.dominant_attribute, math.nan
        return None


@dataclass
class Collected:
    calls: list[Call]
    #: Names of spans that are neither operations nor their phases (for "no operation spans" errors).
    other_names: Counter[str] = field(default_factory=Counter)
    phase_spans: int = 0


def _order(phase: str) -> int:
    return PHASES.index(phase) if phase in PHASES else len(PHASES)


def is_operation(attributes: dict[str, Any]) -> bool:
    """An operation by its own attributes (a span with phase children is one too)."""
    if "gen_ai.operation.name" in attributes or "openai_latency.dominant_phase" in attributes:
        return True
    return any(key.startswith(PHASE_PREFIX) for key in attributes)


def ours(attributes: dict[str, Any]) -> bool:
    if "gen_ai.operation.name" in attributes or PHASE_KEY in attributes:
        return True
    return any(key.startswith(_OUR_PREFIXES) for key in attributes)


_OUR_PREFIXES = ("gen_ai.", "openai_latency.")


_KEYS: dict[tuple[Any, ...], dict[str, str]] = {}
_NAMES: dict[str, str] = {}


def new_call(span: Span, attribute_phases: bool = True) -> Call:
    """The call of an operation span from its own attributes; phases from its ``openai_latency.phase.*``
    attributes when ``attribute_phases`` (replaced by its phase spans when they are found)."""
    attributes = span.attributes
    get = attributes.get
    phases: dict[str, float] = {}
    for key in attributes if attribute_phases else ():
        if key.startswith(PHASE_PREFIX):
            number = finite(attributes[key])
            if number is not None:
                phases[key[_PREFIX_LENGTH:]] = number
    raw = (
        get("server.address"),
        get("server.port"),
        get("gen_ai.request.model") or get("gen_ai.response.model"),
        get("gen_ai.operation.name") or span.name,
        get("gen_ai.provider.name"),
        span.service,
        get(BENCH_TARGET),
        get(BENCH_LOAD),
    )
    try:
        keys = _KEYS.get(raw)  # the same attribute values, the same keys: computed once
        if keys is None:
            keys = _KEYS.setdefault(raw, _keys(*raw))
    except TypeError:  # an unhashable (array) value where a string belongs
        keys = _keys(*raw)
    error = get("error.type")
    if error is None and span.status_error:
        error = "_OTHER"
    dominant = get("openai_latency.dominant_phase")
    request_id = get("openai_latency.request_id")
    output_tokens = get("gen_ai.usage.output_tokens")
    if output_tokens is None:
        output_tokens = get(BENCH_OUTPUT_CHUNKS)
    return Call(
        name=_NAMES.setdefault(span.name, span.name),
        keys=keys,
        duration=span.duration_s,
        phases=phases,
        http={},
        error_type=None if error is None else _shared(str(error)),
        ttft=finite(get("openai_latency.time_to_first_token")),
        tpot=finite(get("openai_latency.time_per_output_token")),
        consumer_time=finite(get("openai_latency.stream.consumer_time")),
        dominant_attribute=_shared(dominant) if isinstance(dominant, str) else None,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        trace_id=span.trace_id,
        request_id=request_id if request_id is None or request_id.__class__ is str else str(request_id),
        category=_shared(_text(get("openai_latency.error.category"))),
        retry_reasons=_texts(get("openai_latency.retry.error_types")),
        ttfc=finite(get("gen_ai.response.time_to_first_chunk")),
        input_tokens=_int(get("gen_ai.usage.input_tokens")),
        output_tokens=_int(output_tokens),
        cached_tokens=_int(get("gen_ai.usage.cache_read.input_tokens")),
        usage_estimated=get("openai_latency.usage.estimated") is True,
        stream=get("gen_ai.request.stream") is True,
        end_state=_shared(_text(get("openai_latency.stream.end_state"))),
    )


def _keys(
    address: Any, port: Any, model: Any, operation: Any, provider: Any, service: Any, target: Any, load: Any
) -> dict[str, str]:
    endpoint = f"{address}:{port}" if address and port not in (None, "") else str(address or "-")
    values = (endpoint, str(model or "-"), str(operation), str(provider or "-"), service or "-")
    return dict(zip(GROUP_KEYS, (*values, str(target or "-"), str(load or "-")), strict=True))


def _shared(text: str | None) -> str | None:
    """One string object for the same text across calls (a few distinct values, many calls)."""
    return None if text is None else _NAMES.setdefault(text, text)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, (list, tuple)) else ()


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():  # OTLP JSON's intValue is a string
        return int(value)
    return None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (see the module docstring)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    h = (len(sorted_values) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (h - low) * (sorted_values[high] - sorted_values[low])


@dataclass(frozen=True)
class Dist:
    n: int
    p50: float
    p95: float
    p99: float
    min: float
    max: float
    mean: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Dist | None:
        ordered = sorted(values)
        if not ordered:
            return None
        p50, p95, p99 = (percentile(ordered, q) for _, q in QUANTILES)
        return cls(len(ordered), p50, p95, p99, ordered[0], ordered[-1], statistics.fmean(ordered))

    def as_dict(self) -> dict[str, float | int]:
        return {
            "n": self.n, "p50": self.p50, "p95": self.p95, "p99": self.p99,
            "min": self.min, "max": self.max, "mean": self.mean,
        }  # fmt: skip


@dataclass(frozen=True)
class PhaseStats:
    name: str
    dist: Dist
    #: This phase's time over the group's total call time.
    share: float


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
    key: dict[str, str]
    calls: int
    errors: dict[str, int]
    duration: Dist
    phases: list[PhaseStats]
    http: list[PhaseStats]
    ttft: Dist | None
    tpot: Dist | None
    consumer_time: Dist | None
    slow: SlowCalls

    @property
    def label(self) -> str:
        return " ".join(self.key.values()) or "all calls"

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


def summarize(
    calls: Sequence[Call], by: Sequence[str], slow_threshold: float | None = None
) -> list[GroupStats]:
    groups: dict[tuple[str, ...], list[Call]] = defaultdict(list)
    for call in calls:
        groups[tuple(call.keys[name] for name in by)].append(call)
    ordered = sorted(groups, key=lambda key: [_natural(value) for value in key])
    return [_group(dict(zip(by, key, strict=True)), groups[key], slow_threshold) for key in ordered]


def _natural(text: str) -> list[tuple[int, int | str]]:
    """Sort key with numbers compared as numbers: ``host:8080`` before ``host:10000``."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part]


def _phase_stats(
    calls: Sequence[Call], attribute: str, order: Sequence[str], total: float
) -> list[PhaseStats]:
    values: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        for name, seconds in getattr(call, attribute).items():
            values[name].append(seconds)
    names = sorted(values, key=lambda name: (order.index(name) if name in order else len(order), name))
    result = []
    for name in names:
        dist = Dist.of(values[name])
        if dist is not None:
            result.append(PhaseStats(name, dist, sum(values[name]) / total if total > 0 else 0.0))
    return result


def _group(key: dict[str, str], calls: list[Call], slow_threshold: float | None) -> GroupStats:
    duration = Dist.of(call.duration for call in calls)
    assert duration is not None  # a group has at least one call
    total = sum(call.duration for call in calls)
    errors = Counter(call.error_type for call in calls if call.error_type is not None)
    return GroupStats(
        key=key,
        calls=len(calls),
        errors=dict(sorted(errors.items(), key=lambda item: (-item[1], item[0]))),
        duration=duration,
        phases=_phase_stats(calls, "phases", PHASES, total),
        http=_phase_stats(calls, "http", HTTP_PHASES, total),
        ttft=Dist.of(call.ttft for call in calls if call.ttft is not None),
        tpot=Dist.of(call.tpot for call in calls if call.tpot is not None),
        consumer_time=Dist.of(call.consumer_time for call in calls if call.consumer_time is not None),
        slow=slow_calls(calls, duration, slow_threshold),
    )


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

    dominant = max(counts, key=lambda phase: (counts[phase], _nan_low(median_share(phase)), -_order(phase)))
    result.dominant, result.dominant_calls = dominant, counts[dominant]
    result.median_share = median_share(dominant)
    result.by_phase = dict(sorted(counts.items(), key=lambda item: (-item[1], _order(item[0]))))
    return result


def _nan_low(value: float) -> float:
    return -1.0 if math.isnan(value) else value

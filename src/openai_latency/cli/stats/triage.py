"""Why did the failed and the slow calls go wrong? Each call of a group lands in at most one bucket.

The rule of thumb of people who read LLM latency logs, made precise (first match wins):

==================  ============================================================================
``cancelled``       the caller gave up (``error.category`` ``cancelled``): not a failure of the
                    endpoint, counted apart
``mid_stream``      the stream failed after it had started (``stream_error``, or an error after
                    the first token): the endpoint broke off
``rate_limited``    failed with ``rate_limit``/``quota``, or succeeded only after retries that a
                    429 caused; the backoff time spent is summed
``fast_failure``    ``auth``, ``permission``, ``not_found``, ``bad_request``, ``context_length``,
                    or any other failure in under :data:`FAST_FAILURE_S`: credentials or
                    configuration
``slow_failure``    ``timeout``, ``connection`` or any other failure after that, or one that took
                    at least :data:`NEAR_TIMEOUT` of the client timeout: network or queue
``server_error``    ``server`` (5xx) that was not fast: the provider failed
``slow_success``    succeeded, but took at least the group's slow limit (``--slow-threshold``, or
                    else clearly apart from the group's p95: :func:`slow_limit`): named by its
                    dominant phase
==================  ============================================================================
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..spans.calls import Call
from .percentiles import Dist

#: A failure faster than this never waited for a model: credentials or configuration.
FAST_FAILURE_S: Final = 0.100
#: A failure that took at least this share of the client timeout ran into it.
NEAR_TIMEOUT: Final = 0.9
#: Example request ids kept per bucket.
EXAMPLES: Final = 3

CONFIG_CATEGORIES: Final = frozenset({"auth", "permission", "not_found", "bad_request", "context_length"})
RATE_CATEGORIES: Final = frozenset({"rate_limit", "quota"})
SLOW_CATEGORIES: Final = frozenset({"timeout", "connection"})

#: Bucket name -> (title, what it usually means), in the order they are printed.
BUCKETS: Final[dict[str, tuple[str, str]]] = {
    "fast_failure": ("fast failures", "credentials or configuration"),
    "slow_failure": ("slow failures", "network or queue"),
    "rate_limited": ("rate limited", "quota or rate limit: slow down, or raise the limit"),
    "mid_stream": ("mid-stream failures", "the endpoint broke off a started stream"),
    "server_error": ("server errors", "the provider failed (5xx)"),
    "slow_success": ("slow successes", "succeeded, slowly: see the dominant phase"),
    "cancelled": ("cancelled", "the caller gave up"),
}


@dataclass
class Bucket:
    name: str
    calls: int = 0
    #: error.type of failures; the dominant phase of slow successes and rate-limited successes.
    kinds: Counter[str] = field(default_factory=Counter)
    #: Request ids of the slowest calls of the bucket (slowest first).
    examples: list[str] = field(default_factory=list)
    #: Time spent in ``retry_backoff`` by the calls of this bucket (seconds).
    backoff_s: float = 0.0
    retries: int = 0

    @property
    def title(self) -> str:
        return BUCKETS[self.name][0]

    @property
    def meaning(self) -> str:
        return BUCKETS[self.name][1]

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "meaning": self.meaning,
            "kinds": dict(self.kinds.most_common()),
            "examples": self.examples,
            "retries": self.retries,
            "backoff_s": self.backoff_s,
        }


#: Without ``--slow-threshold``, a slow success is above the p95 by at least this share of it...
APART_SHARE: Final = 0.2
#: ... and at least this long, and at least the p95's distance from the median.
APART_S: Final = 0.005


def slow_limit(duration: Dist, threshold: float | None) -> float:
    """Where slow successes start: ``threshold`` when given, else clearly apart from the p95.

    The slowest call of a healthy, uniform run is above the p95 by a hair: not slow. A call is slow
    when it is above the p95 by 20 % of it, by 5 ms, and by the p95's own distance from the median
    (a wide distribution needs a wider gap)."""
    if threshold is not None:
        return threshold
    return duration.p95 + max(APART_SHARE * duration.p95, APART_S, duration.p95 - duration.p50)


def is_rate_limit_reason(reason: str) -> bool:
    """A retry reason (``openai_latency.retry.reason``) that says "rate limited"."""
    return reason == "429" or "rate_limit" in reason or "quota" in reason


def classify(call: Call, slow_limit: float | None, client_timeout: float | None) -> str | None:
    """The bucket of one call, or None (a normal, successful call)."""
    category = call.category
    if call.error_type is None:
        if any(is_rate_limit_reason(reason) for reason in call.retry_reasons):
            return "rate_limited"
        if slow_limit is not None and call.duration >= slow_limit:
            return "slow_success"
        return None
    if category == "cancelled":
        return "cancelled"
    if category == "stream_error" or (
        call.stream and ("stream_drain" in call.phases or "reasoning" in call.phases)
    ):
        return "mid_stream"
    if category in RATE_CATEGORIES:
        return "rate_limited"
    if category in CONFIG_CATEGORIES:
        return "fast_failure"
    near_timeout = client_timeout is not None and call.duration >= NEAR_TIMEOUT * client_timeout
    if not near_timeout and call.duration < FAST_FAILURE_S:
        return "fast_failure"
    if category == "server" and not near_timeout:
        return "server_error"
    return "slow_failure"


def triage(
    calls: Sequence[Call], slow_limit: float | None, client_timeout: float | None = None
) -> dict[str, Bucket]:
    """The non-empty buckets of these calls, in :data:`BUCKETS` order."""
    buckets = {name: Bucket(name) for name in BUCKETS}
    slowest: dict[str, list[Call]] = {name: [] for name in BUCKETS}
    for call in calls:
        name = classify(call, slow_limit, client_timeout)
        if name is None:
            continue
        bucket = buckets[name]
        bucket.calls += 1
        bucket.retries += len(call.retry_reasons)
        bucket.backoff_s += call.phases.get("retry_backoff", 0.0)
        bucket.kinds[_kind(call, name)] += 1
        slowest[name].append(call)
    for name, members in slowest.items():
        members.sort(key=lambda call: (-call.duration, example_id(call)))
        buckets[name].examples = [example_id(call) for call in members[:EXAMPLES]]
    return {name: bucket for name, bucket in buckets.items() if bucket.calls}


def _kind(call: Call, bucket: str) -> str:
    if call.error_type is not None:
        return call.error_type
    if bucket == "rate_limited":
        return "succeeded after backoff"
    dominant = call.dominant()
    return dominant[0] if dominant else "-"


def example_id(call: Call) -> str:
    """The request id the provider logged (what its support asks for), else the trace id."""
    if call.request_id:
        return call.request_id
    return f"trace {call.trace_id}" if call.trace_id else "-"

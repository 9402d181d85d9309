"""cli/stats/triage.py: each failed or slow call in exactly one bucket, first rule wins."""

from __future__ import annotations

from typing import Any

from openai_latency.cli.spans.calls import Call
from openai_latency.cli.stats.percentiles import Dist
from openai_latency.cli.stats.triage import (
    BUCKETS,
    classify,
    example_id,
    is_rate_limit_reason,
    slow_limit,
    triage,
)

KEYS = {"endpoint": "e", "model": "m", "target": "-", "load": "-"}


def call(duration: float, error: str | None = None, category: str | None = None, **fields: Any) -> Call:
    phases = fields.pop("phases", {})
    return Call(
        "chat m", KEYS, duration, phases, {}, error, None, None, None, None, category=category, **fields
    )


def test_failures_by_category_and_duration() -> None:
    def bucket(c: Call) -> str | None:
        return classify(c, None, 10.0)

    assert bucket(call(0.5, "CancelledError", "cancelled")) == "cancelled"
    assert bucket(call(0.5, "APIError", "stream_error")) == "mid_stream"
    assert bucket(call(0.5, "APIError", "server", stream=True, phases={"stream_drain": 0.1})) == "mid_stream"
    assert bucket(call(0.5, "RateLimitError", "rate_limit")) == "rate_limited"
    assert bucket(call(0.5, "RateLimitError", "quota")) == "rate_limited"
    assert bucket(call(5.0, "AuthenticationError", "auth")) == "fast_failure"  # configuration, however long
    assert bucket(call(0.05, "InternalServerError", "server")) == "fast_failure"  # under FAST_FAILURE_S
    assert bucket(call(0.5, "InternalServerError", "server")) == "server_error"
    assert bucket(call(9.0, "InternalServerError", "server")) == "slow_failure"  # 90 % of the timeout
    assert bucket(call(0.5, "APITimeoutError", "timeout")) == "slow_failure"
    assert bucket(call(0.5, "APIConnectionError", "connection")) == "slow_failure"


def test_successes_are_rate_limited_after_a_429_retry_slow_past_the_limit_else_none() -> None:
    assert classify(call(0.1, retry_reasons=("429",)), None, None) == "rate_limited"
    assert classify(call(0.1, retry_reasons=("InternalServerError",)), None, None) is None
    assert classify(call(2.0), 2.0, None) == "slow_success"
    assert classify(call(1.9), 2.0, None) is None
    assert classify(call(99.0), None, None) is None  # no limit: nothing is slow
    assert is_rate_limit_reason("429") and is_rate_limit_reason("rate_limit_exceeded")
    assert is_rate_limit_reason("insufficient_quota") and not is_rate_limit_reason("500")


def test_the_slow_limit_is_clearly_apart_from_the_p95() -> None:
    wide = Dist(100, p50=0.5, p95=1.0, p99=1.2, min=0.1, max=2.0, mean=0.6)
    assert slow_limit(wide, None) == 1.5  # p95 + its distance from the median (above 20 % and 5 ms)
    narrow = Dist(100, p50=0.75, p95=0.8, p99=0.9, min=0.7, max=1.0, mean=0.76)
    assert slow_limit(narrow, None) == 0.8 + 0.2 * 0.8  # 20 % of the p95
    tiny = Dist(100, p50=0.001, p95=0.002, p99=0.003, min=0.001, max=0.004, mean=0.0015)
    assert slow_limit(tiny, None) == 0.002 + 0.005  # at least 5 ms
    assert slow_limit(wide, 0.25) == 0.25  # --slow-threshold


def test_triage_counts_kinds_retries_backoff_and_keeps_the_slowest_examples() -> None:
    calls = [
        call(0.02, "AuthenticationError", "auth", request_id="req-1"),
        call(0.03, "AuthenticationError", "auth", request_id="req-2"),
        call(0.01, "NotFoundError", "not_found", trace_id="abc"),
        call(0.04, "BadRequestError", "bad_request"),
        call(1.0, retry_reasons=("429", "429"), phases={"retry_backoff": 0.75}, request_id="req-5"),
        call(3.0, phases={"first_token": 2.0, "stream_drain": 1.0}, request_id="req-6"),
        call(0.2),
    ]
    buckets = triage(calls, 2.5)
    assert list(buckets) == ["fast_failure", "rate_limited", "slow_success"]  # BUCKETS order, non-empty
    assert list(BUCKETS)[:3] == ["fast_failure", "slow_failure", "rate_limited"]
    fast = buckets["fast_failure"]
    assert fast.calls == 4
    assert dict(fast.kinds) == {"AuthenticationError": 2, "NotFoundError": 1, "BadRequestError": 1}
    assert fast.examples == ["-", "req-2", "req-1"]  # slowest first, at most EXAMPLES
    limited = buckets["rate_limited"]
    assert (limited.calls, limited.retries, limited.backoff_s) == (1, 2, 0.75)
    assert dict(limited.kinds) == {"succeeded after backoff": 1}
    assert dict(buckets["slow_success"].kinds) == {"first_token": 1}  # its dominant phase
    assert buckets["slow_success"].as_dict() == {
        "calls": 1,
        "meaning": "succeeded, slowly: see the dominant phase",
        "kinds": {"first_token": 1},
        "examples": ["req-6"],
        "retries": 0,
        "backoff_s": 0.0,
    }
    assert triage([call(0.2)], 2.5) == {}


def test_an_example_is_the_providers_request_id_else_the_trace() -> None:
    assert example_id(call(0.1, request_id="req-9", trace_id="abc")) == "req-9"
    assert example_id(call(0.1, trace_id="abc")) == "trace abc"
    assert example_id(call(0.1)) == "-"

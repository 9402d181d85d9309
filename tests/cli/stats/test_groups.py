"""cli/stats/groups.py: calls -> groups (natural order) -> each group's numbers, exact on small data."""

from __future__ import annotations

from typing import Any

from openai_latency.cli.spans.calls import Call
from openai_latency.cli.stats.groups import DEFAULT_BY, default_by, group, slow_calls, summarize, throughput
from openai_latency.cli.stats.percentiles import Dist


def call(keys: dict[str, str], duration: float, error: str | None = None, **fields: Any) -> Call:
    phases = fields.pop("phases", {})
    full = {"endpoint": "e", "model": "m", "target": "-", "load": "-", **keys}
    return Call("chat m", full, duration, phases, {}, error, None, None, None, None, **fields)


def test_groups_come_in_the_natural_order_of_their_keys() -> None:
    calls = [call({"endpoint": f"host:{port}"}, 0.1) for port in (10000, 8080, 9000, 8080)]
    groups = group(calls, ["endpoint"])
    assert [g.label for g in groups] == ["host:8080", "host:9000", "host:10000"]  # 8080 before 10000
    assert [len(g.members) for g in groups] == [2, 1, 1]
    assert groups[0].key == {"endpoint": "host:8080"}
    (everything,) = group(calls, [])
    assert everything.label == "all calls" and len(everything.members) == 4


def test_the_default_grouping_is_benchs_target_and_load_else_endpoint_and_model() -> None:
    one = [call({"target": "a", "load": "c=1"}, 0.1), call({"target": "b", "load": "c=1"}, 0.1)]
    assert default_by(one) == ["target"]
    two = [*one, call({"target": "a", "load": "c=4"}, 0.1)]
    assert default_by(two) == ["target", "load"]
    assert default_by([*one, call({}, 0.1)]) == list(DEFAULT_BY) == ["endpoint", "model"]
    assert default_by([]) == ["endpoint", "model"]


def test_a_groups_numbers() -> None:
    calls = [
        call({}, 1.0, phases={"network_wait": 0.25, "first_token": 0.5}),
        call({}, 3.0, "APITimeoutError", phases={"network_wait": 2.0}),
        call({}, 2.0, "RateLimitError", phases={"network_wait": 0.75}),
        call({}, 2.0, "APITimeoutError"),
    ]
    (stats,) = summarize(group(calls, []))
    assert stats.calls == 4 and stats.error_count == 3
    assert stats.errors == {"APITimeoutError": 2, "RateLimitError": 1}  # by count, then name
    # p95: 2 + 0.85 (3 - 2), 0.85 being (4 - 1) * 0.95 - 2 in binary floating point
    p95 = 2.8499999999999996
    assert stats.duration == Dist(4, 2.0, p95, 2.9699999999999998, 1.0, 3.0, 2.0)
    assert [(p.name, p.dist.n, p.dist.p50, p.share) for p in stats.phases] == [
        ("network_wait", 3, 0.75, 3.0 / 8.0),  # of 8 s of calls
        ("first_token", 1, 0.5, 0.5 / 8.0),
    ]
    assert stats.ttft is None  # no call has a first token
    assert stats.slow.rule == "p95" and stats.slow.threshold == p95 and stats.slow.calls == 1
    assert stats.slow.dominant == "network_wait" and stats.slow.dominant_calls == 1


def test_slow_calls_by_threshold_name_the_phase_most_of_them_spent_longest_in() -> None:
    calls = [
        call({}, 2.0, phases={"first_token": 1.5, "stream_drain": 0.5}),
        call({}, 4.0, phases={"first_token": 1.0, "stream_drain": 3.0}),
        call({}, 3.0, phases={"first_token": 2.0, "stream_drain": 1.0}),
        call({}, 0.5, phases={"stream_drain": 0.5}),
    ]
    duration = Dist.of(c.duration for c in calls)
    assert duration is not None
    slow = slow_calls(calls, duration, 2.0)
    assert (slow.rule, slow.threshold, slow.calls) == ("threshold", 2.0, 3)
    assert (slow.dominant, slow.dominant_calls) == ("first_token", 2)
    assert slow.median_share == 0.6666666666666666  # of 1.5/2, 1/4, 2/3: the median
    assert slow.by_phase == {"first_token": 2, "stream_drain": 1}


def test_throughput_is_the_successful_calls_tokens_over_the_wall_time() -> None:
    calls = [
        call({}, 1.0, output_tokens=60, start_ns=0, end_ns=1_000_000_000),
        call({}, 1.5, output_tokens=40, start_ns=500_000_000, end_ns=2_000_000_000),
        call({}, 0.5, "APIError", output_tokens=500, start_ns=1_000_000_000, end_ns=1_500_000_000),
    ]
    assert throughput(calls) == 50.0  # 100 tokens in 2 s; the failed call's tokens do not count
    assert throughput([]) is None
    assert throughput([call({}, 1.0, start_ns=0, end_ns=10)]) is None  # no tokens

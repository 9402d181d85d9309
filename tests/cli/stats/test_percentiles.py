"""cli/stats/percentiles.py: type 7 percentiles (linear between the closest ranks) and a distribution's
summary, on values whose results are exact in binary floating point."""

from __future__ import annotations

import math
import statistics

import pytest

from openai_latency.cli.stats.percentiles import Dist, dist_dict, json_number, percentile


def test_a_percentile_interpolates_between_the_closest_ranks() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5  # h = 1.5: halfway from 2 to 3
    assert percentile([0.0, 8.0], 0.75) == 6.0
    assert percentile([10.0, 20.0, 30.0, 40.0, 50.0], 0.25) == 20.0  # h = 1: a rank itself
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([1.0, 5.0, 9.0], 0.0) == 1.0
    assert percentile([1.0, 5.0, 9.0], 1.0) == 9.0


def test_a_percentile_is_numpys_linear_and_statistics_inclusive() -> None:
    values = [float(v) for v in range(101)]  # h = 100 q: every percentile is a rank
    assert [percentile(values, q) for q in (0.5, 0.95, 0.99)] == [50.0, 95.0, 99.0]
    odd = [0.5, 1.5, 4.0, 16.0]
    cuts = statistics.quantiles(odd, n=4, method="inclusive")
    assert [percentile(odd, q) for q in (0.25, 0.5, 0.75)] == cuts == [1.25, 2.75, 7.0]


def test_no_values_have_no_percentile() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)


def test_a_distribution_is_its_count_percentiles_extremes_and_mean() -> None:
    dist = Dist.of(float(v) for v in reversed(range(101)))  # any order: Dist.of sorts
    assert dist == Dist(n=101, p50=50.0, p95=95.0, p99=99.0, min=0.0, max=100.0, mean=50.0)
    assert dist.as_dict() == {
        "n": 101,
        "p50": 50.0,
        "p95": 95.0,
        "p99": 99.0,
        "min": 0.0,
        "max": 100.0,
        "mean": 50.0,
    }
    assert Dist.of([2.0]) == Dist(1, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0)
    assert Dist.of([]) is None
    assert (
        dist_dict(None) is None
        and dist_dict(Dist.of([2.0])) == Dist(1, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0).as_dict()
    )


def test_json_numbers_have_no_nan() -> None:
    assert json_number(math.nan) is None
    assert json_number(None) is None
    assert json_number(0.25) == 0.25

"""cli/stats/bootstrap.py: percentile-bootstrap intervals, seeded; exact where the data leave the
resamples no freedom (tests/cli/bench/test_verdict.py checks them against a brute-force bootstrap)."""

from __future__ import annotations

import random

from openai_latency.cli.stats.bootstrap import (
    RESAMPLES,
    Interval,
    binomial,
    quantile_difference,
    quantile_interval,
    rate_difference,
    resampled_quantile,
)


def test_an_interval_excludes_zero_when_both_ends_are_on_one_side() -> None:
    assert Interval(1.0, 0.5, 2.0).excludes_zero
    assert Interval(-1.0, -2.0, -0.5).excludes_zero
    assert not Interval(0.1, -0.1, 0.3).excludes_zero
    assert not Interval(0.0, 0.0, 0.0).excludes_zero


def test_a_resample_of_one_value_or_of_equal_values_is_that_value() -> None:
    rng = random.Random(0)
    assert resampled_quantile(rng, [4.0], 0.95) == 4.0
    assert {resampled_quantile(rng, [2.5] * 9, q) for q in (0.5, 0.9, 0.99) for _ in range(50)} == {2.5}


def test_a_resampled_quantile_is_one_of_the_sample_or_between_two() -> None:
    rng = random.Random(0)
    values = [1.0, 2.0, 4.0, 8.0, 16.0]
    draws = [resampled_quantile(rng, values, 0.5) for _ in range(500)]
    assert min(draws) >= 1.0 and max(draws) <= 16.0
    assert set(values) & set(draws)  # h = 2: a rank, no interpolation


def test_certain_rates_give_an_interval_of_one_point() -> None:
    """Rate 0 against rate 1: every resampled difference is 1, so the interval is [1, 1]."""
    assert rate_difference((0, 10), (10, 10)) == Interval(1.0, 1.0, 1.0)
    assert rate_difference((4, 4), (0, 8)) == Interval(-1.0, -1.0, -1.0)
    same = rate_difference((5, 10), (5, 10))
    assert same.estimate == 0.0 and same.low <= 0.0 <= same.high


def test_a_shift_is_the_estimate_and_the_same_data_give_the_same_interval() -> None:
    baseline = [float(v) for v in range(1, 41)]
    current = [v + 10.0 for v in baseline]
    shifted = quantile_difference(baseline, current, 0.5)
    assert shifted.estimate == 10.0 and shifted.excludes_zero
    assert quantile_difference(baseline, current, 0.5) == shifted  # seeded: no randomness run to run
    same = quantile_difference(baseline, baseline, 0.5)
    assert same.estimate == 0.0 and same.low < 0.0 < same.high


def test_one_samples_quantile_interval_holds_its_estimate() -> None:
    values = [float(v) for v in range(1, 101)]
    interval = quantile_interval(values, 0.5)
    assert interval.estimate == 50.5
    assert interval.low <= 50.5 <= interval.high
    assert quantile_interval(values, 0.5) == interval
    assert quantile_interval([3.0] * 20, 0.9) == Interval(3.0, 3.0, 3.0)


def test_binomial_draws() -> None:
    rng = random.Random(0)
    assert binomial(rng, 0, 0.5) == 0
    assert binomial(rng, 50, 0.0) == 0
    assert binomial(rng, 50, 1.0) == 50
    draws = [binomial(rng, 1000, 0.3) for _ in range(RESAMPLES)]
    assert all(0 <= d <= 1000 for d in draws)
    mean = sum(draws) / len(draws)  # 300, sd of the mean 14.5 / sqrt(2000) = 0.32
    assert 298.0 < mean < 302.0

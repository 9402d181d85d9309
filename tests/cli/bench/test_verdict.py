"""The verdict of ``bench`` (issue 21's "Must show"), run against fake servers (run_cli), and the
bootstrap that gives its intervals, checked against a brute-force bootstrap.

No timing assertion of speed: what the servers were told differs by 200 ms, or by a 429 on every 5th
request, or not at all, and the verdict must say so."""

from __future__ import annotations

import random
import statistics
from contextlib import ExitStack
from typing import Any

import pytest

from openai_latency.cli.stats.bootstrap import (
    binomial,
    quantile_difference,
    quantile_interval,
    rate_difference,
    resampled_quantile,
)
from openai_latency.cli.stats.percentiles import percentile
from openai_latency.fake_server.records import RequestRecord
from tests.support.cli_runs import chat_records, run_cli, servers

STREAM = {"ttft-ms": 20, "chunks": 8, "chunk-delay-ms": 5}


def _bench(
    a: dict[str, object], b: dict[str, object], *extra: str, requests: int = 40
) -> tuple[dict[str, Any], str]:
    verdict, text, _ = _bench_logged(a, b, *extra, requests=requests)
    return verdict, text


def _bench_logged(
    a: dict[str, object], b: dict[str, object], *extra: str, requests: int = 40
) -> tuple[dict[str, Any], str, tuple[list[RequestRecord], list[RequestRecord]]]:
    """The verdict, its sentences, and what each server logged (its own clock)."""
    with ExitStack() as stack:
        first, second = servers(stack, a, b)
        targets = ["--target", f"a={first.base_url}", "--target", f"b={second.base_url}"]
        common = [*targets, "--model", "m", "-n", str(requests), "-c", "4", *extra]
        result = run_cli(["bench", *common, "--format", "json", "--out", "/dev/null"])
        assert result.code == 0, result.err
        logged = (chat_records(first), chat_records(second))
    (verdict,) = result.json()["verdict"]["levels"]["c=4"]
    return verdict, "\n".join(verdict["sentences"]), logged


@pytest.mark.slow
def test_a_429_on_every_5th_request_makes_p95_slower_and_p50_equal() -> None:
    verdict, text = _bench(
        {"delay-ms": 50, **STREAM}, {"delay-ms": 50, **STREAM, "every": "5:fail-attempts=1"}
    )
    assert (verdict["baseline"]["label"], verdict["current"]["label"]) == ("a", "b")
    assert verdict["current"]["backoff_calls"] == 8 and verdict["baseline"]["backoff_calls"] == 0
    for metric in ("ttft", "e2e"):
        p50, p95 = verdict["metrics"][metric]["p50"], verdict["metrics"][metric]["p95"]
        assert not p50["significant"], p50
        assert p50["ci_low"] <= 0 <= p50["ci_high"] or abs(p50["difference"]) < 0.05 * p50["baseline"]
        assert p95["significant"] and p95["ci_low"] > 0, p95
        assert p95["phases"][0]["phase"] == "retry_backoff" and p95["phases"][0]["change_s"] > 0
    assert "b vs a, time to first token: p50 equal" in text
    assert "p95" in text and "slower" in text and "because of retry_backoff" in text
    assert "8 of 40 calls on b waited on backoff after 429" in text


@pytest.mark.slow
def test_two_identical_servers_give_no_difference_detectable() -> None:
    verdict, text = _bench({"delay-ms": 50, **STREAM}, {"delay-ms": 50, **STREAM})
    assert not verdict["significant"]
    assert text.startswith("b vs a: no difference detectable with 40 and 40 requests")
    assert not any(
        e["significant"]
        for m in verdict["metrics"].values()
        for k, e in m.items()
        if k in ("p50", "p95", "rate")
    )


@pytest.mark.slow
def test_50_vs_250_ms_is_ranked_with_the_interval_containing_200_ms() -> None:
    verdict, text, (fast, slow) = _bench_logged(
        {"delay-ms": 50, **STREAM}, {"delay-ms": 250, **STREAM}, "--baseline", "b"
    )
    # --baseline b: a is the current side, 200 ms faster
    assert (verdict["baseline"]["label"], verdict["current"]["label"]) == ("b", "a")
    # 200 ms as the servers did it (their own log: request in -> headers out), which is 200 ms up to
    # their timers' overshoot; the intervals are a fraction of a millisecond wide, so they are held to
    # what the servers did, with the loopback's and the parser's share (well under 1 ms) as slack
    waited = [
        statistics.median((r.headers_sent_ns or 0) - r.received_ns for r in log) / 1e9 for log in (fast, slow)
    ]
    done = waited[0] - waited[1]
    assert done == pytest.approx(-0.200, abs=0.003)
    for metric in ("ttft", "e2e"):
        p50 = verdict["metrics"][metric]["p50"]
        assert p50["significant"] and p50["ci_low"] - 0.001 <= done <= p50["ci_high"] + 0.001, (p50, done)
        assert p50["ci_low"] - 0.003 <= -0.200 <= p50["ci_high"] + 0.003, p50
        assert p50["phases"][0]["phase"] == "network_wait"
    assert (
        "a vs b, time to first token: p50 " in text and "faster" in text and "because of network_wait" in text
    )


def test_thinking_before_the_answer_shows_in_the_time_to_first_answer_token_not_in_ttft() -> None:
    thinking = {"reasoning-tokens": 6, "reasoning-delay-ms": 25}  # ~150 ms of streamed reasoning
    # 20 requests a side: the 150 ms apart is ~50 times the requests' spread, the first tokens identical
    verdict, text = _bench({"delay-ms": 20, **STREAM}, {"delay-ms": 20, **STREAM, **thinking}, requests=20)
    ttft, answer = verdict["metrics"]["ttft"], verdict["metrics"]["ttft_answer"]
    assert answer["p50"]["significant"] and answer["p50"]["difference"] > 0.1, answer["p50"]
    # the first token (a reasoning one) comes as soon: TTFT moves by the machine's noise only, not by the
    # thinking (a loaded machine can make a few ms "significant": the sides run one after the other)
    assert abs(ttft["p50"]["difference"]) < answer["p50"]["difference"] / 5, (ttft["p50"], answer["p50"])
    assert answer["p50"]["phases"][0]["phase"] == "reasoning"
    assert "b vs a, time to first answer token: p50 " in text and "because of reasoning" in text


def test_the_table_puts_the_verdict_first_and_a_bad_baseline_is_a_usage_error() -> None:
    with ExitStack() as stack:
        first, second = servers(stack, {"delay-ms": 5, **STREAM}, {"delay-ms": 5, **STREAM})
        targets = ["--target", f"a={first.base_url}", "--target", f"b={second.base_url}", "--model", "m"]
        table = run_cli(["bench", *targets, "-n", "6"])
        bad = run_cli(["bench", *targets, "-n", "6", "--baseline", "c"])
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    # the verdict (6 calls each: "no difference detectable", or a ranking) comes before the tables
    verdict_at = next(i for i, line in enumerate(lines) if line.startswith("b vs a"))
    assert verdict_at < next(i for i, line in enumerate(lines) if line.startswith("p50 / p95 / p99")), lines
    assert "95% percentile-bootstrap intervals, 2000 resamples per side, seed 0" in table.out
    assert "differs most" not in table.out
    assert (
        bad.code == 2
        and "--baseline: no target or load level named 'c' (targets: a, b; levels: c=1)" in bad.err
    )


def test_a_sweep_of_one_target_compares_each_level_with_the_baseline_level() -> None:
    with ExitStack() as stack:
        # the fake does not queue: levels alike; a short answer (~20 ms): what is checked is which
        # level each verdict compares with whom, and where the sentences go
        (server,) = servers(stack, {"delay-ms": 5, "ttft-ms": 5, "chunks": 4, "chunk-delay-ms": 2})
        common = ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "20", "-c", "1,2,4"]
        data = run_cli([*common, "--baseline", "c=2", "--format", "json"])
        table = run_cli(common)
    assert data.code == 0 and table.code == 0, data.err + table.err
    verdict = data.json()["verdict"]
    assert all(entries == [] for entries in verdict["levels"].values())  # one target: no pair per level
    pairs = [(v["current"]["label"], v["baseline"]["label"]) for v in verdict["across_levels"]]
    assert pairs == [("c=1", "c=2"), ("c=4", "c=2")]
    assert all(v["current"]["calls"] == 20 and v["sentences"] for v in verdict["across_levels"])
    lines = table.out.splitlines()
    assert any(line.startswith("c=2 vs c=1") for line in lines) and any(
        line.startswith("c=4 vs c=1") for line in lines
    )
    assert table.out.index("c=2 vs c=1") < table.out.index("== c=1")  # first, before the levels' tables


def _brute(values: list[float], q: float, rng: random.Random) -> float:
    return percentile(sorted(rng.choice(values) for _ in values), q)


@pytest.mark.parametrize("q", [0.5, 0.95])
def test_a_resampled_quantile_has_the_distribution_of_a_real_resample(q: float) -> None:
    rng = random.Random(1)
    values = sorted(rng.lognormvariate(0, 1) for _ in range(60))
    assert len(set(values)) == 60
    fast, slow = random.Random(2), random.Random(3)
    ours = sorted(resampled_quantile(fast, values, q) for _ in range(4000))
    brute = sorted(_brute(values, q, slow) for _ in range(4000))
    for at in (0.025, 0.25, 0.5, 0.75, 0.975):
        # the same distribution: quantiles agree within the sampling noise of 4000 draws
        assert percentile(ours, at) == pytest.approx(percentile(brute, at), rel=0.06), at


def test_binomial_draws_have_the_binomial_mean_and_variance() -> None:
    rng = random.Random(4)
    for n, p in ((10, 0.3), (200, 0.05), (5000, 0.5)):
        draws = [binomial(rng, n, p) for _ in range(3000)]
        assert all(0 <= d <= n for d in draws)
        assert statistics.fmean(draws) == pytest.approx(n * p, rel=0.05)
        assert statistics.variance(draws) == pytest.approx(n * p * (1 - p), rel=0.12)


def test_intervals_are_reproducible_and_cover_the_difference() -> None:
    rng = random.Random(5)
    a = sorted(rng.gauss(0.100, 0.01) for _ in range(200))
    b = sorted(rng.gauss(0.130, 0.01) for _ in range(200))
    first, again = quantile_difference(a, b, 0.5), quantile_difference(a, b, 0.5)
    assert first == again
    assert first.low < 0.030 < first.high and first.excludes_zero
    same = quantile_difference(a, a, 0.95)
    assert same.estimate == 0 and not same.excludes_zero
    rate = rate_difference((0, 100), (20, 100))
    assert rate.estimate == pytest.approx(0.2) and rate.low > 0.08 and rate.excludes_zero


def test_one_samples_median_interval_is_a_brute_force_bootstraps() -> None:
    """benchmarks/overhead.py's estimate: the median of per-round differences with its interval."""
    rng = random.Random(6)
    values = sorted(rng.gauss(250.0, 40.0) for _ in range(120))
    ours = quantile_interval(values, 0.5)
    assert ours == quantile_interval(values, 0.5)  # seeded: the same data, the same interval
    assert ours.estimate == statistics.median(values)
    brute_rng = random.Random(7)
    brute = sorted(_brute(values, 0.5, brute_rng) for _ in range(4000))
    # the same interval within the sampling noise of 2,000 and 4,000 draws
    assert ours.low == pytest.approx(percentile(brute, 0.025), abs=3.0)
    assert ours.high == pytest.approx(percentile(brute, 0.975), abs=3.0)
    assert ours.low < ours.estimate < ours.high

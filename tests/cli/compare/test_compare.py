"""``openai-latency compare BASELINE CURRENT`` (run_cli) on the spans of real bench runs against
fake servers (issue 21's "Must show": exit 1 on a scripted +30 % TTFT, exit 0 on two runs of one server).

The two runs of a pair are made at the same time (two bench processes), so a machine that gets busier
between them cannot pass for a slower server."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from openai_latency.cli.compare.conditions import parse_condition
from openai_latency.cli.stats.bootstrap import Interval
from openai_latency.cli.stats.verdict import Estimate
from tests.support.cli_runs import Result, run_cli, servers

STREAM = {"delay-ms": 20, "chunks": 8, "chunk-delay-ms": 5}


def _bench_both(tmp_path: Path, urls: tuple[str, str], *extra: str) -> tuple[Path, Path]:
    """Baseline and current, one bench run each (at the same time), as bench --out spans and JSON."""

    def run(name: str, url: str) -> Result:
        spans = tmp_path / f"{name}.jsonl"
        return run_cli(["bench", "--target", f"api={url}", "--model", "m", "-n", "40", "-c", "4",
                        "--warmup", "2", "--out", str(spans), "--format", "json", *extra])  # fmt: skip

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(run, ("baseline", "current"), urls))
    for name, result in zip(("baseline", "current"), done, strict=True):
        assert result.code == 0, result.err
        (tmp_path / f"{name}.json").write_text(result.out)
    return tmp_path / "baseline.jsonl", tmp_path / "current.jsonl"


@pytest.mark.slow
def test_a_scripted_30_percent_slower_ttft_fails_the_gate(tmp_path: Path) -> None:
    with ExitStack() as stack:
        base, slow = servers(stack, {**STREAM, "ttft-ms": 80}, {**STREAM, "ttft-ms": 110})  # 100 -> 130 ms
        baseline, current = _bench_both(tmp_path, (base.base_url, slow.base_url))
    gate = ["--fail-if", "ttft.p50>+10%", "--fail-if", "error_rate>+1pp"]
    result = run_cli(["compare", str(baseline), str(current), *gate])
    assert result.code == 1, result.out + result.err
    failed = [line for line in result.err.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and "FAILED: ttft.p50>+10% in api: +" in failed[0], result.err
    assert "phase moved most: first_token (+" in failed[0]
    assert "ok: error_rate>+1pp in api" in result.out
    assert "current vs baseline, time to first token: p50 " in result.out and "slower" in result.out
    # the JSON says the same; and a bench JSON result stands for its --out spans
    data = run_cli(["compare", str(tmp_path / "baseline.json"), str(tmp_path / "current.json"), *gate,
                    "--format", "json"])  # fmt: skip
    assert data.code == 1, data.err
    report = data.json()
    assert report["failed"] is True and "bench result; spans" in report["baseline"]
    (entry,) = report["groups"]
    p50 = entry["verdict"]["metrics"]["ttft"]["p50"]
    assert p50["significant"] and p50["ci_low"] > 0
    assert [c["failed"] for c in entry["conditions"]] == [True, False]
    assert entry["conditions"][0]["phase_moved"] == "first_token"


@pytest.mark.slow
def test_two_runs_of_the_same_server_pass_the_gate(tmp_path: Path) -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {**STREAM, "ttft-ms": 80})
        baseline, current = _bench_both(tmp_path, (server.base_url, server.base_url))
    result = run_cli(["compare", str(baseline), str(current), "--fail-if", "ttft.p50>+10%",
                      "--fail-if", "ttft.p95>+10%", "--fail-if", "e2e.p95>+10%"])  # fmt: skip
    assert result.code == 0, result.out + result.err
    assert "FAILED" not in result.out + result.err
    assert result.out.count("ok: ") == 3


def test_inputs_that_cannot_be_compared_are_one_line(tmp_path: Path) -> None:
    bench_without_spans = tmp_path / "result.json"
    bench_without_spans.write_text(json.dumps({"tool": "openai-latency bench", "out": None, "results": []}))
    missing = run_cli(["compare", str(tmp_path / "nope.jsonl"), str(bench_without_spans)])
    assert missing.code == 1 and "baseline" in missing.err and "no such file" in missing.err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    no_spans = run_cli(["compare", str(empty), str(bench_without_spans)])
    assert no_spans.code == 1
    assert "bench result without its spans" in no_spans.err or "no operation spans" in no_spans.err
    bad = run_cli(["compare", "a", "b", "--fail-if", "ttft.p99>10"])
    assert bad.code == 2 and len(bad.err.strip().splitlines()) == 1 and "--fail-if" in bad.err


def _estimate(baseline: float, diff: float, low: float, high: float) -> Estimate:
    return Estimate("p95", baseline, baseline + diff, Interval(diff, low, high), True, None)


@pytest.mark.parametrize(
    ("text", "estimate", "holds"),
    [
        ("ttft.p95>+10%", _estimate(0.100, 0.030, 0.010, 0.050), True),
        ("ttft.p95>+10%", _estimate(0.100, 0.030, -0.010, 0.050), False),  # the interval holds 0
        ("ttft.p95>+10%", _estimate(0.100, 0.005, 0.001, 0.009), False),  # below the threshold
        ("e2e.p95 > +50ms", _estimate(1.0, 0.060, 0.020, 0.100), True),
        ("e2e.p95>0.1s", _estimate(1.0, 0.060, 0.020, 0.100), False),
        ("tpot.p95<-10%", _estimate(0.010, -0.002, -0.003, -0.001), True),
        ("tpot.p95<-10%", _estimate(0.010, 0.002, 0.001, 0.003), False),
    ],
)
def test_a_condition_holds_when_over_its_threshold_and_its_interval_excludes_zero(
    text: str, estimate: Estimate, holds: bool
) -> None:
    assert parse_condition(text).holds(estimate) is holds


def test_error_rate_conditions_are_in_percentage_points() -> None:
    condition = parse_condition("error_rate>+1pp")
    assert (condition.metric, condition.stat, condition.value) == ("error_rate", "rate", 0.01)
    rate = Estimate("rate", 0.0, 0.05, Interval(0.05, 0.01, 0.09), True, None)
    assert condition.holds(rate)

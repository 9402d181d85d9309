"""The metric table (``cli/stats/metric_table.py``) is the one place a metric's meaning is said: the
docs, ``bench --help``, ``--slo`` and the charts say what it says, and bench and report, which both
compute their numbers from it, agree on a run with every kind of call that could split them.
"""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path

import pytest

from openai_latency.cli.bench.options.parser import parse_slo
from openai_latency.cli.render.charts import chart_data
from openai_latency.cli.spans.calls import Call
from openai_latency.cli.spans.collect import collect_calls
from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats
from openai_latency.cli.stats.groups import group, summarize
from openai_latency.cli.stats.metric_table import (
    COUNTING_RULE,
    COUNTS_WORDS,
    METRIC,
    METRICS,
    SLO_METRICS,
    markdown_rows,
)
from openai_latency.cli.stats.verdict import compare
from tests.support.cli_runs import chat_records, run_cli, servers

BENCH_MD = Path(__file__).resolve().parents[3] / "docs" / "BENCH.md"


def _call(duration: float, ttft: float | None, error: str | None = None, **more: object) -> Call:
    values: dict[str, object] = {
        "name": "chat m",
        "keys": {"target": "a", "load": "-", "endpoint": "e", "model": "m"},
        "duration": duration,
        "phases": {},
        "http": {},
        "error_type": error,
        "ttft": ttft,
        "tpot": None,
        "consumer_time": None,
        "dominant_attribute": None,
        **more,
    }
    return Call(**values)  # type: ignore[arg-type]


def test_the_docs_table_is_the_metric_table() -> None:
    text = BENCH_MD.read_text(encoding="utf-8")
    missing = [row for row in markdown_rows() if row not in text]
    expected = "docs/BENCH.md's table, 'What the numbers mean', should hold these rows:\n"
    assert not missing, expected + "\n".join(missing)
    assert "| name | definition | calls counted | source |" in text


def test_bench_help_says_every_metric_and_which_calls_count() -> None:
    result = run_cli(["bench", "--help"])
    assert result.code == 0, result.err
    flat = " ".join(result.out.split())
    for metric in METRICS:
        assert f"{metric.name} {metric.help}" in flat, metric.name
    assert " ".join(COUNTING_RULE.split()) in flat


def test_slo_takes_exactly_the_bounded_metrics() -> None:
    assert SLO_METRICS == ("ttft", "ttft_sent", "ttft_answer", "reasoning", "ttfc", "tpot", "e2e")
    slo = parse_slo(",".join(f"{name}=100ms" for name in SLO_METRICS))
    assert slo.bounds == dict.fromkeys(SLO_METRICS, 0.1)
    with pytest.raises(argparse.ArgumentTypeError, match="tokens_per_s"):
        parse_slo("tokens_per_s=5")  # a rate, not a bound on a time


def test_a_stream_that_failed_after_its_first_token_counts_in_e2e_only() -> None:
    """The rule, on hand-made calls: the groups (bench's and report's numbers), the verdict and the
    charts leave a failed call's stream values out and keep its duration."""
    ok = [_call(1.0 + i / 10, 0.2 + i / 100, ttft_answer=0.3, tpot=0.01, output_tokens=10) for i in range(6)]
    broken = _call(0.5, 0.05, "httpx.RemoteProtocolError", ttft_answer=0.05, tpot=0.001, output_tokens=3)
    for metric in METRICS:
        assert (metric.of(broken) is None) == (metric.counts == "succeeded"), metric.name
    (stats,) = summarize(group([*ok, broken], ["target"]))
    assert stats.ttft is not None and stats.ttft.n == 6 and stats.ttft.min == pytest.approx(0.2)
    assert stats.tpot is not None and stats.tpot.n == 6
    assert stats.ttft_answer is not None and stats.ttft_answer.n == 6
    assert stats.duration.n == 7 and stats.duration.min == 0.5
    assert stats.metrics == {metric.name: metric.dist([*ok, broken]) for metric in METRICS}
    verdict = compare(ok, [*ok, broken], ("before", "after"))
    ttft, e2e = verdict.metric("ttft"), verdict.metric("e2e")
    assert ttft is not None and ttft.calls == (6, 6)  # the broken stream's 50 ms TTFT is not a sample
    assert e2e is not None and e2e.calls == (6, 7)
    charts = chart_data([*ok, broken])
    assert len(charts["ttft"]["data"][0]["x"]) == 6 and len(charts["e2e"]["data"][0]["x"]) == 7
    assert charts["ttft"]["title"] == f"Time to first token ({COUNTS_WORDS['succeeded']})"


def test_bench_and_report_agree_with_a_broken_stream_a_retry_and_a_reasoning_call(tmp_path: Path) -> None:
    """One run with streams that break after their third answer chunk (every 5th request), a 429 then
    a successful retry (every 7th), reasoning before the answer (every 3rd; the 15th reasons and
    breaks): report on bench's ``--out`` file prints bench's numbers, and both are the metric table's
    over the calls in that file."""
    script = {
        "ttft-ms": 15, "chunks": 8, "chunk-delay-ms": 4, "reasoning-delay-ms": 3, "retry-after-ms": 40,
        "every": "7:fail-attempts=1,5:disconnect-after=3,3:reasoning-tokens=4",
    }  # fmt: skip
    out = tmp_path / "spans.jsonl"
    with ExitStack() as stack:
        (server,) = servers(stack, script)
        result = run_cli(
            ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "21", "-c", "3",
             "--max-retries", "2", "--format", "json", "--out", str(out)]
        )  # fmt: skip
        records = chat_records(server)
    assert result.code == 0, result.err
    (entry,) = result.json()["results"]
    assert len({r.headers["traceparent"].split("-")[1] for r in records}) == 21
    assert len(records) == 21 + 3  # requests 7, 14 and 21 were sent twice
    calls = collect_calls(read_spans([str(out)], ReadStats())).calls
    assert len(calls) == 21
    broken = [c for c in calls if c.error_type is not None]
    # the run has what could split the two: 4 streams that failed after their first token (one of
    # them a reasoning call), retried calls, reasoning calls
    assert len(broken) == 4 and all(c.ttft is not None and c.tpot is not None for c in broken)
    assert sum(1 for c in broken if c.reasoning is not None) == 1
    assert entry["errors"] == 4 and entry["retries"] == 3
    # 6 reasoning calls succeed; one whose reasoning and answer tokens came in one read (a loaded
    # machine: 5 of 6 seen once) has no reasoning time, by the doubt rule. Bench and report must
    # agree either way, so the run needs only to hold some
    assert 1 <= sum(1 for c in calls if c.reasoning is not None and c.error_type is None) <= 6
    reread = run_cli(["report", str(out), "--by", "target", "--format", "json"])
    assert reread.code == 0, reread.err
    (report,) = reread.json()["groups"]
    assert report["calls"] == entry["requests"] == 21
    assert report["errors"]["count"] == 4
    pairs = {
        "e2e": "duration",
        "ttft": "time_to_first_token",
        "ttft_sent": "time_to_first_token_from_request_sent",
        "ttft_answer": "time_to_first_answer_token",
        "reasoning": "reasoning_duration",
        "tpot": "time_per_output_token",
    }
    for bench_name, report_name in pairs.items():
        assert entry[bench_name] is not None, bench_name
        assert report[report_name] == entry[bench_name], bench_name
        dist = METRIC[bench_name].dist(calls)
        assert dist is not None and entry[bench_name] == dist.as_dict(), bench_name
    assert entry["e2e"]["n"] == 21
    assert entry["ttft"]["n"] == sum(1 for c in calls if c.error_type is None and c.ttft is not None)
    assert entry["ttft"]["n"] <= 17 and entry["reasoning"]["n"] <= 6
    # TTFT from request sent: the calls that were not retried; shorter than TTFT by the client's
    # build, pool wait and send. (Not bounded below by the server's 15 ms: httpcore's "body sent"
    # event can come a loop iteration after the server already had the request.)
    sent = [c for c in calls if c.error_type is None and c.ttft is not None and not c.retry_reasons]
    assert entry["ttft_sent"]["n"] == len(sent) > 0
    for call in sent:
        value = METRIC["ttft_sent"].of(call)
        before = call.phases["request_build"] + call.phases["network_wait"] - call.http["server_wait"]
        assert value is not None and value == pytest.approx(call.ttft - before, abs=1e-12)  # type: ignore[operator]
        assert 0 < value < call.ttft  # type: ignore[operator]

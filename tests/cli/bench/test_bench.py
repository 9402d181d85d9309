"""``openai-latency bench`` (its ``main`` in this process, the console script where the entry point
is the subject: Ctrl-C, ``--workers``) against fake servers on 127.0.0.1, each in its own process.

The numbers are checked against what the servers logged (their own clock), never against the script.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import signal
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from openai_latency.cli.bench.plan import Slo
from openai_latency.cli.bench.results.output import render_csv, render_text
from openai_latency.cli.bench.results.stats import target_stats
from openai_latency.cli.render.text import format_duration
from openai_latency.cli.spans.collect import collect_calls
from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats
from openai_latency.fake_server.records import RequestRecord
from tests.support.cli_runs import (
    COMMAND,
    by_target,
    chat_records,
    max_in_flight,
    percentiles,
    run_cli,
    servers,
)
from tests.support.key_server import KeyServer

STREAM = {"ttft-ms": 20, "chunks": 8, "chunk-delay-ms": 5}
PROMPT = "Why is the first token slow?"

FLOAT_ERROR = 1e-12
"""Room for binary floating point in a comparison with a decimal rounding (far below a microsecond)."""


def _header(record: RequestRecord) -> str:
    """The first line bench puts before every prompt (``--prefix-cache cold``: one per request)."""
    line = record.body["messages"][0]["content"].split("\n", 1)[0]
    assert re.fullmatch(r"bench-[0-9]{12}", line), line
    return line + "\n"


def test_closed_loop_keeps_exactly_c_requests_in_flight() -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 60, **STREAM})
        result = run_cli(
            ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "16", "-c", "4",
             "--prompt", PROMPT, "--temperature", "0.25", "--max-tokens", "9"]
        )  # fmt: skip
        assert result.code == 0, result.err
        records = chat_records(server)
        assert len(records) == 16
        assert max_in_flight(records) == 4
        for record in records:  # the workload options, as the server received them
            assert record.body["messages"] == [{"role": "user", "content": _header(record) + PROMPT}]
            assert (record.body["temperature"], record.body["max_tokens"]) == (0.25, 9)
            assert record.body["stream"] is True and record.body["stream_options"] == {"include_usage": True}
        # the first 4 arrive together, and each later one only when one finished
        finished = sorted(r.finished_ns for r in records if r.finished_ns is not None)
        for index, record in enumerate(sorted(records, key=lambda r: r.received_ns)[4:]):
            assert record.received_ns >= finished[index]


def test_open_loop_rate_arrives_at_the_server_at_that_rate() -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 20, **STREAM})
        result = run_cli(
            ["bench", "--target", f"a={server.base_url}", "--model", "m", "--rate", "10", "-n", "20",
             "--prompt-tokens", "130"]
        )  # fmt: skip
        assert result.code == 0, result.err
        records = chat_records(server)
        arrivals = sorted(r.received_ns for r in records)
        assert len(arrivals) == 20
        # --prompt-tokens 130: one synthetic prompt of 100 plain words (~1.3 tokens a word), default
        # max_tokens 64, no temperature unless asked
        prompts = {r.body["messages"][0]["content"].removeprefix(_header(r)) for r in records}
        (prompt,) = prompts
        words = prompt.split(" ")
        assert len(words) == 100 and all(word.isalpha() and word.islower() for word in words)
        assert all(r.body["max_tokens"] == 64 and "temperature" not in r.body for r in records)
        rate = (len(arrivals) - 1) / ((arrivals[-1] - arrivals[0]) / 1e9)
        assert rate == pytest.approx(10.0, rel=0.10)


@pytest.mark.slow
def test_poisson_arrivals_have_exponential_gaps() -> None:
    from scipy import stats

    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 1, "ttft-ms": 1, "chunks": 2})
        result = run_cli(
            ["bench", "--target", f"a={server.base_url}", "--model", "m", "--rate", "15", "--poisson",
             "-n", "60", "--seed", "8", "--no-stream", "--warmup", "2"]
        )  # fmt: skip
        assert result.code == 0, result.err
        arrivals = sorted(r.received_ns for r in chat_records(server))[2:]  # after the warm-up
        gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(arrivals)]
        assert len(gaps) == 59
        # seed 8's 59 draws average 1.04-1.08 times 1/15 (seed 7's, 0.79: too close to the bound)
        mean = sum(gaps) / len(gaps)
        assert mean == pytest.approx(1 / 15, rel=0.25)
        # Kolmogorov-Smirnov against the exponential distribution of rate 15/s. (A gap shorter than
        # the client's own CPU time per request, ~2-3 ms, comes out that long: at 40/s that alone
        # fails the test, at 15/s it moves the empirical CDF by ~4 %; 59 gaps reject a constant
        # spacing at p ~ 1e-23.)
        assert stats.kstest(gaps, "expon", args=(0, 1 / 15)).pvalue > 0.01
        # and constant spacing is rejected by the same test: the check can fail
        constant = [1 / 15 + 0.0005 * (i % 2) for i in range(59)]
        assert stats.kstest(constant, "expon", args=(0, 1 / 15)).pvalue < 0.01


def test_warmup_is_not_in_the_results_and_targets_alternate(tmp_path: Path) -> None:
    with ExitStack() as stack:
        a, b = servers(stack, {"delay-ms": 10, **STREAM}, {"delay-ms": 10, **STREAM})
        out = tmp_path / "spans.jsonl"
        result = run_cli(
            ["bench", "--target", f"a={a.base_url}@model-a", "--target", f"b={b.base_url}@model-b",
             "-n", "5", "--warmup", "2", "-c", "1", "--format", "json", "--out", str(out)]
        )  # fmt: skip
        assert result.code == 0, result.err
        targets = by_target(result.json())
        assert targets["a"]["requests"] == targets["b"]["requests"] == 5
        records = {"a": chat_records(a), "b": chat_records(b)}
        assert len(records["a"]) == len(records["b"]) == 7  # 2 warm-up + 5 measured each
        # NAME=BASE_URL@MODEL: each target asks for its own model (no --model given)
        assert {r.body["model"] for r in records["a"]} == {"model-a"}
        assert {r.body["model"] for r in records["b"]} == {"model-b"}
        order = [name for _, name in sorted((r.received_ns, n) for n, rs in records.items() for r in rs)]
        assert order == ["a", "b"] * 7
        lines = out.read_text().splitlines()
        assert "openai_latency.bench.warmup" not in "".join(lines)


@pytest.mark.slow
def test_a_sweep_with_duration_gives_one_result_per_level() -> None:
    """``-c 1,2 --duration 1``: each level runs about 1 s on its own; every number, the client's chunk
    gaps included, is per level (never pooled over the sweep)."""
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 100, **STREAM})  # ~160 ms a request
        result = run_cli(
            ["bench", "--target", f"a={server.base_url}", "--model", "m", "-c", "1,2", "--duration", "1",
             "--format", "json"]
        )  # fmt: skip
        assert result.code == 0, result.err
        report = result.json()
        records = sorted(chat_records(server), key=lambda r: r.received_ns)
    assert report["config"]["loads"] == ["c=1", "c=2"] and report["config"]["duration_s"] == 1.0
    assert report["config"]["requests_per_target"] is None
    levels = {entry["key"]["load"]: entry for entry in report["results"]}
    assert set(levels) == {"c=1", "c=2"}
    one, two = levels["c=1"]["requests"], levels["c=2"]["requests"]
    assert one + two == len(records)
    # --duration, not the default of 20 requests, ended each level; every level ran more than once
    assert 2 <= one < 20 and 2 <= two < 20
    for load, entry in levels.items():
        assert entry["chunk_gaps"]["n"] == 7 * entry["requests"], load  # 8 content chunks a request
        assert entry["errors"] == 0 and report["verdict"]["levels"][load] == []  # one target
    first, second = records[:one], records[one:]
    assert max_in_flight(first) == 1 and max_in_flight(second) == 2
    # a request starts only before its level's deadline (the last one may still run past it)
    for level in (first, second):
        assert (level[-1].received_ns - level[0].received_ns) / 1e9 < 1.0 + 0.5


def test_sequential_runs_one_target_after_the_other() -> None:
    with ExitStack() as stack:
        a, b = servers(stack, {"delay-ms": 10, **STREAM}, {"delay-ms": 10, **STREAM})
        result = run_cli(
            ["bench", "--target", f"a={a.base_url}", "--target", f"b={b.base_url}", "--model", "m",
             "-n", "4", "-c", "2", "--sequential", "--format", "json"]
        )  # fmt: skip
        assert result.code == 0, result.err
        report = result.json()
        first, second = chat_records(a), chat_records(b)
    assert report["config"]["interleaved"] is False
    assert [entry["requests"] for entry in report["results"]] == [4, 4]
    assert len(first) == len(second) == 4
    # all of a, answered to the end, before the first request of b; each with its 2 in flight
    assert max(r.finished_ns or 0 for r in first) <= min(r.received_ns for r in second)
    assert max_in_flight(first) == max_in_flight(second) == 2


def test_api_key_env_gives_each_target_its_key_and_prompt_file_its_text(tmp_path: Path) -> None:
    """The fake server never logs the Authorization header: a small endpoint that does, instead."""
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("A prompt from a file.\n", encoding="utf-8")
    default, own = "sk-default-7d1e", "sk-own-b-93c2"
    with KeyServer() as server:
        result = run_cli(
            ["bench", "--target", f"a={server.base_url}@model-a", "--target", f"b={server.base_url}@model-b",
             "--api-key-env", "b=BENCH_KEY_B", "--prompt-file", str(prompt), "--no-stream", "-n", "2",
             "--format", "json"],
            env={"OPENAI_API_KEY": default, "BENCH_KEY_B": own},
        )  # fmt: skip
        seen = list(server.seen)
    assert result.code == 0, result.err
    assert [(e["key"]["target"], e["requests"], e["errors"]) for e in result.json()["results"]] == [
        ("a", 2, 0),
        ("b", 2, 0),
    ]
    keys = {(s.body["model"], s.authorization) for s in seen}
    assert keys == {("model-a", f"Bearer {default}"), ("model-b", f"Bearer {own}")} and len(seen) == 4
    for request in seen:
        content = "A prompt from a file.\n"
        assert request.body["messages"] == [{"role": "user", "content": _header(request) + content}]
        assert "stream" not in request.body
    assert default not in result.out + result.err and own not in result.out + result.err


@pytest.mark.every_sdk  # bench and report through each SDK generation
def test_numbers_equal_the_servers_log_and_report_rereads_them(tmp_path: Path) -> None:
    """Header delay, TTFT, chunk pace with jitter and an occasional 429: bench's percentiles against
    percentiles computed here from the server's own log; goodput against a hand count."""
    script = {
        "delay-ms": 40, "ttft-ms": 30, "chunks": 10, "chunk-delay-ms": 8, "jitter-ms": 6, "seed": 3,
        "every": "6:fail-attempts=1", "retry-after-ms": 300,
    }  # fmt: skip
    with ExitStack() as stack:
        (server,) = servers(stack, script)
        out = tmp_path / "spans.jsonl"
        result = run_cli(
            ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "30", "-c", "3",
             "--slo", "e2e=320ms", "--format", "json", "--out", str(out)]
        )  # fmt: skip
        assert result.code == 0, result.err
        (entry,) = result.json()["results"]
        records = chat_records(server)
    by_request: dict[str, list[RequestRecord]] = {}
    for record in records:  # a retried request's attempts carry the same trace id (traceparent)
        by_request.setdefault(record.headers["traceparent"].split("-")[1], []).append(record)
    assert len(by_request) == 30
    retried = [attempts for attempts in by_request.values() if len(attempts) == 2]
    assert len(retried) == 5 and entry["retries"] == 5  # every 6th first attempt got a 429
    # the backoff as the server saw it: its 429 answer written -> the retry received (the SDK's sleep,
    # which a busy event loop may stretch, plus the rebuild of the request)
    gaps = [
        (b.received_ns - a.finished_ns) / 1e9
        for a, b in (sorted(r, key=lambda r: r.received_ns) for r in retried)
    ]
    assert all(gap >= 0.300 for gap in gaps)
    # ours is the sleep alone: at least the server's retry-after-ms, at most the server's gap, which
    # also holds reading the 429 and sending the retry (5-15 ms each on a loaded machine)
    assert 5 * 0.300 <= entry["backoff_s"] <= sum(gaps)
    assert entry["backoff_s"] >= sum(gaps) - 5 * 0.020
    # Per request, the server's truth (its log) next to the client's value (the call's span in the
    # --out file, matched by the final attempt's request id)
    calls = {c.request_id: c for c in collect_calls(read_spans([str(out)], ReadStats())).calls}
    logged: dict[str, list[float]] = {"ttft": [], "e2e": [], "tpot": []}
    client: dict[str, list[float]] = {"ttft": [], "e2e": [], "tpot": []}
    for attempts in by_request.values():
        first, last = min(attempts, key=lambda r: r.received_ns), max(attempts, key=lambda r: r.received_ns)
        content = last.content_event_ns
        logged["ttft"].append((content[0] - first.received_ns) / 1e9)
        logged["e2e"].append((last.finished_ns - first.received_ns) / 1e9)
        call = calls[last.request_id]
        assert call.ttft is not None
        client["ttft"].append(call.ttft)
        client["e2e"].append(call.duration)
        if call.tpot is not None:  # unset when the client read most chunks late (buffered): no pace seen
            client["tpot"].append(call.tpot)
            logged["tpot"].append((content[-1] - content[0]) / 1e9 / (len(content) - 1))
    assert len(client["tpot"]) >= 25
    for name in ("ttft", "e2e", "tpot"):
        actual = (entry[name]["p50"], entry[name]["p95"], entry[name]["p99"])
        # the table is exactly the percentiles of the calls' values ...
        assert actual == pytest.approx(percentiles(client[name]), abs=1e-9), name
        # ... and each call's value is the server's plus the client's own small share (request build,
        # loopback, parsing; more when a loaded machine deschedules the client), never less
        offsets = [c - t for c, t in zip(client[name], logged[name], strict=True)]
        assert min(offsets) >= -0.0015 and statistics.median(offsets) < 0.010, (name, offsets)
        # percentiles are monotone and shift with their input: so the table's numbers lie within the
        # server's percentiles plus the smallest and the largest offset
        for got, truth in zip(actual, percentiles(logged[name]), strict=True):
            assert truth + min(offsets) - 1e-9 <= got <= truth + max(offsets) + 1e-9, name
    e2e = logged["e2e"]
    # goodput: e2e <= 320 ms holds for every call without a retry (~160 ms) and none with (~480 ms),
    # with room for the client's own delays on a loaded machine (up to ~40 ms seen)
    assert max(e2e[i] for i, a in enumerate(by_request.values()) if len(a) == 1) < 0.26
    assert min(e2e[i] for i, a in enumerate(by_request.values()) if len(a) == 2) > 0.40
    assert entry["goodput_requests"] == 25 and entry["goodput"] == pytest.approx(25 / 30)
    triage = entry["triage"]["rate_limited"]
    assert triage["calls"] == 5 and triage["retries"] == 5
    # report on the --out file: the same numbers
    reread = run_cli(["report", str(out), "--format", "json"])
    assert reread.code == 0, reread.err
    (group,) = reread.json()["groups"]
    assert group["key"] == {"target": "a"} and group["calls"] == 30
    assert group["duration"] == entry["e2e"]
    assert group["time_to_first_token"] == entry["ttft"]
    assert group["time_per_output_token"] == entry["tpot"]
    assert group["phases"] == entry["phases"]
    assert group["triage"] == entry["triage"]
    # --format json round-trips: its numbers are the ones the csv and markdown renderings of the same
    # calls (reread from --out) print
    slo = Slo({"e2e": 0.320})
    (stats,) = target_stats(collect_calls(read_spans([str(out)], ReadStats())).calls, ("target", "load"), slo)
    rows = list(csv.reader(render_csv([stats], slo).splitlines()))[1:]
    values = {(metric, statistic): value for _, _, metric, statistic, value, _ in rows}
    # the CSV keeps seconds to the microsecond and rates to 0.001 (what the clock resolves): each value
    # within half its last digit of the JSON's, plus the float error of that difference (a value such
    # as 0.4942315 sits on the rounding boundary, and |0.494231 - 0.4942315| is 5.0000000001e-07)
    for metric in ("ttft", "ttfc", "e2e", "tpot", "tokens_per_s"):
        for statistic in ("n", "p50", "p95", "p99", "min", "max"):
            resolution = (5e-4 if metric == "tokens_per_s" else 5e-7) + FLOAT_ERROR
            expected = pytest.approx(entry[metric][statistic], abs=resolution)
            assert float(values[metric, statistic]) == expected, (metric, statistic)
    assert float(values["goodput", "value"]) == pytest.approx(entry["goodput"], abs=5e-7 + FLOAT_ERROR)
    assert float(values["backoff_s", "value"]) == pytest.approx(entry["backoff_s"], abs=5e-7 + FLOAT_ERROR)
    markdown = render_text([stats], slo, (), markdown=True).splitlines()
    for label, metric in (("ttft (first token, any channel)", "ttft"), ("e2e (whole call)", "e2e")):
        cell = " / ".join(format_duration(entry[metric][q]) for q in ("p50", "p95", "p99"))
        assert f"| {label} | {cell} |" in markdown


def test_prompt_cache_hits_and_misses_are_split() -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {"prompt-cache": 1, "ttft-ms": 120, "cached-ttft-ms": 30, "chunks": 3})
        result = run_cli(
            ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "6", "--format", "json",
             "--prefix-cache", "shared:6"]
        )  # fmt: skip
        assert result.code == 0, result.err
        (entry,) = result.json()["results"]
        assert entry["ttft_cache_miss"]["n"] == 1 and entry["ttft_cache_hit"]["n"] == 5
        assert entry["ttft_cache_hit"]["max"] + 0.08 < entry["ttft_cache_miss"]["p50"]
        table = run_cli(
            ["bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "2", "--prefix-cache", "warm"]
        )
        assert "ttft, prompt cache hit" in table.out  # every request a hit: the split still shows


#: target -> (its fake server's script, the one bucket each of its calls lands in)
TRIAGE_TARGETS: dict[str, tuple[dict[str, object], str]] = {
    "auth": ({"error": "invalid_api_key"}, "fast_failure"),
    "hang": ({"delay-ms": 2000}, "slow_failure"),  # client timeout 0.5 s, one retry
    "limited": ({"fail-attempts": 1, "retry-after-ms": 50, **STREAM}, "rate_limited"),  # 429, then ok
    "broken": ({"stream-error-after": 2, **STREAM}, "mid_stream"),  # an error event after 2 chunks
    "down": ({"error": "server_error", "delay-ms": 150, "should-retry": "false"}, "server_error"),
    "slow": ({"delay-ms": 250, **STREAM}, "slow_success"),  # above --slow-threshold 0.2 s
}


def test_triage_puts_each_failure_in_its_bucket(tmp_path: Path) -> None:
    with ExitStack() as stack:
        spawned = servers(stack, *[script for script, _ in TRIAGE_TARGETS.values()])
        urls = dict(zip(TRIAGE_TARGETS, (server.base_url for server in spawned), strict=True))
        out = tmp_path / "spans.jsonl"
        each = [arg for name, url in urls.items() for arg in ("--target", f"{name}={url}")]
        result = run_cli(
            ["bench", *each, "--model", "m", "-n", "3", "-c", "6", "--timeout", "0.5", "--max-retries", "1",
             "--slow-threshold", "0.2", "--format", "json", "--out", str(out)]
        )  # fmt: skip
        # targets whose every request failed make the run fail (exit 1), each named with its first error
        assert result.code == 1, result.err
        failed = sorted(
            line.split()[3].rstrip(":") for line in result.err.splitlines() if "every request failed" in line
        )
        assert failed == sorted(
            name for name, (_, b) in TRIAGE_TARGETS.items() if b not in ("rate_limited", "slow_success")
        )
        targets = by_target(result.json())
        hang_records = chat_records(spawned[1])
    for name, (_, bucket) in TRIAGE_TARGETS.items():
        assert set(targets[name]["triage"]) == {bucket}, name
        assert targets[name]["triage"][bucket]["calls"] == 3, name
    assert targets["auth"]["triage"]["fast_failure"]["kinds"] == {"invalid_api_key": 3}
    assert len(hang_records) == 6  # one retry each after the client timeout
    bucket = targets["limited"]["triage"]["rate_limited"]
    assert bucket["retries"] == 3 and bucket["backoff_s"] >= 0.15
    assert targets["broken"]["triage"]["mid_stream"]["kinds"] == {"server_error": 3}
    assert targets["down"]["triage"]["server_error"]["kinds"] == {"server_error": 3}
    assert targets["down"]["triage"]["server_error"]["retries"] == 0  # x-should-retry: false
    assert targets["slow"]["triage"]["slow_success"]["kinds"] == {"network_wait": 3}
    for name in ("auth", "broken", "down"):
        examples = next(iter(targets[name]["triage"].values()))["examples"]
        assert len(examples) == 3 and all(example.startswith("req_") for example in examples), name
    common = [str(out), "--slow-threshold", "0.2", "--client-timeout", "0.5"]
    reread = run_cli(["report", *common, "--format", "json"])
    groups = {g["key"]["target"]: g for g in reread.json()["groups"]}
    assert {name: g["triage"] for name, g in groups.items()} == {n: t["triage"] for n, t in targets.items()}
    # report's text: a triage section per target, one line per bucket with its count, meaning, kinds
    # and the example request ids
    text = run_cli(["report", *common])
    assert text.code == 0, text.err
    sections = _triage_sections(text.out)
    assert set(sections) == set(TRIAGE_TARGETS)
    expected = {
        "auth": "fast failures: 3 of 3 (credentials or configuration); kinds: invalid_api_key 3",
        "hang": "slow failures: 3 of 3 (network or queue); kinds: openai.APITimeoutError 3; 3 retries",
        "limited": "rate limited: 3 of 3 (quota or rate limit: slow down, or raise the limit);"
        " kinds: succeeded after backoff 3; 3 retries",
        "broken": "mid-stream failures: 3 of 3 (the endpoint broke off a started stream);"
        " kinds: server_error 3",
        "down": "server errors: 3 of 3 (the provider failed (5xx)); kinds: server_error 3",
        "slow": "slow successes: 3 of 3 (succeeded, slowly: see the dominant phase);"
        " dominant phase: network_wait 3",
    }
    for name, line in expected.items():
        bucket_line, examples_line = sections[name]
        assert bucket_line.startswith(line), (name, bucket_line)
        bucket = next(iter(targets[name]["triage"].values()))
        assert examples_line == "e.g. " + ", ".join(bucket["examples"]), name


def _triage_sections(text: str) -> dict[str, tuple[str, str]]:
    """report's text: ``NAME:`` then ``triage:``, then one bucket line and its examples line."""
    lines = [line.strip() for line in text.splitlines()] + [""]
    sections = {}
    for index, line in enumerate(lines[:-4]):
        if line.endswith(":") and lines[index + 1] == "triage:":
            assert not lines[index + 4], f"more than one bucket for {line}"  # each target: one bucket
            sections[line.removesuffix(":")] = (lines[index + 2], lines[index + 3])
    return sections


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_cancels_in_flight_requests_and_reports_what_finished(workers: int) -> None:
    """With ``--workers 2`` the parent gets the SIGINT (as from ``kill -INT``) and passes it on."""
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 150, **STREAM})
        process = subprocess.Popen(
            [COMMAND, "bench", "--target", f"a={server.base_url}", "--model", "m", "-n", "200", "-c", "2",
             "--format", "json", "--workers", str(workers)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "OPENAI_API_KEY": "sk-test"},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while len(chat_records(server)) < 8 and time.monotonic() < deadline:
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, err
        assert "interrupted" in err and "Traceback" not in err
        report = json.loads(out)
        assert report["interrupted"] is True
        (entry,) = report["results"]
        assert 6 <= entry["requests"] < 200
        records = chat_records(server)
        # every request the server saw finished in the results or was cancelled in flight (a call
        # cancelled before it was sent, possible on the httpx-based SDKs, the server never saw)
        assert entry["requests"] <= len(records) <= entry["requests"] + entry["cancelled"]
        assert entry["errors"] == 0


@pytest.mark.slow
def test_workers_share_the_load_and_their_spans_are_one_result(tmp_path: Path) -> None:
    """``--workers 2``: two client processes make the load of one (exactly C in flight, N requests),
    and the parent's result and ``--out`` file hold every request of both."""
    with ExitStack() as stack:
        closed, opened = servers(
            stack, {"delay-ms": 60, **STREAM}, {"delay-ms": 1, "ttft-ms": 1, "chunks": 2}
        )
        out = tmp_path / "spans.jsonl"
        with ThreadPoolExecutor(2) as pool:  # side by side: each mostly waits on its server
            closed_run = pool.submit(
                run_cli,
                ["bench", "--target", f"a={closed.base_url}", "--model", "m", "-n", "12", "-c", "4",
                 "--workers", "2", "--warmup", "2", "--format", "json", "--out", str(out)],
            )  # fmt: skip
            open_run = pool.submit(
                run_cli,
                ["bench", "--target", f"a={opened.base_url}", "--model", "m", "--rate", "20", "-n", "20",
                 "--workers", "2", "--no-stream", "--format", "json"],
            )  # fmt: skip
            result, rated = closed_run.result(), open_run.result()
        records, arrivals = chat_records(closed), sorted(r.received_ns for r in chat_records(opened))
    assert result.code == 0 and rated.code == 0, result.err + rated.err
    report = result.json()
    (entry,) = report["results"]
    assert report["config"]["workers"] == 2 and entry["requests"] == 12 and entry["errors"] == 0
    assert len(records) == 14  # the warm-up's 2 (split over the workers) and the 12
    assert max_in_flight(records) == 4  # two processes of 2
    assert entry["chunk_gaps"]["n"] == 7 * 12  # both workers' gaps, 8 content chunks a request
    assert report["client"]["cpu_s"] > 0 and report["client"]["loop_lag"]["n"] > 0
    reread = run_cli(["report", str(out), "--format", "json"])
    (group,) = reread.json()["groups"]
    assert group["calls"] == 12 and group["duration"] == entry["e2e"]  # every request, once
    # open loop: each worker sends at 10/s and they take turns (shifted by 1/20 s), so arrivals do
    # not come in pairs: few gaps are much shorter than the 50 ms spacing
    assert rated.json()["results"][0]["requests"] == 20 and len(arrivals) == 20
    gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(arrivals)]
    assert sum(gap < 0.0125 for gap in gaps) < len(gaps) / 4, gaps


BAD_INPUTS = [
    (["bench"], "the following arguments are required: --target"),
    (
        ["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "--rate", "-1"],
        "must be a positive number",
    ),
    (["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "--slo", "ttft=abc"], "not a duration"),
    (["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "--slo", "speed=1s"], "NAME=DURATION"),
    (["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "--colour"], "unrecognized arguments"),
    (["bench", "--target", "nonsense", "--model", "m"], "NAME=BASE_URL"),
    (["bench", "--target", "a=http://127.0.0.1:9/v1"], "no model"),
    (["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "-c", "0"], "must be at least 1"),
    (["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "--poisson"], "--poisson needs --rate"),
    (
        ["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "--workers", "0"],
        "must be at least 1",
    ),
    (
        ["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "--ramp-up", "-1"],
        "must be a positive",
    ),
    (["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "--ramp-up", "soon"], "not a duration"),
    (
        [
            "bench",
            "--target",
            "a=http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--prompt-file",
            "/nonexistent/p.txt",
        ],
        "cannot read /nonexistent/p.txt",
    ),
    (
        [
            "bench",
            "--target",
            "a=http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--api-key-env",
            "a=NOT_SET_ANYWHERE",
        ],
        "NOT_SET_ANYWHERE is not set",
    ),
    (
        [
            "bench",
            "--target",
            "a=http://127.0.0.1:9/v1",
            "--target",
            "a=http://127.0.0.1:9/v1",
            "--model",
            "m",
        ],
        "names must differ",
    ),
    (["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m"], "unreachable"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUTS, ids=[" ".join(a[1:])[-40:] for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_a_non_zero_exit(argv: list[str], message: str) -> None:
    result = run_cli(argv)
    assert result.code != 0
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert message in lines[0] and "Traceback" not in result.err


def test_an_unreachable_target_is_reported_and_the_others_still_run(tmp_path: Path) -> None:
    with ExitStack() as stack:
        (server,) = servers(stack, {"delay-ms": 5, **STREAM})
        out = tmp_path / "no-such-dir" / "spans.jsonl"
        bad_out = run_cli(["bench", "--target", f"a={server.base_url}", "--model", "m", "--out", str(out)])
        assert (
            bad_out.code == 2 and "cannot write" in bad_out.err and len(bad_out.err.strip().splitlines()) == 1
        )
        result = run_cli(
            ["bench", "--target", "down=http://127.0.0.1:9/v1", "--target", f"up={server.base_url}",
             "--model", "m", "-n", "3", "--format", "json"]
        )  # fmt: skip
        assert result.code == 1
        (line,) = result.err.strip().splitlines()
        assert "target down (http://127.0.0.1:9/v1) is unreachable" in line and "still run" in line
        report = result.json()
        assert [entry["key"]["target"] for entry in report["results"]] == ["up"]
        assert report["results"][0]["requests"] == 3 and report["config"]["unreachable"][0]["name"] == "down"


def test_markdown_and_csv_and_no_key_anywhere(tmp_path: Path) -> None:
    secret = "sk-bench-secret-4f1c0ffee"
    with ExitStack() as stack:
        # b sends no usage: its output tokens are counted content chunks, and the output says so
        a, b = servers(stack, {"delay-ms": 5, **STREAM}, {"delay-ms": 15, "usage": "never", **STREAM})
        out = tmp_path / "spans.jsonl"
        common = ["bench", "--target", f"a={a.base_url}", "--target", f"b={b.base_url}", "--model", "m"]
        env = {"OPENAI_API_KEY": secret}
        markdown = run_cli([*common, "-n", "3", "--format", "markdown", "--out", str(out)], env=env)
        csv_out = run_cli([*common, "-n", "3", "--format", "csv"], env=env)
        records = chat_records(a)
    assert markdown.code == 0 and csv_out.code == 0, markdown.err + csv_out.err
    table = [line for line in markdown.out.splitlines() if line.startswith("|")]
    assert table[0].startswith("| p50 / p95 / p99 | a | b |") and set(table[1]) <= set("|-")
    assert any(line.startswith("| ttft (first token, any channel) |") for line in table)
    rows = csv_out.out.splitlines()
    assert rows[0] == "target,load,metric,statistic,value,unit"
    assert {row.split(",")[0] for row in rows[1:]} == {"a", "b"}
    assert {row.split(",")[1] for row in rows[1:]} == {"c=1"}
    p95 = next(row.split(",") for row in rows if row.startswith("a,c=1,ttft,p95,"))
    assert p95[5] == "s" and len(p95[4].partition(".")[2]) <= 6  # seconds, to the microsecond
    assert (
        "b,c=1,estimated_token_requests,value,3,count" in rows
        and "a,c=1,estimated_token_requests,value,0,count" in rows
    )
    assert "b,c=1,output_tokens,value,24,count" in rows  # 3 requests of 8 content chunks
    assert any(row.startswith("a,c=1,error_rate,value,0") and row.endswith(",ratio") for row in rows)
    assert any(row.startswith("a,c=1,phases.network_wait,share,") and row.endswith(",ratio") for row in rows)
    assert any(row.startswith("a,c=1,tokens_per_s,p50,") and row.endswith(",tokens/s") for row in rows)
    notes = [line for line in markdown.out.splitlines() if "had no usage from the server" in line]
    assert notes == [
        "b: 3 of 3 successful requests had no usage from the server: their output tokens are counted"
        " content chunks."
    ]
    reread = {c.request_id: c for c in collect_calls(read_spans([str(out)], ReadStats())).calls}
    assert sorted((c.keys["target"], c.output_tokens, c.usage_estimated) for c in reread.values()) == [
        *[("a", 8, False)] * 3,  # the server's usage
        *[("b", 8, True)] * 3,  # the count, kept in the --out file for report
    ]
    assert len(records) == 6
    # the key is sent to the endpoints (it is theirs) and written nowhere: output, errors, spans
    for text in (markdown.out, markdown.err, csv_out.out, csv_out.err, out.read_text()):
        assert secret not in text

"""bench and report on a reasoning model (issue 26, item 9), against the fake server's own log:
``ttft`` counts the first reasoning token, ``ttft_answer`` the first answer token, ``reasoning`` the
thinking time between them, and ``tpot`` the pace of every token (reasoning streamed)."""

from __future__ import annotations

import statistics
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.support.cli_runs import by_target, chat_records, run_cli, servers

THINKER = {
    "delay-ms": 20, "ttft-ms": 30, "reasoning-tokens": 20, "reasoning-delay-ms": 10, "chunks": 8,
    "chunk-delay-ms": 10,
}  # fmt: skip
PLAIN = {"delay-ms": 20, "ttft-ms": 30, "chunks": 8, "chunk-delay-ms": 10}


@pytest.mark.every_sdk  # bench and report through each SDK generation
def test_bench_splits_thinking_time_from_the_first_token(tmp_path: Path) -> None:
    with ExitStack() as stack:
        thinker, plain = servers(stack, THINKER, PLAIN)
        out = tmp_path / "spans.jsonl"
        result = run_cli(
            ["bench", "--target", f"r1={thinker.base_url}", "--target", f"plain={plain.base_url}",
             "--model", "m", "-n", "12", "-c", "2", "--format", "json", "--out", str(out),
             "--reasoning-effort", "high", "--extra-body", '{"top_k": 20, "chat_template_kwargs": {"x": 1}}',
             "--slo", "ttft_answer=2s,reasoning=5s,ttft=1s"]
        )  # fmt: skip
        assert result.code == 0, result.err
        records = chat_records(thinker)
    r1, base = by_target(result.json())["r1"], by_target(result.json())["plain"]
    # what the server did: its first token of any channel, its first answer token, its pace
    firsts = [r.first_token_ns for r in records if r.first_token_ns is not None]
    answers = [r.first_content_ns for r in records if r.first_content_ns is not None]
    thinking = statistics.median((a - f) / 1e9 for f, a in zip(firsts, answers, strict=True))
    # the thinking time is exact per request; a difference of two medians (of different requests) is
    # as close as the requests' TTFTs are alike
    assert r1["reasoning"]["p50"] == pytest.approx(thinking, abs=0.004)
    assert r1["ttft_answer"]["p50"] - r1["ttft"]["p50"] == pytest.approx(thinking, rel=0.05)
    assert thinking >= 0.200  # the script ran: 20 reasoning tokens, 10 ms each
    paces = [(r.last_token_ns - r.first_token_ns) / (len(r.token_event_ns) - 1) / 1e9 for r in records]  # type: ignore[operator]
    assert r1["tpot"]["p50"] == pytest.approx(statistics.median(paces), rel=0.05)
    # without reasoning the two times are one, and there is no thinking time
    assert base["ttft_answer"]["p50"] == pytest.approx(base["ttft"]["p50"])
    assert base["reasoning"] is None
    assert r1["goodput"] == 1.0
    # every request carried the effort and the extra body fields
    assert len(records) == 12
    for record in records:
        assert record.body["reasoning_effort"] == "high"
        assert record.body["top_k"] == 20 and record.body["chat_template_kwargs"] == {"x": 1}

    # report rereads the file: the same split per target, and the new phase
    report = run_cli(["report", str(out), "--by", "target", "--format", "json"])
    assert report.code == 0, report.err
    groups = {g["key"]["target"]: g for g in report.json()["groups"]}
    assert groups["r1"]["reasoning_duration"]["p50"] == pytest.approx(r1["reasoning"]["p50"])
    assert "reasoning" in groups["r1"]["phases"]  # phase name -> its numbers
    text = run_cli(["report", str(out), "--by", "target"])
    assert "reasoning.duration" in text.out and "time_to_first_answer_token" in text.out


def test_an_slo_on_the_thinking_time_counts_against_goodput() -> None:
    with ExitStack() as stack:
        (thinker,) = servers(stack, THINKER)
        result = run_cli(
            ["bench", "--target", f"r1={thinker.base_url}", "--model", "m", "-n", "4", "-c", "2",
             "--format", "json", "--slo", "reasoning=50ms"]
        )  # fmt: skip
    assert result.code == 0, result.err
    assert result.json()["results"][0]["goodput"] == 0.0  # ~200 ms of thinking, over 50 ms on every call


@pytest.mark.parametrize("bad", ["[1, 2]", "{not json"])
def test_extra_body_must_be_a_json_object(bad: str) -> None:
    result = run_cli(["bench", "--target", "a=http://127.0.0.1:9/v1", "--model", "m", "--extra-body", bad])
    assert result.code == 2
    assert "--extra-body" in result.err and "JSON object" in result.err


def test_help_states_what_each_number_means() -> None:
    result = run_cli(["bench", "--help"])
    assert result.code == 0
    for name, words in (
        ("ttft", "first generated token of any channel, reasoning included"),
        ("ttft_answer", "first answer token"),
        ("reasoning", "first reasoning token -> first answer token"),
        ("tpot", "completion tokens - 1"),
    ):
        line = next(line for line in result.out.splitlines() if line.strip().startswith(name + " "))
        assert words in line or words in result.out, (name, line)
    assert "--reasoning-effort" in result.out and "--extra-body" in result.out


def test_requests_whose_first_token_waited_for_the_client_are_counted_and_named() -> None:
    """A call whose TTFT is unknown (the instrumentation's ``stream.first_token_waiting``) is not a
    sample of the ttft distribution, and the notes say how many there were and why."""
    from openai_latency.cli.bench.plan import Slo
    from openai_latency.cli.bench.results.output import notes
    from openai_latency.cli.bench.results.stats import target_stats
    from openai_latency.cli.spans.calls import Call

    def call(ttft: float | None) -> Call:
        return Call(
            name="chat m", keys={"target": "a", "load": "-"}, duration=0.5, phases={"first_token": 0.1},
            http={}, error_type=None, ttft=ttft, tpot=0.01, consumer_time=0.0, dominant_attribute=None,
            start_ns=1, end_ns=500_000_001, stream=True, first_token_waiting=ttft is None,
        )  # fmt: skip

    (stats,) = target_stats([call(0.1), call(0.12), call(None)], ["target"], Slo())
    assert stats.ttft is not None and stats.ttft.n == 2
    assert stats.ttft_unknown == 1
    (line,) = [line for line in notes([stats], None) if "no ttft" in line]
    assert line.startswith("a: 1 of 3 successful requests have no ttft") and "client was busy" in line

"""``openai-latency bench --replay`` (run_cli) against fake servers: the recorded arrival times
(within 10 ms) and token counts (exactly: input lengths calibrated per target on the server's own
count, output lengths by ``max_tokens`` with ``ignore_eos``), each checked in the server's log and in
the usage the server reported; and the calibration's rule on hand-made tokenizers (no server)."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from openai_latency.cli.bench.run.calibrate import FILLERS, PROBES, Calibration, InputCheck, calibrate
from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats
from openai_latency.fake_server import SpawnedServer
from openai_latency.fake_server.payloads import count_words
from openai_latency.fake_server.records import RequestRecord
from openai_latency.fake_server.tokens import pieces_tokens
from tests.support.cli_runs import chat_records, run_cli, servers
from tests.support.otlp_files import recorded_calls_file

#: Recorded calls: (seconds after the first, input tokens, output tokens, stream); outputs differ.
RECORDED = [(0.0, 17, 3, True), (0.09, 26, 5, False), (0.12, 391, 2, True), (0.40, 15, 7, True),
            (0.43, 65, 4, False), (0.66, 1234, 6, True)]  # fmt: skip


def _recording(folder: Path) -> Path:
    return recorded_calls_file(folder, RECORDED)


def _replay(
    tmp_path: Path, targets: dict[str, SpawnedServer], speed: str, *more: str
) -> tuple[dict[str, Any], Path]:
    out = tmp_path / "spans.jsonl"
    named = [arg for name, server in targets.items() for arg in ("--target", f"{name}={server.base_url}")]
    recording = str(_recording(tmp_path))
    result = run_cli(["bench", "--model", "m", "--format", "json", *named, "--replay", recording,
                      "--replay-speed", speed, "--out", str(out), *more])  # fmt: skip
    assert result.code == 0, result.err
    return result.json(), out


def _replayed_records(server: SpawnedServer, workers: int = 1) -> dict[int, RequestRecord]:
    """The replayed calls as the server logged them, by their output tokens (max_tokens): after each
    client process's probes (max_tokens 1, not streamed) and warm-up call of each kind, stream and not
    (the connection, the SDK's first call of the kind)."""
    records = sorted(chat_records(server), key=lambda r: r.received_ns)
    probes = [r for r in records if r.body["max_tokens"] == 1]
    assert 3 * workers <= len(probes) <= 3 * len(FILLERS) * workers
    assert len(records) == len(probes) + 2 * workers + len(RECORDED)
    records = records[-len(RECORDED) :]  # all of them after the probes and warm-ups (the start)
    assert not any(r.body["max_tokens"] == 1 for r in records)
    by_output = {r.body["max_tokens"]: r for r in records}
    assert sorted(by_output) == sorted(out for _, _, out, _ in RECORDED)  # each call, exactly once
    return by_output


def _check_token_counts(
    name: str,
    server: SpawnedServer,
    count: Callable[[object], int],
    report: dict[str, Any],
    out: Path,
    workers: int = 1,
) -> dict[str, Any]:
    """Every replayed call's input tokens (the server's own count of the body it logged, and the usage
    it reported) and output tokens exactly as recorded; returns the calibration."""
    by_output = _replayed_records(server, workers)
    for _, tokens_in, tokens_out, stream in RECORDED:
        body = by_output[tokens_out].body
        assert body.get("stream", False) is stream and body["ignore_eos"] is True
        assert count(body["messages"]) == tokens_in, (name, tokens_in)
        assert body["messages"][0]["content"].startswith("bench-")  # the cold first line kept
    (entry,) = [r for r in report["results"] if r["key"]["target"] == name]
    assert entry["requests"] == len(RECORDED) and entry["output_length_short"] == 0
    assert entry["output_tokens"] == sum(out for _, _, out, _ in RECORDED)
    check = entry["input_tokens_as_recorded"]
    assert (check["matched"], check["checked"], check["largest_miss"]) == (len(RECORDED), len(RECORDED), 0)
    # the usage the server reported, per call, as the spans of --out keep it
    seen = sorted(
        (s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"])
        for s in read_spans([out], ReadStats())
        if s.name.startswith("chat ") and s.attributes["openai_latency.bench.target"] == name
    )
    assert seen == sorted((i, o) for _, i, o, _ in RECORDED)
    calibration: dict[str, Any] = check["calibration"]
    assert calibration["exact"] is True and calibration["filler"] == "the"
    return calibration


def test_replay_reproduces_arrival_times_and_token_counts_exactly(tmp_path: Path) -> None:
    """A server that counts prompt tokens as a BPE tokenizer with a chat template would (``pieces``:
    bench's first line is 7 tokens, its newline 1, the template 6) gets every recorded call at its
    recorded time and with exactly its input and output tokens."""
    with ExitStack() as stack:
        (server,) = servers(stack, {"ttft-ms": 5, "chunks": 1, "tokenizer": "pieces"})
        report, out = _replay(tmp_path, {"p": server}, "2")
        by_output = _replayed_records(server)
        # every arrival at its recorded time / 2 (--replay-speed 2) within 10 ms, from a common origin:
        # the one that fits best (the median shift), so no single late arrival moves the others
        shifts = [by_output[out].received_ns / 1e9 - offset / 2 for offset, _, out, _ in RECORDED]
        origin = statistics.median(shifts)
        assert all(shift - origin == pytest.approx(0, abs=0.010) for shift in shifts), shifts
        assert report["results"][0]["key"]["load"] == "replay x2"
        calibration = _check_token_counts("p", server, pieces_tokens, report, out)
    assert calibration["overhead_tokens"] == 3 + 3 + 7 + 1  # template, first line, its newline


def test_replay_in_two_client_processes(tmp_path: Path) -> None:
    """``--workers 2``: the processes take turns on the recorded arrivals from one shared start, each
    calibrated on its own; one merged result, the same arrival times and token counts."""
    with ExitStack() as stack:
        (server,) = servers(stack, {"ttft-ms": 5, "chunks": 1, "tokenizer": "pieces"})
        report, out = _replay(tmp_path, {"p": server}, "2", "--workers", "2")
        by_output = _replayed_records(server, workers=2)
        shifts = [by_output[out].received_ns / 1e9 - offset / 2 for offset, _, out, _ in RECORDED]
        origin = statistics.median(shifts)
        assert all(shift - origin == pytest.approx(0, abs=0.010) for shift in shifts), shifts
        assert report["config"]["workers"] == 2 and len(report["results"]) == 1
        _check_token_counts("p", server, pieces_tokens, report, out, workers=2)
    # two processes sent them (their own connections), taking turns
    connections = [by_output[out].connection_id for _, _, out, _ in RECORDED]
    assert not set(connections[0::2]) & set(connections[1::2]), connections


def test_each_target_is_calibrated_on_its_own_count(tmp_path: Path) -> None:
    """Two targets that count differently in one run: each its own overhead, each exact."""
    with ExitStack() as stack:
        words, pieces = servers(stack, {"chunks": 1}, {"chunks": 1, "tokenizer": "pieces"})
        report, out = _replay(tmp_path, {"w": words, "p": pieces}, "8")
        overheads = {
            name: _check_token_counts(name, server, count, report, out)["overhead_tokens"]
            for name, server, count in (("w", words, count_words), ("p", pieces, pieces_tokens))
        }
    assert overheads == {"w": 1, "p": 14}  # words: the first line is one word
    table = run_cli(["report", str(out)])
    assert table.code == 0, table.err


def _counted(rule: dict[str, tuple[int, int]]) -> Any:
    """A hand-made tokenizer: per filler word, (tokens per word, overhead); merging words count half."""
    asked: list[tuple[str, int]] = []

    async def probe(word: str, words: int) -> int | None:
        asked.append((word, words))
        per_word, overhead = rule.get(word, (1, 10))
        if per_word == 0:  # a tokenizer that merges a repeated word in pairs: not one token each
            return overhead + (words + 1) // 2
        return overhead + per_word * words

    probe.asked = asked  # type: ignore[attr-defined]
    return probe


def test_the_calibration_picks_a_word_counted_one_token_each() -> None:
    probe = _counted({"the": (2, 9)})  # "the" is two tokens here, "a" one
    found = asyncio.run(calibrate(probe))
    assert found.exact and found.filler == "a" and found.overhead == 10
    assert probe.asked == [("the", k) for k in PROBES] + [("a", k) for k in PROBES]
    assert found.prompt(25) == " ".join(["a"] * 15) and found.words(5) == 1  # below the overhead: 1 word
    assert "calibrated" in found.text


def test_a_tokenizer_that_splits_the_filler_differently_is_detected_and_said() -> None:
    merging = _counted({word: (0, 12) for word in FILLERS})
    found = asyncio.run(calibrate(merging))
    assert not found.exact and found.slope is None and found.prompt(100) is None  # plain words instead
    assert found.problem is not None and "none of the, a, of, is" in found.problem
    assert "lengths approximate" in found.text and f'"the" x {", ".join(map(str, PROBES))}' in found.text
    doubled = asyncio.run(calibrate(_counted({word: (2, 12) for word in FILLERS})))
    assert not doubled.exact and doubled.slope == 2 and doubled.word == "the"
    assert doubled.words(112) == 50  # (112 - 12) / 2: exact while the line holds, checked afterwards


def test_the_check_says_what_matched_and_the_largest_miss() -> None:
    check = InputCheck(Calibration(filler="the", overhead=14))
    for recorded, reported in ((20, 20), (30, 33), (40, 38), (50, None)):
        check.add(recorded, reported)
    assert (check.matched, check.checked, check.unreported, check.largest_miss) == (1, 3, 1, 3)
    line = check.line("gw")
    assert line.startswith("gw: replayed input tokens as recorded in 1 of 3 checked calls, largest miss +3")
    assert "1 calls without usage, not checked" in line

"""A server that holds its first writes back (found on llama.cpp under load, tests/realserver): the
first token reaches the client together with many tokens made after it, so the window from the first
token's arrival to the last token's is shorter than the decode that produced them. TPOT must not be
taken over all the tokens (it read 1.0 ms for a 2.1 ms decode): the tokens that came with the first
are taken out of the window's count, and when nearly all came at once TPOT is unset.
"""

from __future__ import annotations

from typing import Any

import openai

from openai_latency.fake_server import RequestRecord
from tests.support.span_checks import Captured, attrs

MESSAGES = [{"role": "user", "content": "go"}]


def _stream(client: openai.OpenAI, script: dict[str, str]) -> None:
    for _chunk in client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=script,
    ):
        pass


def _pace_ns(record: RequestRecord) -> float:
    due = record.scripted_token_ns
    return (due[-1] - due[0]) / (len(due) - 1)


def test_a_held_back_first_write_never_understates_tpot(captured: Captured, timing_server: Any) -> None:
    """64 tokens due every 3 ms, written 40 then 24 at a time: the first token arrives with 39 more.
    The window between the two writes (24 x 3 ms) over 63 steps would read 1.1 ms; over the 24 steps
    it holds, it is the pace. Written all at once (64), no pace can be seen: unset."""
    client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test", max_retries=0)
    _stream(client, {"x-fake-chunks": "2"})  # warm-up
    captured.clear()
    _stream(client, {"x-fake-chunks": "64", "x-fake-chunk-delay-ms": "3", "x-fake-write-batch": "40"})
    a = attrs(captured.operation())
    record: RequestRecord = timing_server.record(a["openai_latency.request_id"])
    assert a["openai_latency.stream.buffered_chunks"] >= 60
    tpot = a["openai_latency.time_per_output_token"]
    assert abs(tpot * 1e9 / _pace_ns(record) - 1) <= 0.05, (tpot, _pace_ns(record))
    captured.clear()
    _stream(client, {"x-fake-chunks": "64", "x-fake-chunk-delay-ms": "1", "x-fake-write-batch": "64"})
    a = attrs(captured.operation())
    assert "openai_latency.time_per_output_token" not in a, a.get("openai_latency.time_per_output_token")


def test_small_batches_still_give_the_pace(captured: Captured, timing_server: Any) -> None:
    """Written 4 at a time (3 tokens arrive with the first: under a tenth of 63), the window still
    measures the pace, within 5 %."""
    client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test", max_retries=0)
    script = {"x-fake-chunks": "64", "x-fake-chunk-delay-ms": "3", "x-fake-write-batch": "4"}
    _stream(client, {"x-fake-chunks": "2"})
    captured.clear()
    _stream(client, script)
    a = attrs(captured.operation())
    record: RequestRecord = timing_server.record(a["openai_latency.request_id"])
    tpot = a["openai_latency.time_per_output_token"]
    assert abs(tpot * 1e9 / _pace_ns(record) - 1) <= 0.05, (tpot, _pace_ns(record))

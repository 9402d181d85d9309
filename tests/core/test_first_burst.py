"""A server that holds its first writes back, then sends them at once (found on llama.cpp with both
cores loaded, tests/realserver: TPOT read 1.0 ms for the server's own 2.1 ms decode, its HTTP thread
holding ~30 tokens back). The first token reaches the client together with many tokens made after
it, so the window from its arrival to the last token's is shorter than the decode that produced
them, and TPOT over all the tokens understates the pace. Not fixed yet (see the xfail's reason).
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

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


def _tpot(captured: Captured, timing_server: Any, script: dict[str, str]) -> tuple[float | None, float]:
    client = openai.OpenAI(base_url=timing_server.base_url, api_key="sk-test", max_retries=0)
    _stream(client, {"x-fake-chunks": "2"})  # warm-up
    captured.clear()
    _stream(client, script)
    a = attrs(captured.operation())
    record: RequestRecord = timing_server.record(a["openai_latency.request_id"])
    return a.get("openai_latency.time_per_output_token"), _pace_ns(record)


@pytest.mark.xfail(
    strict=True,
    reason="known: tokens that arrive together with the first one are counted as if made inside the "
    "window. A fix must tell them from a fast server's steady chunks, which a 2 ms 'blocked' rule "
    "also calls buffered (tried: counting buffered tokens before the first observed gap unset or "
    "overstated TPOT at llama.cpp's 1.8 ms pace); the hand-over spacing is the signal to use.",
)
def test_a_held_back_first_write_never_understates_tpot(captured: Captured, timing_server: Any) -> None:
    """64 tokens due every 10 ms, written 40 then 24 at a time: the first token arrives with 39 more.
    The window between the two writes (24 x 10 ms) over 63 steps reads 3.8 ms for a 10 ms pace."""
    tpot, pace_ns = _tpot(
        captured,
        timing_server,
        {"x-fake-chunks": "64", "x-fake-chunk-delay-ms": "10", "x-fake-write-batch": "40"},
    )
    assert tpot is None or tpot * 1e9 >= 0.9 * pace_ns, (tpot, pace_ns)

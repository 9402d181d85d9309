"""The fake server's own account of a request, on the wire: llama.cpp ``timings`` (``server-timings``)
and vLLM ``metrics`` (``server-metrics``, only when the request has ``include_metrics: true``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from openai_latency.fake_server import FakeServer, ScriptError
from openai_latency.fake_server.script import parse_script
from tests.support.fake_server_checks import raw

CHAT = "/v1/chat/completions"
LLAMA = {"x-fake-server-timings": "llama", "x-fake-ttft-ms": "12.5", "x-fake-chunk-delay-ms": "2"}
VLLM = {"x-fake-server-metrics": "vllm", "x-fake-server-queue-ms": "7", "x-fake-ttft-ms": "3"}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


def _events(body: bytes) -> list[Any]:
    lines = [line[6:] for line in body.decode().splitlines() if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


def _chat(stream: bool, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "a b c d"}], "stream": stream, **extra}


def test_llama_timings_in_the_body(server: FakeServer) -> None:
    _, body = raw(server, "POST", CHAT, _chat(False), {**LLAMA, "x-fake-chunks": "5"})
    assert json.loads(body)["timings"] == {
        "cache_n": 0,
        "prompt_n": 4,
        "prompt_ms": 12.5,
        "prompt_per_token_ms": 3.125,
        "prompt_per_second": 320.0,
        "predicted_n": 5,
        "predicted_ms": 8.0,
        "predicted_per_token_ms": 2.0,
        "predicted_per_second": 500.0,
    }
    _, body = raw(server, "POST", "/v1/completions", {"model": "m", "prompt": "x y"}, LLAMA)
    assert json.loads(body)["timings"]["prompt_n"] == 2


def test_llama_timings_on_the_last_chunk_only(server: FakeServer) -> None:
    """With ``include_usage`` on the usage chunk, else on the finish chunk: never on both."""
    _, body = raw(server, "POST", CHAT, _chat(True, stream_options={"include_usage": True}), LLAMA)
    events = _events(body)
    assert [("timings" in e) for e in events] == [False] * (len(events) - 1) + [True]
    assert events[-1]["usage"] is not None and not events[-1]["choices"]
    _, body = raw(server, "POST", CHAT, _chat(True), LLAMA)
    events = _events(body)
    assert [("timings" in e) for e in events] == [False] * (len(events) - 1) + [True]
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    _, body = raw(server, "POST", "/v1/completions", {"model": "m", "prompt": "x", "stream": True}, LLAMA)
    assert "timings" in _events(body)[-1]


def test_vllm_metrics_only_when_asked(server: FakeServer) -> None:
    _, body = raw(server, "POST", CHAT, _chat(False), VLLM)
    assert "metrics" not in json.loads(body)
    _, body = raw(server, "POST", CHAT, _chat(False, include_metrics=True), {**VLLM, "x-fake-chunks": "3"})
    assert json.loads(body)["metrics"] == {
        "queue_time_ms": 7.0,
        "time_to_first_token_ms": 10.0,
        "generation_time_ms": 0.0,
        "mean_itl_ms": 0.0,
        "tokens_per_second": 0.0,
    }
    _, body = raw(server, "POST", CHAT, _chat(True, include_metrics=True), VLLM)
    events = _events(body)
    assert "metrics" in events[-1] and not any("metrics" in e for e in events[:-1])


def test_verbatim_accounts_and_bad_values(server: FakeServer) -> None:
    script = {"x-fake-server-timings": '{"prompt_ms": "slow", "cache_n": -1}'}
    _, body = raw(server, "POST", CHAT, _chat(False), script)
    assert json.loads(body)["timings"] == {"prompt_ms": "slow", "cache_n": -1}
    _, body = raw(server, "POST", CHAT, _chat(False, include_metrics=True), {"x-fake-server-metrics": "[1]"})
    assert json.loads(body)["metrics"] == [1]
    response, body = raw(server, "POST", CHAT, _chat(False), {"x-fake-server-timings": "lama"})
    assert response.status == 400 and b"x-fake-server-timings" in body
    with pytest.raises(ScriptError, match="server-metrics"):
        parse_script({"server-metrics": "{not json"})
    with pytest.raises(ScriptError, match="server-queue-ms"):
        parse_script({"server-queue-ms": "-1"})


def test_no_account_unless_scripted(server: FakeServer) -> None:
    _, body = raw(server, "POST", CHAT, _chat(False, include_metrics=True))
    parsed = json.loads(body)
    assert "timings" not in parsed and "metrics" not in parsed
    _, body = raw(server, "POST", "/v1/responses", {"model": "m", "input": "x"}, LLAMA)
    assert "timings" not in json.loads(body)  # chat and completions only

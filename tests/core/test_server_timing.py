"""The server's own account joined to ours, on the fake server: llama.cpp ``timings``, vLLM
``metrics`` (asked for with ``server_metrics=request``), a server that sends neither, and malformed
accounts (what is valid is recorded, the rest skipped, the caller sees the server's bytes).

The fake server derives its account from the script (``prompt_ms`` = ``ttft-ms``, the decode pace =
``chunk-delay-ms``), so every expected value here is exact. The real server's account is compared
with our phases in tests/realserver.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openai_latency.config import load_settings
from openai_latency.read import server_timing
from openai_latency.read.routing import CHAT, COMPLETIONS, EMBEDDINGS, RESPONSES
from tests.support.span_checks import Captured, attrs

MESSAGES = [{"role": "user", "content": "one two three four"}]
SERVER_KEYS = (
    "openai_latency.server.queue_time",
    "openai_latency.server.prefill_time",
    "openai_latency.server.time_to_first_token",
    "openai_latency.server.decode_time",
    "openai_latency.server.time_per_output_token",
    "openai_latency.server.cached_prompt_tokens",
    "openai_latency.client_overhead.time_to_first_token",
)
LLAMA = {
    "x-fake-server-timings": "llama",
    "x-fake-ttft-ms": "40",
    "x-fake-chunks": "6",
    "x-fake-chunk-delay-ms": "4",
}
VLLM = {
    "x-fake-server-metrics": "vllm",
    "x-fake-server-queue-ms": "25",
    "x-fake-delay-ms": "25",
    "x-fake-ttft-ms": "30",
    "x-fake-chunks": "5",
    "x-fake-chunk-delay-ms": "3",
}


def _client(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _stream(client: openai.OpenAI, headers: dict[str, str], **kwargs: Any) -> list[Any]:
    return list(
        client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, extra_headers=headers, **kwargs
        )
    )


def _server_attrs(captured: Captured) -> dict[str, Any]:
    return {k: v for k, v in attrs(captured.operation()).items() if k in SERVER_KEYS}


def _points(captured: Captured) -> dict[str, list[float]]:
    data = captured.metric_reader.get_metrics_data()
    out: dict[str, list[float]] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if "server." in metric.name or "client_overhead" in metric.name:
                    out[metric.name] = [p.sum for p in metric.data.data_points]
    return out


@pytest.mark.parametrize("include_usage", [True, False])
def test_llama_cpp_timings_of_a_stream(
    instrument: Callable[..., Captured], server: Any, include_usage: bool
) -> None:
    """In the usage chunk (``include_usage``) or the finish chunk (without it): prefill and the
    server's TTFT = ``prompt_ms``, TPOT = ``predicted_ms`` / (tokens - 1), no queue (llama.cpp
    reports none); the client's overhead = our TTFT - the server's."""
    captured = instrument()
    options = {"stream_options": {"include_usage": True}} if include_usage else {}
    chunks = _stream(_client(server), LLAMA, **options)
    assert chunks[-1].model_extra["timings"]["prompt_ms"] == 40.0  # the caller's chunk, untouched
    a = attrs(captured.operation())
    assert a["openai_latency.server.prefill_time"] == 0.04
    assert a["openai_latency.server.time_to_first_token"] == 0.04
    assert a["openai_latency.server.decode_time"] == 0.02  # 5 steps of 4 ms
    assert a["openai_latency.server.time_per_output_token"] == 0.004
    assert a["openai_latency.server.cached_prompt_tokens"] == 0
    assert "openai_latency.server.queue_time" not in a
    overhead = a["openai_latency.client_overhead.time_to_first_token"]
    ours = a["openai_latency.time_to_first_token"]
    assert overhead == round(ours - 0.04, 9)
    assert 0 <= overhead < 0.1  # loopback: headers, the role chunk, parsing
    points = _points(captured)
    assert points["openai_latency.server.prefill_time"] == [0.04]
    assert points["openai_latency.server.time_to_first_token"] == [0.04]
    assert points["openai_latency.server.time_per_output_token"] == [0.004]
    assert points["openai_latency.client_overhead.time_to_first_token"] == [overhead]
    assert "openai_latency.server.queue_time" not in points


def test_llama_cpp_timings_of_a_non_stream_call_and_the_prompt_cache(
    instrument: Callable[..., Captured], server: Any
) -> None:
    captured = instrument()
    client = _client(server)
    script = {**LLAMA, "x-fake-prompt-cache": "1", "x-fake-cached-ttft-ms": "5"}
    messages = [{"role": "user", "content": "a prompt seen twice here"}]
    for _ in range(2):
        completion = client.chat.completions.create(model="m", messages=messages, extra_headers=script)
    assert completion.model_extra["timings"]["cache_n"] == 5
    first, second = (attrs(op) for op in captured.operations())
    assert first["openai_latency.server.cached_prompt_tokens"] == 0
    assert first["openai_latency.server.prefill_time"] == 0.04
    assert second["openai_latency.server.cached_prompt_tokens"] == 5
    assert second["openai_latency.server.prefill_time"] == 0.005
    # non-stream: no client TTFT, so no overhead derived from it
    assert "openai_latency.client_overhead.time_to_first_token" not in second


def test_vllm_metrics_are_asked_for_only_when_configured(
    instrument: Callable[..., Captured], server: Any
) -> None:
    captured = instrument()
    _stream(_client(server), VLLM, stream_options={"include_usage": True})
    assert "include_metrics" not in server.last_record().body
    assert _server_attrs(captured) == {}

    captured = instrument(server_metrics="request")
    chunks = _stream(_client(server), VLLM, stream_options={"include_usage": True})
    assert server.last_record().body["include_metrics"] is True
    assert chunks[-1].model_extra["metrics"]["queue_time_ms"] == 25.0
    a = attrs(captured.operation())
    assert a["openai_latency.server.queue_time"] == 0.025
    assert a["openai_latency.server.time_to_first_token"] == 0.055
    assert a["openai_latency.server.prefill_time"] == 0.03
    assert a["openai_latency.server.decode_time"] == 0.012
    assert a["openai_latency.server.time_per_output_token"] == 0.003
    assert "openai_latency.server.cached_prompt_tokens" not in a
    overhead = a["openai_latency.client_overhead.time_to_first_token"]
    assert 0 <= overhead < 0.1
    assert set(_points(captured)) == {
        "openai_latency.server.queue_time",
        "openai_latency.server.prefill_time",
        "openai_latency.server.time_to_first_token",
        "openai_latency.server.time_per_output_token",
        "openai_latency.client_overhead.time_to_first_token",
    }


def test_vllm_metrics_of_non_stream_and_completions_calls(
    instrument: Callable[..., Captured], server: Any
) -> None:
    captured = instrument(server_metrics="request")
    client = _client(server)
    client.chat.completions.create(model="m", messages=MESSAGES, extra_headers=VLLM)
    client.completions.create(model="m", prompt="a b", extra_headers=VLLM)
    for _ in client.completions.create(model="m", prompt="a b", stream=True, extra_headers=VLLM):
        pass
    for op in captured.operations():
        assert attrs(op)["openai_latency.server.queue_time"] == 0.025, op.name
    # embeddings: never asked (vLLM's include_metrics is for chat and completions)
    client.embeddings.create(model="text-embedding-3-small", input="hi")
    assert "include_metrics" not in server.last_record().body


async def test_async_calls_ask_for_metrics_too(instrument: Callable[..., Captured], server: Any) -> None:
    captured = instrument(server_metrics="request", stream_usage="inject")
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, extra_headers=VLLM
    )
    chunks = [chunk async for chunk in stream]
    body = server.last_record().body
    assert body["include_metrics"] is True and body["stream_options"] == {"include_usage": True}
    assert all(chunk.choices for chunk in chunks)  # the injected usage chunk stays hidden
    assert attrs(captured.operation())["openai_latency.server.queue_time"] == 0.025
    await client.close()


def test_a_caller_that_sets_include_metrics_is_sent_as_written(
    instrument: Callable[..., Captured], server: Any
) -> None:
    instrument(server_metrics="request")
    client = _client(server)
    client.chat.completions.create(
        model="m", messages=MESSAGES, extra_headers=VLLM, extra_body={"include_metrics": False, "x": 1}
    )
    assert server.last_record().body["include_metrics"] is False
    client.chat.completions.create(model="m", messages=MESSAGES, extra_body={"x": 1})
    assert server.last_record().body["include_metrics"] is True
    assert server.last_record().body["x"] == 1


def test_a_server_that_sends_no_account_sets_nothing(
    instrument: Callable[..., Captured], server: Any
) -> None:
    captured = instrument(server_metrics="request")
    client = _client(server)
    _stream(client, {"x-fake-chunks": "3"}, stream_options={"include_usage": True})
    _stream(client, {"x-fake-chunks": "3"})
    client.chat.completions.create(model="m", messages=MESSAGES)
    client.responses.create(model="m", input="hi")
    assert len(captured.operations()) == 4
    for op in captured.operations():
        assert not [k for k in attrs(op) if k in SERVER_KEYS], op.name
    assert _points(captured) == {}


MALFORMED = [
    # (the account, the attributes that stay)
    ({"prompt_ms": "12", "predicted_ms": -4, "cache_n": 2.5, "predicted_n": True}, {}),
    (
        {"prompt_ms": 12.5, "predicted_ms": float("nan"), "predicted_n": 9, "cache_n": 3},
        {
            "openai_latency.server.prefill_time": 0.0125,
            "openai_latency.server.time_to_first_token": 0.0125,
            "openai_latency.server.cached_prompt_tokens": 3,
        },
    ),
    (
        {"predicted_ms": 16, "predicted_n": 5},
        {"openai_latency.server.decode_time": 0.016, "openai_latency.server.time_per_output_token": 0.004},
    ),
    ({"predicted_ms": 16, "predicted_n": 1}, {"openai_latency.server.decode_time": 0.016}),
    ({"cache_n": -1, "prompt_ms": 1e400}, {}),
    ({"prompt_ms": 1e300, "predicted_ms": 10**400, "predicted_n": 2}, {}),
    ([1, 2, 3], {}),
    ("fast", {}),
    (None, {}),
    ({}, {}),
]


@pytest.mark.parametrize(("timings", "expected"), MALFORMED)
def test_malformed_timings_keep_what_is_valid(
    instrument: Callable[..., Captured], server: Any, timings: Any, expected: dict[str, Any]
) -> None:
    captured = instrument()
    wire = json.dumps(timings).replace("NaN", '"NaN"').replace("Infinity", '"Infinity"')
    script = {"x-fake-server-timings": wire, "x-fake-chunks": "3"}
    chunks = _stream(_client(server), script, stream_options={"include_usage": True})
    assert chunks[-1].model_extra["timings"] == json.loads(wire)  # the caller's chunk is the server's
    completion = _client(server).chat.completions.create(model="m", messages=MESSAGES, extra_headers=script)
    assert completion.model_extra["timings"] == json.loads(wire)
    stream_op, plain_op = captured.operations()
    stream_attrs = {k: v for k, v in attrs(stream_op).items() if k in SERVER_KEYS}
    overhead = stream_attrs.pop("openai_latency.client_overhead.time_to_first_token", None)
    assert stream_attrs == expected
    assert (overhead is None) == ("openai_latency.server.time_to_first_token" not in expected)
    assert {k: v for k, v in attrs(plain_op).items() if k in SERVER_KEYS} == expected


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        (
            {"queue_time_ms": 30, "time_to_first_token_ms": 20, "mean_itl_ms": "3"},
            {  # a TTFT below the queue: no prefill derived from them
                "openai_latency.server.queue_time": 0.03,
                "openai_latency.server.time_to_first_token": 0.02,
            },
        ),
        (
            {"queue_time_ms": None, "generation_time_ms": [1], "mean_itl_ms": 2},
            {"openai_latency.server.time_per_output_token": 0.002},
        ),
        ("metrics", {}),
    ],
)
def test_malformed_metrics_keep_what_is_valid(
    instrument: Callable[..., Captured], server: Any, metrics: Any, expected: dict[str, Any]
) -> None:
    captured = instrument(server_metrics="request")
    script = {"x-fake-server-metrics": json.dumps(metrics), "x-fake-chunks": "2"}
    completion = _client(server).chat.completions.create(model="m", messages=MESSAGES, extra_headers=script)
    assert completion.model_extra["metrics"] == metrics
    assert _server_attrs(captured) == expected


def test_reading_an_account_never_raises() -> None:
    class Hostile:
        @property
        def __pydantic_extra__(self) -> Any:
            raise RuntimeError("boom")

    assert server_timing.server_attributes(Hostile()) is None  # reported once, no exception
    assert server_timing.server_attributes(None) == {}
    assert server_timing.server_attributes({"timings": {"prompt_ms": 1}}) == {
        "openai_latency.server.prefill_time": 0.001,
        "openai_latency.server.time_to_first_token": 0.001,
    }


def test_with_metrics_touches_chat_and_completions_only() -> None:
    kwargs = {"model": "m", "messages": []}
    assert server_timing.with_metrics(CHAT, kwargs) == {**kwargs, "extra_body": {"include_metrics": True}}
    assert server_timing.with_metrics(COMPLETIONS, {"extra_body": None}) == {
        "extra_body": {"include_metrics": True}
    }
    assert server_timing.with_metrics(RESPONSES, kwargs) is None
    assert server_timing.with_metrics(EMBEDDINGS, kwargs) is None
    assert server_timing.with_metrics(CHAT, {"extra_body": {"include_metrics": False}}) is None
    assert server_timing.with_metrics(CHAT, {"extra_body": "not a mapping"}) is None
    assert kwargs == {"model": "m", "messages": []}  # never changed in place


def test_seconds_are_exact_to_the_nanosecond() -> None:
    a = server_timing.llama_cpp({"prompt_ms": 150.945173, "predicted_ms": 0.1 + 0.2, "predicted_n": 4})
    assert repr(a["openai_latency.server.prefill_time"]) == "0.150945173"
    assert repr(a["openai_latency.server.decode_time"]) == "0.0003"
    assert repr(a["openai_latency.server.time_per_output_token"]) == "0.0001"


def test_the_setting_and_its_invalid_values(caplog: pytest.LogCaptureFixture) -> None:
    assert load_settings(environ={}).server_metrics == "off"
    assert load_settings(environ={"OPENAI_LATENCY_SERVER_METRICS": " Request "}).server_metrics == "request"
    assert load_settings({"server_metrics": "request"}, environ={}).server_metrics == "request"
    with caplog.at_level(logging.WARNING, logger="openai_latency"):
        assert load_settings(environ={"OPENAI_LATENCY_SERVER_METRICS": "always"}).server_metrics == "off"
    assert any(
        "OPENAI_LATENCY_SERVER_METRICS" in r.getMessage() and "off|request" in r.getMessage()
        for r in caplog.records
    )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(
    ["cache_n", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "queue_time_ms",
     "time_to_first_token_ms", "generation_time_ms", "mean_itl_ms"]
)  # fmt: skip
ACCOUNTS = st.dictionaries(FIELD_NAMES, JSON_VALUES, max_size=9) | JSON_VALUES


@settings(max_examples=300, deadline=None)
@given(timings=ACCOUNTS, metrics=ACCOUNTS)
def test_any_account_gives_valid_attributes_or_none(timings: Any, metrics: Any) -> None:
    """Whatever JSON a server sends as ``timings``/``metrics``: no exception, and every attribute
    set is a finite number >= 0 (seconds exact to the ns) or a whole count."""
    for item in ({"timings": timings}, {"metrics": metrics}, {"timings": timings, "metrics": metrics}):
        out = server_timing.server_attributes(item)
        assert isinstance(out, dict)
        for key, value in out.items():
            assert key in SERVER_KEYS
            if key == "openai_latency.server.cached_prompt_tokens":
                assert isinstance(value, int) and not isinstance(value, bool) and value >= 0
            else:
                assert isinstance(value, float) and math.isfinite(value) and value >= 0
                assert round(value, 9) == value

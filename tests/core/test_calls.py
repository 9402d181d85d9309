"""Every way of calling chat completions gives exactly one operation span with its phases."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import openai
from opentelemetry import trace

from tests.support.span_checks import Captured, attrs

MESSAGES = [{"role": "user", "content": "hello"}]
STREAM_PHASES = ["openai.request_build", "openai.network_wait", "openai.first_token", "openai.stream_drain"]
READ_PHASES = ["openai.request_build", "openai.network_wait", "openai.response_read"]


def _client(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _aclient(server: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _one(captured: Captured, phases: list[str], stream: bool) -> dict[str, Any]:
    op = captured.operation()
    assert op.name == "chat gpt-4o-mini"
    assert op.kind == trace.SpanKind.CLIENT
    assert captured.phase_names(op) == phases
    a = attrs(op)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-4o-mini"
    assert a["gen_ai.request.stream"] is stream
    assert a["server.address"] == "127.0.0.1"
    assert a["http.response.status_code"] == 200
    assert a["openai_latency.request_id"].startswith("req_")
    assert trace.get_current_span() is trace.INVALID_SPAN
    return a


def test_create_non_stream(captured: Captured, server: Any) -> None:
    completion = _client(server).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, temperature=0.5, max_tokens=50, seed=7, stop=["x"]
    )
    assert isinstance(completion, openai.types.chat.ChatCompletion)
    a = _one(captured, READ_PHASES, stream=False)
    assert a["gen_ai.request.temperature"] == 0.5
    assert a["gen_ai.request.max_tokens"] == 50
    assert a["gen_ai.request.seed"] == 7
    assert a["gen_ai.request.stop_sequences"] == ("x",)
    assert a["gen_ai.response.id"] == completion.id
    assert a["gen_ai.response.model"] == completion.model
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert a["gen_ai.usage.input_tokens"] == completion.usage.prompt_tokens
    assert a["gen_ai.usage.output_tokens"] == completion.usage.completion_tokens
    assert a["openai.api.type"] == "chat_completions"
    assert a["openai_latency.attempts"] == 1


def test_create_stream(captured: Captured, server: Any) -> None:
    stream = _client(server).chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
    assert isinstance(stream, openai.Stream)
    assert stream.response.status_code == 200
    list(stream)
    _one(captured, STREAM_PHASES, stream=True)


def test_parse(captured: Captured, server: Any) -> None:
    client = _client(server)
    completion = client.chat.completions.parse(model="gpt-4o-mini", messages=MESSAGES)
    assert completion.choices[0].message.content
    _one(captured, READ_PHASES, stream=False)


def test_stream_helper(captured: Captured, server: Any) -> None:
    with _client(server).chat.completions.stream(model="gpt-4o-mini", messages=MESSAGES) as stream:
        events = [event.type for event in stream]
    assert "content.delta" in events
    a = _one(captured, STREAM_PHASES, stream=True)
    assert a["openai_latency.stream.end_state"] == "completed"


def test_with_raw_response(captured: Captured, server: Any) -> None:
    raw = _client(server).chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
    assert raw.headers["x-request-id"].startswith("req_")
    completion = raw.parse()
    assert completion.choices
    _one(captured, READ_PHASES, stream=False)


def test_with_raw_response_stream_parsed_later(captured: Captured, server: Any) -> None:
    raw = _client(server).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True
    )
    assert captured.operations() == []  # still running: the stream has not been read
    stream = raw.parse()
    assert isinstance(stream, openai.Stream)
    list(stream)
    a = _one(captured, STREAM_PHASES, stream=True)
    assert a["openai_latency.stream.end_state"] == "completed"


def test_with_streaming_response(captured: Captured, server: Any) -> None:
    client = _client(server)
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True
    ) as response:
        chunks = list(response.parse())
    assert chunks
    _one(captured, STREAM_PHASES, stream=True)
    captured.clear()
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=MESSAGES
    ) as response:
        assert response.parse().choices
    _one(captured, READ_PHASES, stream=False)


def test_method_bound_before_instrumentation(instrument: Callable[..., Captured], server: Any) -> None:
    """``with_raw_response`` caches bound methods at first use; the fallback still sees the call."""
    client = _client(server)
    raw_create = client.chat.completions.with_raw_response.create  # bound before instrument()
    captured = instrument()
    raw_create(model="gpt-4o-mini", messages=MESSAGES).parse()
    _one(captured, READ_PHASES, stream=False)


async def test_async_create_and_stream(captured: Captured, server: Any) -> None:
    client = _aclient(server)
    await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    _one(captured, READ_PHASES, stream=False)
    captured.clear()
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
    assert isinstance(stream, openai.AsyncStream)
    async for _chunk in stream:
        pass
    _one(captured, STREAM_PHASES, stream=True)


async def test_async_stream_helper_and_parse(captured: Captured, server: Any) -> None:
    client = _aclient(server)
    async with client.chat.completions.stream(model="gpt-4o-mini", messages=MESSAGES) as stream:
        final = await stream.get_final_completion()
    assert final.choices[0].message.content
    _one(captured, STREAM_PHASES, stream=True)
    captured.clear()
    await client.chat.completions.parse(model="gpt-4o-mini", messages=MESSAGES)
    _one(captured, READ_PHASES, stream=False)


async def test_async_raw_and_streaming_response(captured: Captured, server: Any) -> None:
    client = _aclient(server)
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
    assert raw.parse().choices
    _one(captured, READ_PHASES, stream=False)
    captured.clear()
    async with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True
    ) as response:
        stream = await response.parse()
        async for _chunk in stream:
            pass
    _one(captured, STREAM_PHASES, stream=True)


def test_concurrent_async_calls_get_their_own_spans(captured: Captured, server: Any) -> None:
    async def main() -> None:
        client = _aclient(server)
        await asyncio.gather(
            *(client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES) for _ in range(5))
        )

    asyncio.run(main())
    ops = captured.operations()
    assert len(ops) == 5
    for op in ops:
        assert captured.phase_names(op) == READ_PHASES
    assert len({attrs(op)["openai_latency.request_id"] for op in ops}) == 5

"""Nothing recorded while OpenTelemetry's suppression is set, nor through SDK methods cached before
``uninstrument()``; in both cases the SDK call itself proceeds untouched.

- ``suppress_instrumentation()`` (what the official instrumentations honour, and what the OTel SDK
  sets around its exporters): no span, no metric point, no ``traceparent``, no injected
  ``stream_options``. Read when a call starts: the next call outside the block records as usual.
- After ``uninstrument()`` a wrapper that an SDK object still holds (``with_raw_response`` binds
  the resource methods at first use; a ``functools.partial`` of a resource method) only calls
  through (``Hooks._active``). Instrumented again, such a call is recorded once, by the new hooks'
  fallback, never twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry import context as otel_context
from opentelemetry.instrumentation.utils import suppress_instrumentation

from openai_latency.fake_server import FakeServer
from tests.support.span_checks import Captured, attrs, calls_in_metrics

MESSAGES = [{"role": "user", "content": "hello"}]
MODEL = "gpt-4o-mini"


def _client(server: FakeServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _aclient(server: FakeServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _recorded_calls(captured: Captured) -> int:
    return calls_in_metrics(captured.metric_reader)


def _nothing_recorded(captured: Captured, calls_before: int = 0) -> None:
    assert captured.spans() == []
    assert _recorded_calls(captured) == calls_before


def _sync_calls(client: openai.OpenAI) -> list[Any]:
    """A non-stream call, a stream read to its end, an embeddings call, a raw-response call and a
    call that only the ``request`` fallback sees (models)."""
    response = client.chat.completions.create(model=MODEL, messages=MESSAGES)
    out: list[Any] = [response.choices[0].message.content]
    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    out.append([chunk.choices[0].delta.content for chunk in stream if chunk.choices])
    out.append(len(client.embeddings.create(model="text-embedding-3-small", input="hi").data))
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES)
    out.append(raw.parse().choices[0].message.content)
    out.append(sorted(model.id for model in client.models.list()))
    return out


async def _async_calls(client: openai.AsyncOpenAI) -> list[Any]:
    response = await client.chat.completions.create(model=MODEL, messages=MESSAGES)
    out: list[Any] = [response.choices[0].message.content]
    stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    out.append([chunk.choices[0].delta.content async for chunk in stream if chunk.choices])
    out.append(len((await client.embeddings.create(model="text-embedding-3-small", input="hi")).data))
    raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES)
    out.append(raw.parse().choices[0].message.content)
    out.append(sorted([model.id async for model in client.models.list()]))
    return out


# --- suppress_instrumentation ----------------------------------------------------------------------


def test_suppressed_sync_calls_record_nothing_and_proceed_untouched(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument(stream_usage="inject")
    client = _client(server)
    with suppress_instrumentation():
        got = _sync_calls(client)
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        list(stream)
        record = server.last_record()
    _nothing_recorded(captured)
    assert "traceparent" not in record.headers  # nothing injected into the request
    assert "stream_options" not in record.body  # stream_usage=inject left the request alone

    captured.clear()
    assert _sync_calls(client) == got  # the same results, now recorded: one operation per call
    assert [op.name for op in captured.operations()] == [
        f"chat {MODEL}",
        f"chat {MODEL}",
        "embeddings text-embedding-3-small",
        f"chat {MODEL}",
        "openai GET /models",
    ]
    assert _recorded_calls(captured) == 5


async def test_suppressed_async_calls_record_nothing_and_proceed_untouched(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument(stream_usage="inject")
    client = _aclient(server)
    with suppress_instrumentation():
        got = await _async_calls(client)
        stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        [chunk async for chunk in stream]
        record = server.last_record()
    _nothing_recorded(captured)
    assert "traceparent" not in record.headers
    assert "stream_options" not in record.body

    captured.clear()
    assert await _async_calls(client) == got
    assert len(captured.operations()) == 5


def test_the_sdk_suppression_key_alone_is_enough(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    """What the OTel SDK's export threads set (the context key only, no helper)."""
    captured = instrument()
    key = otel_context._SUPPRESS_INSTRUMENTATION_KEY
    token = otel_context.attach(otel_context.set_value(key, True))
    try:
        _client(server).chat.completions.create(model=MODEL, messages=MESSAGES)
    finally:
        otel_context.detach(token)
    _nothing_recorded(captured)


def test_suppression_is_read_when_the_call_starts(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    """A stream created outside the block and read inside it belongs to a call already recording."""
    captured = instrument()
    stream = _client(server).chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    with suppress_instrumentation():
        list(stream)
    assert attrs(captured.operation())["openai_latency.stream.end_state"] == "completed"


# --- methods cached before uninstrument() ----------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_methods_cached_while_instrumented_record_nothing_after_uninstrument(
    instrument: Callable[..., Captured], server: FakeServer, stream: bool
) -> None:
    captured = instrument()
    client = _client(server)
    raw_create = client.chat.completions.with_raw_response.create  # binds create (wrapped) now
    partial_create = functools.partial(client.chat.completions.create, model=MODEL, messages=MESSAGES)
    raw_create(model=MODEL, messages=MESSAGES).parse()
    partial_create()
    assert len(captured.operations()) == 2  # both went through our wrapper while instrumented
    assert _recorded_calls(captured) == 2

    from openai_latency import OpenAILatencyInstrumentor

    OpenAILatencyInstrumentor().uninstrument()
    captured.clear()
    parsed = raw_create(model=MODEL, messages=MESSAGES, stream=stream).parse()
    result = partial_create(stream=stream)
    # the same objects an uninstrumented SDK returns, streams read to their end
    if stream:
        assert isinstance(parsed, openai.Stream) and isinstance(result, openai.Stream)
        assert list(parsed) and list(result)
    else:
        assert parsed.choices[0].message.content == result.choices[0].message.content
    # through the attribute, after uninstrument: the raw wrapper cached by the client still holds ours
    client.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES).parse()
    _nothing_recorded(captured, calls_before=2)


async def test_async_methods_cached_while_instrumented_record_nothing_after_uninstrument(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    client = _aclient(server)
    raw_create = client.chat.completions.with_raw_response.create
    partial_create = functools.partial(client.chat.completions.create, model=MODEL, messages=MESSAGES)
    (await raw_create(model=MODEL, messages=MESSAGES)).parse()
    await partial_create()
    assert len(captured.operations()) == 2
    assert _recorded_calls(captured) == 2

    from openai_latency import OpenAILatencyInstrumentor

    OpenAILatencyInstrumentor().uninstrument()
    captured.clear()
    assert (await raw_create(model=MODEL, messages=MESSAGES)).parse().choices
    assert (await partial_create()).choices
    stream = await partial_create(stream=True)
    assert [chunk async for chunk in stream]
    _nothing_recorded(captured, calls_before=2)


def test_a_method_cached_under_an_earlier_instrument_is_recorded_once(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    """Instrumented again, the old (inactive) wrapper calls through, and the SDK's request reaches
    the new hooks' fallback: one operation, as for a method bound before any instrument()."""
    instrument()
    client = _client(server)
    raw_create = client.chat.completions.with_raw_response.create
    partial_create = functools.partial(client.chat.completions.create, model=MODEL, messages=MESSAGES)
    captured = instrument()  # uninstrument, then instrument with new hooks
    raw_create(model=MODEL, messages=MESSAGES).parse()
    partial_create()
    ops = captured.operations()
    assert [op.name for op in ops] == [f"chat {MODEL}", f"chat {MODEL}"]
    assert all(attrs(op)["gen_ai.request.model"] == MODEL for op in ops)

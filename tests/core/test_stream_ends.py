"""Every way a stream can end ends its operation span exactly once, with the right end_state."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from openai_latency.call import deferred
from openai_latency.read.errors import qualified_name
from tests.support.span_checks import Captured, attrs

MESSAGES = [{"role": "user", "content": "hello"}]


def _client(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _aclient(server: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def _create(client: openai.OpenAI, **script: str) -> openai.Stream[Any]:
    return client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, extra_headers={f"x-fake-{k}": v for k, v in script.items()}
    )


def _ended(captured: Captured, end_state: str, error: bool = False) -> dict[str, Any]:
    gc.collect()
    assert deferred.flush(timeout=10)  # a collected stream is ended on deferred's worker thread
    op = captured.operation()  # exactly one operation span, ended
    a = attrs(op)
    assert a["openai_latency.stream.end_state"] == end_state
    assert (op.status.status_code == StatusCode.ERROR) is error
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing of ours left current
    return a


def test_exhausted(captured: Captured, server: Any) -> None:
    stream = _create(_client(server), chunks="3")
    assert isinstance(stream, openai.Stream)
    for _chunk in stream:
        assert trace.get_current_span() is trace.INVALID_SPAN  # the caller's code runs outside our span
    stream.close()  # a close after the end changes nothing
    a = _ended(captured, "completed")
    assert a["openai_latency.stream.chunks"] == 5  # role, 3 content, finish


def test_next_until_stop_iteration(captured: Captured, server: Any) -> None:
    stream = _create(_client(server), chunks="2")
    items = []
    with pytest.raises(StopIteration):
        while True:
            items.append(next(stream))
    assert len(items) == 4
    _ended(captured, "completed")


def test_close_early(captured: Captured, server: Any) -> None:
    stream = _create(_client(server), chunks="50", **{"chunk-delay-ms": "5"})
    next(stream)
    next(stream)
    stream.close()
    a = _ended(captured, "closed_early")
    assert a["openai_latency.stream.chunks"] == 2


def test_with_block_exit(captured: Captured, server: Any) -> None:
    with _create(_client(server), chunks="50", **{"chunk-delay-ms": "5"}) as stream:
        next(stream)
    _ended(captured, "closed_early")


def test_break_then_close(captured: Captured, server: Any) -> None:
    stream = _create(_client(server), chunks="50", **{"chunk-delay-ms": "5"})
    for i, _chunk in enumerate(stream):
        if i == 3:
            break
    stream.close()
    _ended(captured, "closed_early")


def test_break_and_drop(captured: Captured, server: Any) -> None:
    stream = _create(_client(server), chunks="50", **{"chunk-delay-ms": "5"})
    for i, _chunk in enumerate(stream):
        if i == 3:
            break
    del stream
    _ended(captured, "abandoned")


def test_never_iterated_and_dropped(captured: Captured, server: Any) -> None:
    stream = _create(_client(server), chunks="3")
    del stream
    a = _ended(captured, "abandoned")
    assert a["openai_latency.stream.chunks"] == 0


def test_server_error_event_mid_stream(captured: Captured, server: Any) -> None:
    stream = _create(_client(server), chunks="5", **{"stream-error-after": "2"})
    with pytest.raises(openai.APIError):
        for _chunk in stream:
            pass
    a = _ended(captured, "error", error=True)
    assert a["openai_latency.error.category"] == "stream_error"


def test_disconnect_mid_stream(instrument: Callable[..., Captured], server: Any) -> None:
    def consume() -> type[BaseException]:
        stream = _create(_client(server), chunks="5", **{"disconnect-after": "2"})
        with pytest.raises(Exception) as raised:  # the SDK's own choice: APIConnectionError on 3.x
            for _chunk in stream:
                pass
        return type(raised.value)

    baseline = consume()  # not instrumented
    captured = instrument()
    assert consume() is baseline
    a = _ended(captured, "error", error=True)
    assert a["error.type"] == qualified_name(baseline)
    assert a["openai_latency.error.category"] == "connection"


def test_chat_stream_helper_break_and_exit(captured: Captured, server: Any) -> None:
    client = _client(server)
    with client.chat.completions.stream(
        model="m", messages=MESSAGES, extra_headers={"x-fake-chunks": "50", "x-fake-chunk-delay-ms": "5"}
    ) as stream:
        for event in stream:
            if event.type == "content.delta":
                break
    _ended(captured, "closed_early")


def test_chat_stream_helper_final_completion(captured: Captured, server: Any) -> None:
    with _client(server).chat.completions.stream(model="m", messages=MESSAGES) as stream:
        completion = stream.get_final_completion()
    assert completion.choices[0].message.content
    a = _ended(captured, "completed")
    assert a["gen_ai.response.finish_reasons"] == ("stop",)


# --- async ------------------------------------------------------------------------------------


async def _acreate(client: openai.AsyncOpenAI, **script: str) -> openai.AsyncStream[Any]:
    return await client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, extra_headers={f"x-fake-{k}": v for k, v in script.items()}
    )


async def test_async_exhausted(captured: Captured, server: Any) -> None:
    stream = await _acreate(_aclient(server), chunks="3")
    assert isinstance(stream, openai.AsyncStream)
    async for _chunk in stream:
        assert trace.get_current_span() is trace.INVALID_SPAN
    _ended(captured, "completed")


async def test_async_close_early(captured: Captured, server: Any) -> None:
    stream = await _acreate(_aclient(server), chunks="50", **{"chunk-delay-ms": "5"})
    await stream.__anext__()
    await stream.close()
    _ended(captured, "closed_early")


async def test_async_with_block(captured: Captured, server: Any) -> None:
    async with await _acreate(_aclient(server), chunks="50", **{"chunk-delay-ms": "5"}) as stream:
        await stream.__anext__()
    _ended(captured, "closed_early")


async def test_async_never_iterated_and_dropped(captured: Captured, server: Any) -> None:
    stream = await _acreate(_aclient(server), chunks="3")
    del stream
    _ended(captured, "abandoned")


async def test_async_break_and_drop(captured: Captured, server: Any) -> None:
    stream = await _acreate(_aclient(server), chunks="50", **{"chunk-delay-ms": "5"})
    async for _chunk in stream:
        break
    del stream
    gc.collect()
    await asyncio.sleep(0.05)  # the loop's async-generator finalizer runs aclose()
    _ended(captured, "abandoned")


async def test_async_error_mid_stream(captured: Captured, server: Any) -> None:
    stream = await _acreate(_aclient(server), chunks="5", **{"stream-error-after": "1"})
    with pytest.raises(openai.APIError):
        async for _chunk in stream:
            pass
    _ended(captured, "error", error=True)


async def test_async_task_cancelled_while_waiting(captured: Captured, server: Any) -> None:
    stream = await _acreate(_aclient(server), chunks="5", **{"ttft-ms": "2000"})
    first = asyncio.Event()

    async def consume() -> None:
        async for _chunk in stream:
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)  # the role chunk came; now it waits 2 s for content
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    a = _ended(captured, "cancelled")
    assert a["openai_latency.error.category"] == "cancelled"


async def test_async_task_cancelled_before_headers(captured: Captured, server: Any) -> None:
    client = _aclient(server)
    task = asyncio.create_task(_acreate(client, **{"delay-ms": "2000"}))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gc.collect()
    op = captured.operation()
    assert attrs(op)["openai_latency.error.category"] == "cancelled"
    assert op.status.status_code != StatusCode.ERROR

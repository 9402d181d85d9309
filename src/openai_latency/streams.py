"""Timing of SSE streams, chunk by chunk, without replacing the SDK's stream objects.

``Stream.__stream__`` (and ``AsyncStream.__stream__``) is the one generator every consumption path
goes through, so the SDK object the caller holds stays the SDK's own (``isinstance`` holds, every
helper works) and only its inner generator is wrapped by :func:`traced_stream`.

Per chunk the wrapper reads the clock twice, updates a few integers and asks the operation's
observer whether the chunk carries output. Time blocked inside the SDK's ``next`` is *wait* (server
and network); time between handing a chunk out and being asked for the next is *consumer* time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from ._guard import report
from .operation import Operation, StreamStats
from .timeline import clock

T = TypeVar("T")

Observer = Callable[[StreamStats, Any], bool]
"""Reads one chunk into the stats; returns True when the chunk carries output."""


def _observe_chat(st: StreamStats, chunk: Any) -> bool:
    if st.first_item is None:
        st.first_item = chunk
    usage = getattr(chunk, "usage", None)
    if usage is not None:
        st.usage = usage
    choices = chunk.choices
    if not choices:
        return False
    output = False
    for choice in choices:
        if choice.finish_reason:
            _add_finish_reason(st, choice.finish_reason)
        delta = choice.delta
        if delta is not None and (delta.content or delta.tool_calls or getattr(delta, "refusal", None)):
            output = True
    return output


def _observe_completions(st: StreamStats, chunk: Any) -> bool:
    if st.first_item is None:
        st.first_item = chunk
    usage = getattr(chunk, "usage", None)
    if usage is not None:
        st.usage = usage
    output = False
    for choice in chunk.choices or ():
        if choice.finish_reason:
            _add_finish_reason(st, choice.finish_reason)
        if choice.text:
            output = True
    return output


_RESPONSES_FINAL = ("response.completed", "response.incomplete", "response.failed")


def _observe_responses(st: StreamStats, event: Any) -> bool:
    event_type = getattr(event, "type", None)
    if not isinstance(event_type, str):
        return False
    if event_type.endswith(".delta"):
        return True
    if event_type in _RESPONSES_FINAL:
        response = getattr(event, "response", None)
        st.final_item = response
        st.usage = getattr(response, "usage", None)
        status = getattr(response, "status", None)
        if isinstance(status, str):
            st.finish_reasons = [status]
        if event_type == "response.failed":
            st.error_item = getattr(response, "error", None)
    elif event_type == "response.created":
        st.first_item = getattr(event, "response", None)
    elif event_type == "error":
        st.error_item = event
    return False


def _observe_any(st: StreamStats, chunk: Any) -> bool:
    return True


OBSERVERS: dict[str, Observer] = {
    "chat": _observe_chat,
    "completions": _observe_completions,
    "responses": _observe_responses,
    "any": _observe_any,
}


def _add_finish_reason(st: StreamStats, reason: Any) -> None:
    if st.finish_reasons is None:
        st.finish_reasons = []
    st.finish_reasons.append(str(reason))


def _on_chunk(op: Operation, observe: Observer, item: Any, t0: int, t1: int) -> None:
    """Bookkeeping for one chunk that took ``t1 - t0`` ns to arrive."""
    st = op.stream
    wait = t1 - t0
    st.wait_ns += wait
    index = st.chunks
    st.chunks = index + 1
    st.last_activity_ns = t1
    if index == 0:
        st.first_chunk_ns = t1
    else:
        st.gaps.append(wait)
        if wait > st.max_gap_ns:
            st.max_gap_ns = wait
        if wait > op.stall_threshold_ns:
            if st.stalls is None:
                st.stalls = []
            st.stalls.append((index, wait, t1))
    if observe(st, item):
        if not st.output_chunks:
            op.timeline.first_output_ns = t1
            st.wait_at_first_output_ns = st.wait_ns
            st.consumer_before_output_ns = st.consumer_ns
        st.output_chunks += 1
        st.wait_at_last_output_ns = st.wait_ns


def _end_state(exc: BaseException) -> str:
    if isinstance(exc, GeneratorExit):
        return "abandoned"
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "error"


def _finish(op: Operation, exc: BaseException | None) -> None:
    try:
        if exc is None:
            op.finish(end_ns=clock(), end_state="completed")
        elif isinstance(exc, GeneratorExit):
            # Collected or closed without Stream.close(): the caller walked away after its last chunk.
            op.finish(end_ns=op.stream.last_activity_ns, end_state="abandoned")
        else:
            op.finish(end_ns=clock(), error=exc, end_state=_end_state(exc))
    except Exception:
        report("stream end")


def traced_stream(inner: Iterator[T], op: Operation) -> Iterator[T]:
    """Yields what ``inner`` yields, timing each ``next`` and the caller's time between them."""
    observe = OBSERVERS[op.kind.stream_kind]
    st = op.stream
    t0 = clock()
    st.consumer_ns += t0 - (op.timeline.returned_ns or t0)
    try:
        for item in inner:
            t1 = clock()
            try:
                _on_chunk(op, observe, item, t0, t1)
            except Exception:
                report("stream chunk")
            yield item
            t0 = clock()
            st.consumer_ns += t0 - t1
    except BaseException as exc:
        _finish(op, exc)
        raise
    _finish(op, None)


async def traced_async_stream(inner: AsyncIterator[T], op: Operation) -> AsyncIterator[T]:
    """The async twin of :func:`traced_stream`."""
    observe = OBSERVERS[op.kind.stream_kind]
    st = op.stream
    t0 = clock()
    st.consumer_ns += t0 - (op.timeline.returned_ns or t0)
    try:
        async for item in inner:
            t1 = clock()
            try:
                _on_chunk(op, observe, item, t0, t1)
            except Exception:
                report("stream chunk")
            yield item
            t0 = clock()
            st.consumer_ns += t0 - t1
    except BaseException as exc:
        _finish(op, exc)
        raise
    _finish(op, None)

"""Timing of SSE streams, chunk by chunk, without replacing the SDK's stream objects.

``Stream.__stream__`` (and ``AsyncStream.__stream__``) is the one generator every consumption path
goes through, so the SDK object the caller holds stays the SDK's own (``isinstance`` holds, every
helper works) and only its inner generator is wrapped by :func:`traced_stream`.

Per chunk the wrapper reads the clock twice, updates a few integers and asks the operation's
observer whether the chunk carries output. Time blocked inside the SDK's ``next`` is *wait* (server
and network); time between handing a chunk out and being asked for the next is *consumer* time.
Gaps, time per output token, stalls and time to first token use server-side times only
(:func:`_on_chunk`).
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from . import deferred
from ._guard import report
from .attributes import response_attributes
from .model import Observer, StreamStats
from .stream_usage import is_usage_only
from .timeline import clock

if TYPE_CHECKING:
    from .operation import Operation

T = TypeVar("T")


def _observe_chat(st: StreamStats, chunk: Any) -> bool:
    if st.first_attributes is None:  # read now: no chunk is kept alive (O(1) memory per stream)
        st.first_attributes = response_attributes(chunk)
    usage = getattr(chunk, "usage", None)
    if usage is not None:
        st.usage = usage
    # The SDK builds chunks without validation: any field may hold any JSON, so every read has a default.
    choices = getattr(chunk, "choices", None)
    if not choices or not isinstance(choices, list):
        return False
    output = False
    for choice in choices:
        reason = getattr(choice, "finish_reason", None)
        if reason:
            _add_finish_reason(st, reason)
        delta = getattr(choice, "delta", None)
        if delta is not None and (
            getattr(delta, "content", None)
            or getattr(delta, "tool_calls", None)
            or getattr(delta, "refusal", None)
        ):
            output = True
    return output


def _observe_completions(st: StreamStats, chunk: Any) -> bool:
    if st.first_attributes is None:
        st.first_attributes = response_attributes(chunk)
    usage = getattr(chunk, "usage", None)
    if usage is not None:
        st.usage = usage
    choices = getattr(chunk, "choices", None)
    if not choices or not isinstance(choices, list):
        return False
    output = False
    for choice in choices:
        reason = getattr(choice, "finish_reason", None)
        if reason:
            _add_finish_reason(st, reason)
        if getattr(choice, "text", None):
            output = True
    return output


_RESPONSES_FINAL = ("response.completed", "response.incomplete", "response.failed")


def _observe_responses(st: StreamStats, event: Any) -> bool:
    """Output: any non-empty ``*.delta`` event (output text, refusal, function-call arguments,
    reasoning text/summary, audio...). ``response.failed`` and ``error`` events set ``error_item``:
    the operation then ends as an error with the provider's code (:func:`.errors.stream_error`)."""
    event_type = getattr(event, "type", None)
    if not isinstance(event_type, str):
        return False
    if event_type.endswith(".delta"):
        return bool(getattr(event, "delta", True))
    if event_type in _RESPONSES_FINAL:
        response = getattr(event, "response", None)
        st.final_item = response
        st.usage = getattr(response, "usage", None)
        status = getattr(response, "status", None)
        if isinstance(status, str):
            st.finish_reasons = [status]
        if event_type == "response.failed":
            st.error_item = getattr(response, "error", None) or event
    elif event_type == "response.created":
        st.first_attributes = response_attributes(getattr(event, "response", None))
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


BLOCKED_NS = 2_000_000
"""A ``next`` that took longer than this waited for the network, so the chunk's arrival time is known.

Shorter ones count as "already buffered": parsing one chunk takes 0.05-1 ms, more on a loaded
machine, and misjudging a buffered chunk as blocked would count the caller's time as server time.
"""


def _on_chunk(op: Operation, observe: Observer, item: Any, t0: int, t1: int) -> None:
    """Bookkeeping for one chunk: asked for at ``t0``, handed over at ``t1``.

    When this ``next`` blocked, the chunk arrived at ``t1`` and the server-side gap is arrival to
    arrival (the caller's own time since the previous chunk overlapped the server's work, so it is
    not counted twice). When the chunk was already buffered, the server was ahead of the caller: its
    arrival time is unknown, the gap is not observed, and the caller's time stays consumer time.
    """
    st = op.stream
    wait = t1 - t0
    st.wait_ns += wait
    index = st.chunks
    st.chunks = index + 1
    gap = 0
    blocked = wait > BLOCKED_NS
    if index == 0:
        # arrival: now if we had to wait for it, else it waited while the caller was elsewhere
        st.first_chunk_ns = t1 if blocked else t1 - st.consumer_ns
    elif blocked:
        gap = t1 - st.last_activity_ns
        if st.gaps is None:
            st.gaps = array("q")
        st.gaps.append(gap)
        if gap > st.max_gap_ns:
            st.max_gap_ns = gap
        if gap > op.stall_threshold_ns:
            if st.stalls is None:
                st.stalls = []
            st.stalls.append((index, gap, t1))
    else:
        st.buffered_chunks += 1
    st.last_activity_ns = t1
    if observe(st, item):
        if not st.output_chunks:
            op.timeline.first_output_ns = t1
            # Waited for: it arrived now, and the caller's earlier work overlapped the server's.
            # Buffered: the caller's time since it arrived is unknown, so none of it counts.
            st.consumer_before_output_ns = 0 if blocked else st.consumer_ns
        elif gap:
            st.output_gap_ns += gap
            st.output_gaps += 1
        st.output_chunks += 1


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
            # This runs in the generator's finalizer, possibly inside the collector: hand it over.
            deferred.abandon(op)
        else:
            op.finish(end_ns=clock(), error=exc, end_state=_end_state(exc))
    except Exception:
        report("stream end")


def _observer(op: Operation) -> Observer:
    """The stream kind's observer, extended to collect the output text when content capture is on."""
    observe = OBSERVERS[op.kind.stream_kind]
    return observe if op.content is None else op.content.observer(observe, op.kind.stream_kind)


def traced_stream(inner: Iterator[T], op: Operation) -> Iterator[T]:
    """Yields what ``inner`` yields, timing each ``next`` and the caller's time between them."""
    observe = _observer(op)
    hide_usage = op.usage_injected
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
            if hide_usage and is_usage_only(item):
                t0 = t1  # the chunk we added: read above, never handed to the caller
                continue
            yield item
            t0 = clock()
            st.consumer_ns += t0 - t1
    except BaseException as exc:
        _finish(op, exc)
        raise
    _finish(op, None)


async def traced_async_stream(inner: AsyncIterator[T], op: Operation) -> AsyncIterator[T]:
    """The async twin of :func:`traced_stream`."""
    observe = _observer(op)
    hide_usage = op.usage_injected
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
            if hide_usage and is_usage_only(item):
                t0 = t1  # the chunk we added: read above, never handed to the caller
                continue
            yield item
            t0 = clock()
            st.consumer_ns += t0 - t1
    except BaseException as exc:
        _finish(op, exc)
        raise
    _finish(op, None)

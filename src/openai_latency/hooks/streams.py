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

from .._guard import report
from ..call import deferred
from ..clock import clock
from ..model import ANSWER, REASONING, SUMMARY, Observer, StreamStats
from ..read.attributes import CHAT_REASONING_FIELDS, response_attributes
from .stream_usage import is_usage_only

if TYPE_CHECKING:
    from ..call.operation import Operation

T = TypeVar("T")


_MISSING: Any = object()


def _reasoning_attribute(delta: Any) -> bool:
    """Whether a chat delta that is no pydantic v2 model (a v1 model, a stand-in) carries reasoning."""
    return any(getattr(delta, name, None) for name in CHAT_REASONING_FIELDS)


def _note_account(st: StreamStats, chunk: Any) -> None:
    """Keeps ``chunk`` when it carries the server's account (llama.cpp puts ``timings`` on the last
    chunk: the usage chunk, or the finish chunk without ``include_usage``; vLLM its ``metrics``).
    Called for finish and usage chunks only: a dict lookup or two, a few times per stream."""
    extra = getattr(chunk, "__pydantic_extra__", None)
    if extra:
        if "timings" in extra or "metrics" in extra:
            st.server_item = chunk
    elif extra is None and (getattr(chunk, "timings", None) or getattr(chunk, "metrics", None)):
        st.server_item = chunk  # a pydantic v1 model or a stand-in


_REASONING_1, _REASONING_2, _REASONING_3 = CHAT_REASONING_FIELDS  # the fast path's three reads, unrolled


def _observe_chat(st: StreamStats, chunk: Any) -> int:
    """A token chunk of the usual shape (one choice, no finish reason, no usage, after the first
    chunk) is read with plain attribute reads, which cost half of ``getattr`` with a default on the
    SDK's models; they change nothing, so any other chunk, and any object that lacks one of those
    attributes, is read again by :func:`_observe_chat_chunk`, every read with a default."""
    if st.first_attributes is None:
        return _observe_chat_chunk(st, chunk)
    try:
        choices = chunk.choices
        if chunk.usage is not None or type(choices) is not list or len(choices) != 1:
            return _observe_chat_chunk(st, chunk)
        choice = choices[0]
        delta = choice.delta
        if choice.finish_reason or delta is None:
            return _observe_chat_chunk(st, chunk)
        if delta.content:
            return ANSWER
        extra = delta.__pydantic_extra__  # a pydantic v2 model's extra fields (a dict, or None)
    except AttributeError:
        return _observe_chat_chunk(st, chunk)
    if extra and (extra.get(_REASONING_1) or extra.get(_REASONING_2) or extra.get(_REASONING_3)):
        return REASONING
    return _observe_chat_chunk(st, chunk)


def _observe_chat_chunk(st: StreamStats, chunk: Any) -> int:
    """Any chat chunk: the first (its response attributes), usage, finish reasons, every choice."""
    if st.first_attributes is None:  # read now: no chunk is kept alive (O(1) memory per stream)
        st.first_attributes = response_attributes(chunk)
    usage = getattr(chunk, "usage", None)
    if usage is not None:
        st.usage = usage
        _note_account(st, chunk)
    # The SDK builds chunks without validation: any field may hold any JSON, so every read has a default.
    choices = getattr(chunk, "choices", None)
    if not choices or not isinstance(choices, list):
        return 0
    channel = 0
    for choice in choices:
        reason = getattr(choice, "finish_reason", None)
        if reason:
            _add_finish_reason(st, reason)
            _note_account(st, chunk)
        delta = getattr(choice, "delta", None)
        if delta is None:
            continue
        if getattr(delta, "content", None):
            channel |= ANSWER  # a delta with reasoning too (a server's last piece) counts as answer
            continue
        try:
            extra = delta.__pydantic_extra__  # a pydantic v2 model's extra fields (a dict, or None)
        except AttributeError:
            extra = _MISSING
        if extra is _MISSING:
            reasoning: Any = _reasoning_attribute(delta)
        elif extra:
            reasoning = (
                extra.get("reasoning_content") or extra.get("reasoning") or extra.get("reasoning_details")
            )
        else:
            reasoning = None
        if reasoning:  # read before tool calls and refusals: a reasoning chunk skips two reads
            channel |= REASONING
        elif getattr(delta, "tool_calls", None) or getattr(delta, "refusal", None):
            channel |= ANSWER
    return channel


def _observe_completions(st: StreamStats, chunk: Any) -> int:
    if st.first_attributes is None:
        st.first_attributes = response_attributes(chunk)
    usage = getattr(chunk, "usage", None)
    if usage is not None:
        st.usage = usage
        _note_account(st, chunk)
    choices = getattr(chunk, "choices", None)
    if not choices or not isinstance(choices, list):
        return 0
    channel = 0
    for choice in choices:
        reason = getattr(choice, "finish_reason", None)
        if reason:
            _add_finish_reason(st, reason)
            _note_account(st, chunk)
        if getattr(choice, "text", None):
            channel = ANSWER
    return channel


_RESPONSES_FINAL = ("response.completed", "response.incomplete", "response.failed")
_RESPONSES_REASONING = {
    "response.reasoning_text.delta": REASONING,
    "response.reasoning_summary_text.delta": SUMMARY,
}


def _observe_responses(st: StreamStats, event: Any) -> int:
    """Tokens: any non-empty ``*.delta`` event; reasoning text and reasoning summary deltas are
    their own channels, every other (output text, refusal, function-call arguments, audio...) is
    the answer. ``response.failed`` and ``error`` events set ``error_item``: the operation then ends
    as an error with the provider's code (:func:`.errors.stream_error`)."""
    event_type = getattr(event, "type", None)
    if not isinstance(event_type, str):
        return 0
    if event_type.endswith(".delta"):
        if not getattr(event, "delta", True):
            return 0
        return _RESPONSES_REASONING.get(event_type, ANSWER)
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
    return 0


def _observe_any(st: StreamStats, chunk: Any) -> int:
    return ANSWER


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

    When this ``next`` blocked, the chunk arrived at ``t1``: no doubt about it, and the server-side
    gap is arrival to arrival (the caller's own time since the previous chunk overlapped the
    server's work, so it is not counted twice). When the chunk was already buffered, the server was
    ahead: it arrived during the time spent outside ``next`` since the last observed arrival
    (``doubt_ns``, which grows by the caller's time before this ``next``), its gap is not observed,
    and the caller's time stays consumer time. Token chunks keep their hand-over and doubt:
    :mod:`.token_times` decides from the two how sure each boundary is. Stalls and the largest gap
    are gaps between tokens: the wait for the first one is the first_token phase's.
    """
    st = op.stream
    wait = t1 - t0
    st.wait_ns += wait
    index = st.chunks
    st.chunks = index + 1
    # the earliest the process had its bytes: the event loop's stamp, else the read's return
    # (:mod:`.reads`); without reads counted, the hand-over
    mark = st.read_ns or t1
    gap = 0
    if wait > BLOCKED_NS:
        st.doubt_ns = 0
        if index == 0:
            st.first_chunk_ns = mark
        else:
            gap = mark - st.last_mark_ns
            _add_gap(st, gap)
    elif index == 0:  # it waited while the caller was elsewhere (that time is in doubt_ns already)
        st.first_chunk_ns = mark - st.consumer_ns
    else:
        st.buffered_chunks += 1
        st.doubt_ns += t0 - st.last_activity_ns
    st.last_activity_ns = t1
    st.last_mark_ns = mark
    channel = observe(st, item)
    if not channel:
        return
    seen = st.channels
    if channel | seen == seen:  # the common case: one more token of a channel already seen
        if gap:
            _token_gap(op, st, index, gap, mark)
    else:
        _new_channel(op, st, channel, index, gap, mark)
    if st.reads and st.reads == st.first_token_read and st.token_chunks:  # the first token's read
        st.burst += 1
    st.token_chunks += 1
    st.last_token_ns = mark
    st.last_token_doubt_ns = st.doubt_ns


def _add_gap(st: StreamStats, gap: int) -> None:
    if st.gaps is None:
        st.gaps = array("q")
    st.gaps.append(gap)


def _token_gap(op: Operation, st: StreamStats, index: int, gap: int, t1: int) -> None:
    """An observed gap between two token chunks: the pace, the largest gap, stalls."""
    st.token_gap_ns += gap
    st.token_gaps += 1
    if gap > st.max_gap_ns:
        st.max_gap_ns = gap
    if gap > op.stall_threshold_ns:
        if st.stalls is None:
            st.stalls = []
        st.stalls.append((index, gap, t1))


def _new_channel(op: Operation, st: StreamStats, channel: int, index: int, gap: int, t1: int) -> None:
    """A token chunk of a channel not seen before: the first token, the first answer token, the first
    reasoning (or summary) token."""
    if not st.token_chunks:
        op.timeline.first_token_ns = t1
        st.first_token_doubt_ns = st.doubt_ns
        st.first_token_read = st.reads
    elif gap:
        _token_gap(op, st, index, gap, t1)
    st.channels |= channel
    if channel & ANSWER and not st.answering:  # channels has ANSWER from now on
        st.answering = True
        op.timeline.first_answer_ns = t1
        st.first_answer_doubt_ns = st.doubt_ns
        st.token_gap_ns_to_answer = st.token_gap_ns
        st.token_gaps_to_answer = st.token_gaps
        st.tokens_to_answer = st.token_chunks


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
    st.doubt_ns = t0 - (op.timeline.headers_ns or t0)
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
    st.doubt_ns = t0 - (op.timeline.headers_ns or t0)
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

"""Random response and chunk shapes for the fuzz tests (``tests/core/test_fuzz.py``, ``scripts/fuzz.py``).

A :class:`Case` is one SDK call (chat or Responses, sync or async, stream or not) and the response the
fake server writes for it as is (:class:`~openai_latency.fake_server.Canned`): fields missing, null or
of the wrong type, huge strings, bytes that are not UTF-8, empty ``choices``, thousands of tiny chunks,
unknown event types. :func:`check` makes the call without and with instrumentation and compares.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from openai_latency.fake_server import Canned, FakeServer
from tests.support import network

MESSAGES = [{"role": "user", "content": "fuzz"}]
SDK_TRACE_LOGGER = "opentelemetry.sdk.trace"
HUGE = "x" * 300_000

# --- values ------------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=True),  # NaN != NaN would fail the comparison itself
    st.text(max_size=12),
    st.just(HUGE),
)
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The right shape most of the time, anything else sometimes."""
    return st.one_of(strategy, strategy, junk)


counts = maybe(st.integers(min_value=0, max_value=10_000))
usage = st.fixed_dictionaries(
    {},
    optional={
        "prompt_tokens": counts,
        "completion_tokens": counts,
        "input_tokens": counts,
        "output_tokens": counts,
        "total_tokens": counts,
        "prompt_tokens_details": maybe(st.fixed_dictionaries({}, optional={"cached_tokens": counts})),
        "completion_tokens_details": maybe(st.fixed_dictionaries({}, optional={"reasoning_tokens": counts})),
    },
)
text = maybe(st.text(max_size=20) | st.just(HUGE))
finish = maybe(st.sampled_from(["stop", "length", "tool_calls", "content_filter", None]))
tool_calls = maybe(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "index": counts,
                "id": text,
                "type": maybe(st.just("function")),
                "function": maybe(st.fixed_dictionaries({}, optional={"name": text, "arguments": text})),
            },
        ),
        max_size=2,
    )
)
delta = st.fixed_dictionaries(
    {},
    optional={
        "role": maybe(st.just("assistant")),
        "content": text,
        "refusal": text,
        "tool_calls": tool_calls,
    },
)
chat_choice = st.fixed_dictionaries(
    {},
    optional={"index": counts, "delta": maybe(delta), "message": maybe(delta), "finish_reason": finish},
)
common = {
    "id": text,
    "model": text,
    "created": counts,
    "usage": maybe(usage),
    "system_fingerprint": text,
    "service_tier": text,
}
chat_chunk = st.fixed_dictionaries(
    {},
    optional={
        **common,
        "object": maybe(st.sampled_from(["chat.completion.chunk", "chat.completion"])),
        "choices": maybe(st.lists(chat_choice, max_size=3)),
    },
)
RESPONSE_EVENTS = (
    "response.created",
    "response.in_progress",
    "response.output_text.delta",
    "response.function_call_arguments.delta",
    "response.completed",
    "response.failed",
    "response.incomplete",
    "error",
    "response.unknown_future_event",
)
response_object = st.fixed_dictionaries(
    {},
    optional={
        **common,
        "object": maybe(st.just("response")),
        "status": maybe(st.sampled_from(["completed", "failed", "incomplete", "in_progress"])),
        "output": maybe(st.lists(junk, max_size=2)),
        "error": maybe(st.fixed_dictionaries({}, optional={"code": text, "message": text})),
    },
)
response_event = st.fixed_dictionaries(
    {},
    optional={
        "type": maybe(st.sampled_from(RESPONSE_EVENTS)),
        "sequence_number": counts,
        "delta": text,
        "response": maybe(response_object),
        "code": text,
        "message": text,
    },
)

# --- wire ----------------------------------------------------------------------------------------


def _data(value: Any) -> bytes:
    return f"data: {json.dumps(value)}\n\n".encode()


def sse_pieces(event: st.SearchStrategy[Any]) -> st.SearchStrategy[list[bytes]]:
    one = st.one_of(
        event.map(_data),
        event.map(_data),
        st.tuples(st.sampled_from(["weird", "thread.run", "error", "ping"]), event).map(
            lambda pair: f"event: {pair[0]}\n".encode() + _data(pair[1])
        ),
        st.binary(max_size=16).map(lambda raw: b"data: " + raw + b"\n\n"),  # often not UTF-8 (nor JSON)
        st.just(b": keep-alive comment\n\n"),
        st.just(b"data: {not json\n\n"),
    )
    body = st.lists(one, max_size=8)
    tail = st.sampled_from([[b"data: [DONE]\n\n"], [b"data: [DONE]\n\n"], []])
    return st.tuples(body, tail).map(lambda parts: parts[0] + parts[1])


def tiny_chunks(endpoint: str) -> st.SearchStrategy[list[bytes]]:
    """Thousands of one-character chunks, a few writes of many chunks each."""
    if endpoint == "chat":
        chunk = _data(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": "a"}}],
            }
        )
    else:
        chunk = _data({"type": "response.output_text.delta", "delta": "a", "sequence_number": 1})

    def build(count: int) -> list[bytes]:
        return [chunk * 500 for _ in range(count // 500)] + [b"data: [DONE]\n\n"]

    return st.integers(min_value=1_000, max_value=3_000).map(build)


# --- cases ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    endpoint: str
    is_async: bool
    stream: bool
    canned: Canned


@st.composite
def cases(draw: st.DrawFn) -> Case:
    endpoint = draw(st.sampled_from(["chat", "responses"]))
    is_async = draw(st.booleans())
    stream = draw(st.booleans())
    status = draw(st.sampled_from([200, 200, 200, 200, 400, 429, 500]))
    if stream:
        event = chat_chunk if endpoint == "chat" else response_event
        pieces = draw(st.one_of(sse_pieces(event), sse_pieces(event), tiny_chunks(endpoint)))
        content_type = draw(st.sampled_from(["text/event-stream", "text/event-stream", "application/json"]))
        return Case(endpoint, is_async, stream, Canned(pieces, status, content_type, stream=True))
    shape = chat_chunk if endpoint == "chat" else response_object
    body = draw(
        st.one_of(
            shape.map(lambda value: json.dumps(value).encode()),
            shape.map(lambda value: json.dumps(value).encode()),
            junk.map(lambda value: json.dumps(value).encode()),
            st.binary(max_size=32),
            st.just(b""),
        )
    )
    content_type = draw(st.sampled_from(["application/json", "application/json", "text/plain"]))
    return Case(endpoint, is_async, stream, Canned([body], status, content_type))


# --- one call, without and with instrumentation ---------------------------------------------------


@dataclass
class Outcome:
    items: list[Any]
    exception: tuple[type[BaseException], str] | None


def _norm(item: Any) -> Any:
    try:
        return (type(item).__name__, item.model_dump(warnings=False))
    except Exception as exc:  # a shape the SDK's own serializer cannot dump: compare what it raises
        return (type(item).__name__, "model_dump raised", type(exc).__name__)


def _call(client: Any, case: Case) -> Any:
    if case.endpoint == "chat":
        return client.chat.completions.create(model="m", messages=MESSAGES, stream=case.stream)
    return client.responses.create(model="m", input="fuzz", stream=case.stream)


def run(server: FakeServer, case: Case) -> Outcome:
    server.enqueue(case.canned)
    items: list[Any] = []
    if case.is_async:

        async def go() -> None:
            client = network.client(server.base_url, is_async=True, max_retries=0, timeout=10)
            try:
                result = await _call(client, case)
                if case.stream:
                    async for item in result:
                        items.append(_norm(item))
                else:
                    items.append(_norm(result))
            finally:
                await client.close()

        runner: Callable[[], Any] = lambda: asyncio.run(go())  # noqa: E731
    else:

        def runner() -> None:
            client = network.client(server.base_url, max_retries=0, timeout=10)
            with client:
                result = _call(client, case)
                if case.stream:
                    items.extend(_norm(item) for item in result)
                else:
                    items.append(_norm(result))

    try:
        runner()
    except Exception as exc:
        return Outcome(items, (type(exc), str(exc)))
    return Outcome(items, None)


class EndWarnings(logging.Handler):
    """Collects the OTel SDK's warnings about ended spans while installed: ``Calling end() on an ended
    span.`` (a second end()) and ``... on an ended span`` (an attribute, event or status set after it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "ended span" in message:
            self.messages.append(message)


@contextmanager
def end_warnings() -> Iterator[list[str]]:
    """The ended-span warnings of the OTel SDK logged inside the ``with`` block."""
    handler = EndWarnings()
    logger = logging.getLogger(SDK_TRACE_LOGGER)
    level = logger.level
    if logger.getEffectiveLevel() > logging.WARNING:  # never let a quiet logging setup hide them
        logger.setLevel(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def check(
    server: FakeServer,
    case: Case,
    instrument: Callable[[], None],
    uninstrument: Callable[[], None],
    operation_spans: Callable[[], Sequence[Any]],
) -> None:
    """Same outcome with and without instrumentation, and exactly one operation span, ended once."""
    uninstrument()
    baseline = run(server, case)
    instrument()
    with end_warnings() as warnings:
        got = run(server, case)
        spans = operation_spans()
    assert got == baseline, (case, baseline.exception, got.exception)
    assert len(spans) == 1, [s.name for s in spans]
    assert spans[0].end_time is not None
    # ended once: the SDK exports a span on its first end() and only warns on a second one
    assert warnings == [], (case, warnings)

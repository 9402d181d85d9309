"""Writing one response: the common headers, a JSON body, a canned one, a corrupt one (the stream
engine, which paces a :class:`~.payloads.StreamPlan`, is :mod:`.stream_engine`).

Every function logs in the record what it did (status, ``headers_sent_ns``, ``(kind, ns)`` events
taken right after each write returned) and returns the request's outcome.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Final

from . import payloads
from .exchange import ResponseWriter
from .payloads import JSON
from .records import Outcome, RequestRecord
from .script import DEFAULT_RATE_LIMITS, Script

SSE_TYPE: Final = "text/event-stream; charset=utf-8"
JSON_TYPE: Final = "application/json"


def _rate_limit_headers(limits: Mapping[str, str]) -> list[tuple[str, str]]:
    return [(f"x-{key}", value) for key, value in limits.items()]


_DEFAULT_RATE_LIMIT_HEADERS: Final = _rate_limit_headers(DEFAULT_RATE_LIMITS)


def response_headers(
    record: RequestRecord,
    script: Script,
    content_type: str,
    streamed: bool,
    extra: Sequence[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """Response headers but the framing ones (length, connection), which the writer adds."""
    processing = script.processing_ms
    if processing is None:
        processing = str(round((time.perf_counter_ns() - record.received_ns) / 1e6))
    limits = script.rate_limits
    return [
        ("content-type", content_type),
        *((("cache-control", "no-cache"),) if streamed else ()),
        ("x-request-id", record.request_id),
        ("openai-processing-ms", processing),
        ("openai-version", "2020-10-01"),
        *(_DEFAULT_RATE_LIMIT_HEADERS if limits is DEFAULT_RATE_LIMITS else _rate_limit_headers(limits)),
        *extra,
    ]


async def send_head(
    conn: ResponseWriter,
    record: RequestRecord,
    status: int,
    headers: Sequence[tuple[str, str]],
    length: int | None,
    body: bytes = b"",
) -> bool:
    """``conn.send_head``, logged: ``headers_sent_ns`` is taken as soon as the write returned."""
    record.status = status
    sent = await conn.send_head(status, headers, length, body)
    record.headers_sent_ns = time.perf_counter_ns()
    return sent


def disconnect(conn: ResponseWriter, record: RequestRecord) -> Outcome:
    """The ``disconnect`` fault (and ``corrupt=truncated``): give up on the response mid-way."""
    conn.abort()
    record.events.append(("disconnect", time.perf_counter_ns()))
    return "disconnected"


async def send_json(
    conn: ResponseWriter,
    record: RequestRecord,
    script: Script,
    status: int,
    body: JSON,
    extra: Sequence[tuple[str, str]] = (),
) -> Outcome:
    payload = payloads.dumps(body).encode()
    head = response_headers(record, script, JSON_TYPE, False, extra)
    done: Outcome = "ok" if status < 400 else "error"
    if script.body_delay <= 0 and script.disconnect_after is None:
        sent = await send_head(conn, record, status, head, len(payload), payload)
        assert record.headers_sent_ns is not None
        record.events.append(("body", record.headers_sent_ns))  # the body went in the same write
        return done if sent else "client_closed"
    if not await send_head(conn, record, status, head, len(payload)):
        return "client_closed"
    if script.disconnect_after is not None:
        return disconnect(conn, record)
    if not await conn.sleep(script.body_delay) or not await conn.send_body(payload, end=True):
        return "client_closed"
    record.events.append(("body", time.perf_counter_ns()))
    return done


async def send_canned(conn: ResponseWriter, record: RequestRecord, canned: payloads.Canned) -> Outcome:
    head = [("content-type", canned.content_type), ("x-request-id", record.request_id)]
    if not canned.stream:
        body = b"".join(canned.pieces)
        sent = await send_head(conn, record, canned.status, head, len(body), body)
        return "ok" if sent else "client_closed"
    sent = await send_head(conn, record, canned.status, head, None)
    for index, piece in enumerate(canned.pieces):
        if not sent or not await conn.send_body(piece, end=index == len(canned.pieces) - 1):
            return "client_closed"
    if not canned.pieces and sent:
        await conn.send_body(b"", end=True)
    return "ok"


async def send_corrupt(
    conn: ResponseWriter, record: RequestRecord, script: Script, corrupt: str, out: payloads.Output
) -> Outcome:
    """A 200 whose body is broken the ``corrupt`` way (non-stream)."""
    good = payloads.dumps(payloads.chat_json(out, 1)).encode()
    payload = payloads.dumps(payloads.WRONG_SHAPE).encode() if corrupt == "wrong-shape" else good
    if corrupt == "invalid-json":
        payload = good[: len(good) // 2]
    head = response_headers(record, script, JSON_TYPE, False)
    if corrupt != "truncated":
        sent = await send_head(conn, record, 200, head, len(payload), payload)
        return "ok" if sent else "client_closed"
    sent = await send_head(conn, record, 200, head, len(payload))
    if not sent or not await conn.send_body(payload[: len(payload) // 2]):
        return "client_closed"
    return disconnect(conn, record)

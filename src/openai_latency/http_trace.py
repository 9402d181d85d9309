"""httpcore ``trace`` request extension -> marks on the current attempt.

httpcore (httpcore2 in openai 3) calls ``request.extensions["trace"](event_name, info)`` at each step
of a request: ``connection.connect_tcp.started``, ``connection.start_tls.complete``,
``http11.send_request_headers.started``, ``http11.receive_response_headers.complete``, ...
A sync transport wants a plain function and an async transport an ``async def``; the wrong kind
makes the user's call fail, so each client kind gets its own. A callback that is already there
(the user's) is chained and keeps receiving every event. Ours never raises.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ._guard import report
from .attributes import qualified_name
from .timeline import Attempt, clock

SyncTrace = Callable[[str, Any], None]
AsyncTrace = Callable[[str, Any], Awaitable[None]]

_HEADERS_RECEIVED = "receive_response_headers.complete"
_CONNECT = "connection.connect_tcp.started"
_FAILED = ".failed"


def _record(attempt: Attempt, name: str, info: Any) -> None:
    now = clock()
    attempt.events.append((name, now))
    if name == _CONNECT:
        attempt.new_connection = True
    elif not attempt.headers_ns and name.endswith(_HEADERS_RECEIVED):
        attempt.headers_ns = now
    elif name.endswith(_FAILED):
        exc = info.get("exception") if isinstance(info, dict) else None
        if attempt.failures is None:
            attempt.failures = {}
        step = name.partition(".")[2][: -len(_FAILED)]
        attempt.failures[step] = qualified_name(type(exc)) if exc is not None else "_OTHER"


def install_sync(extensions: MutableMapping[str, Any], attempt: Attempt) -> None:
    user: SyncTrace | None = extensions.get("trace")

    def trace(event_name: str, info: Any) -> None:
        try:
            _record(attempt, event_name, info)
        except Exception:
            report("http trace event")
        if user is not None:
            user(event_name, info)

    extensions["trace"] = trace


def install_async(extensions: MutableMapping[str, Any], attempt: Attempt) -> None:
    user: AsyncTrace | None = extensions.get("trace")

    async def trace(event_name: str, info: Any) -> None:
        try:
            _record(attempt, event_name, info)
        except Exception:
            report("http trace event")
        if user is not None:
            await user(event_name, info)

    extensions["trace"] = trace

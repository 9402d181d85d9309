"""httpcore ``trace`` request extension -> marks on the current attempt.

httpcore (httpcore2 in openai 3) calls ``request.extensions["trace"](event_name, info)`` at each step
of a request: ``connection.connect_tcp.started``, ``connection.start_tls.complete``,
``http11.send_request_headers.started``, ``http11.receive_response_headers.complete``, ...
A sync transport wants a plain function and an async transport an ``async def``; the wrong kind
makes the user's call fail, so each client kind gets its own. A callback that is already there
(the user's) is chained and keeps receiving every event. Ours never raises.

Nothing after the response headers feeds a phase (the body's read is ``response_read`` /
``first_token``, timed by the SDK hooks), so at ``receive_response_headers.complete`` ours steps
out of the request's extensions (the user's callback, if any, goes back in): httpcore then skips the
four body and close events (a callback call and an info dict each) of every request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .._guard import report
from ..call.timeline import Attempt
from ..clock import clock
from ..read.errors import qualified_name

SyncTrace = Callable[[str, Any], None]
AsyncTrace = Callable[[str, Any], Awaitable[None]]

_FAILED = ".failed"
_LAST = "receive_response_headers.complete"
"""The last event a phase uses."""


def _step_out(extensions: MutableMapping[str, Any], user: object | None) -> None:
    """Takes our callback out of the request's extensions (the user's goes back in). The callback
    must not refer to itself: a function in a reference cycle (with the attempt and its span behind
    it) waits for the cyclic garbage collector, and that cost more than the events saved."""
    if user is None:
        extensions.pop("trace", None)
    else:
        extensions["trace"] = user


def _record_failure(attempt: Attempt, name: str, info: Any) -> None:
    """A ``*.failed`` event: which step failed, and the qualified name of its exception."""
    exc = info.get("exception") if isinstance(info, dict) else None
    if attempt.failures is None:
        attempt.failures = {}
    step = name.partition(".")[2][: -len(_FAILED)]
    attempt.failures[step] = qualified_name(type(exc)) if exc is not None else "_OTHER"


# Per event: one clock read and one append (about ten events per request). Everything else (headers
# time, new connection) is read from the events once, when the attempt ends (Attempt.settle).


def install_sync(extensions: MutableMapping[str, Any], attempt: Attempt) -> None:
    user: SyncTrace | None = extensions.get("trace")
    append = attempt.events.append

    def trace(event_name: str, info: Any) -> None:
        append((event_name, clock()))
        if event_name.endswith(_FAILED):
            try:
                _record_failure(attempt, event_name, info)
            except Exception:
                report("http trace event")
        elif event_name.endswith(_LAST):
            _step_out(extensions, user)
        if user is not None:
            user(event_name, info)

    extensions["trace"] = trace


def install_async(extensions: MutableMapping[str, Any], attempt: Attempt) -> None:
    user: AsyncTrace | None = extensions.get("trace")
    append = attempt.events.append

    async def trace(event_name: str, info: Any) -> None:
        append((event_name, clock()))
        if event_name.endswith(_FAILED):
            try:
                _record_failure(attempt, event_name, info)
            except Exception:
                report("http trace event")
        elif event_name.endswith(_LAST):
            _step_out(extensions, user)
        if user is not None:
            await user(event_name, info)

    extensions["trace"] = trace

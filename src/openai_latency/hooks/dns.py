"""``OPENAI_LATENCY_TRACE_DNS=true``: time name resolution apart from the TCP connect.

httpcore resolves the host inside ``connect_tcp``, so without this ``http.connect`` includes DNS.
Sync transports resolve through ``socket.create_connection`` -> ``socket.getaddrinfo``; the async
backend (httpcore's and httpcore2's ``AnyIOBackend``) through ``anyio.connect_tcp`` ->
``anyio._core._sockets.getaddrinfo`` (asyncio then runs ``socket.getaddrinfo`` in an executor
thread, where our context is absent, so nothing is counted twice).

Both wrappers act only while an SDK call's HTTP attempt is in flight in the calling context (the
``CURRENT`` operation's last attempt has not ended); everywhere else they cost one contextvar read.
A WebSocket opening handshake in flight (``HANDSHAKE``) is noted the same way; on the asyncio client
it awaits the event loop's ``getaddrinfo`` (``BaseEventLoop.getaddrinfo``, wrapped too, for handshakes
only: :func:`_loop_getaddrinfo`). They record
``(first start, last end)`` on the attempt; :mod:`openai_latency.call.timeline` splits
``http.dns`` off ``http.connect`` with it.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable
from typing import Any

import wrapt

from ..call.timeline import Attempt
from ..clock import clock
from ..model import Args, Kwargs, Wrapped
from .registry import CURRENT, HANDSHAKE, DnsMarks

#: (module, function) pairs wrapped when DNS tracing is on.
TARGETS = (("socket", "getaddrinfo"), ("anyio._core._sockets", "getaddrinfo"))


def _in_flight() -> Attempt | DnsMarks | None:
    op = CURRENT.get()
    if op is None:
        return HANDSHAKE.get()  # a WebSocket handshake (sync client: websockets resolves here)
    attempts = op.timeline.attempts
    if not attempts or attempts[-1].end_ns:
        return None
    return attempts[-1]


def _sync_getaddrinfo(wrapped: Wrapped, instance: object, args: Args, kwargs: Kwargs) -> Any:
    attempt = _in_flight()
    if attempt is None:
        return wrapped(*args, **kwargs)
    start = clock()
    try:
        return wrapped(*args, **kwargs)
    finally:
        attempt.note_dns(start, clock())


def _async_getaddrinfo(wrapped: Wrapped, instance: object, args: Args, kwargs: Kwargs) -> Any:
    attempt = _in_flight()
    if attempt is None:
        return wrapped(*args, **kwargs)
    return _timed(attempt, wrapped(*args, **kwargs))


async def _timed(attempt: Attempt | DnsMarks, resolving: Awaitable[Any]) -> Any:
    start = clock()
    try:
        return await resolving
    finally:
        attempt.note_dns(start, clock())


def _loop_getaddrinfo(wrapped: Wrapped, instance: object, args: Args, kwargs: Kwargs) -> Any:
    """An event loop's ``getaddrinfo`` awaited by a WebSocket handshake's task (an SDK call's HTTP
    attempt resolves through anyio's, above; a handshake that is over ignores the note)."""
    marks = HANDSHAKE.get()
    if marks is None:
        return wrapped(*args, **kwargs)
    return _timed(marks, wrapped(*args, **kwargs))


def install() -> list[tuple[Any, str]]:
    """Wraps the resolvers that exist here; returns ``(module, name)`` pairs for ``unwrap``."""
    wrappers = {"socket": _sync_getaddrinfo, "anyio._core._sockets": _async_getaddrinfo}
    patched: list[tuple[Any, str]] = []
    for module_name, function in TARGETS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if not callable(getattr(module, function, None)):
            continue
        wrapt.wrap_function_wrapper(module, function, wrappers[module_name])
        patched.append((module, function))
    # a WebSocket handshake on the asyncio client: its task awaits the loop's getaddrinfo
    loop_class = importlib.import_module("asyncio.base_events").BaseEventLoop
    if "getaddrinfo" in vars(loop_class):
        wrapt.wrap_function_wrapper(loop_class, "getaddrinfo", _loop_getaddrinfo)
        patched.append((loop_class, "getaddrinfo"))
    return patched

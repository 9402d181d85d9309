"""When each WebSocket message arrived: stamped in the websockets reader, handed to the caller's ``recv``.

The ``websockets`` connections the SDK opens read frames apart from the caller: the sync client in a
background thread, the asyncio client in its protocol's ``data_received``. Both hand every frame to
the connection's ``process_event`` before queueing it for ``recv()``. :func:`install` puts a function
in front of that method on one connection object (an instance attribute: no websockets class is
patched, no other connection pays anything) that appends ``(clock, length)`` for each final frame of
a data message, *before* the message is queued, so the stamp is always there when ``recv()`` returns
it. :func:`take` pairs the message ``recv()`` returned with the oldest stamp.

A message queued before :func:`install` ran (a Realtime ``session.created`` that came with the
handshake's response) has no stamp: :func:`take` sees that the oldest stamp's length differs and
leaves it for the message it belongs to; the caller then uses the hand-over time. A message of several
frames is stamped at its last frame, with the size of all its frames.

The same install puts a watcher in front of the connection's ``recv`` (the SDK's ``recv_bytes`` reads
through it): when it raises ``ConnectionClosed`` and the SDK connection that owns it (:func:`own`) did
not close it on purpose, the connection was lost and its open turns end as errors. One Python call
per message, where a class-level wrapper of ``recv_bytes`` cost three times as much.

The reader pauses when websockets' receive queue is full (``max_queue``, 16 messages by default):
messages that wait in the socket's buffer meanwhile are stamped when the reader takes them, so a
caller more than ``max_queue`` messages behind sees late arrivals (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import inspect
import warnings
import weakref
from collections import deque
from typing import Any, Final

from .._guard import report
from ..clock import clock

ATTRIBUTE: Final = "_openai_latency_arrivals"
"""Where a websockets connection keeps its stamps (in its ``__dict__``)."""
MAX_STAMPS: Final = 4096
"""Stamps kept per connection at most: messages never taken through the SDK's ``recv`` (read some
other way) drop out from the oldest instead of growing the deque."""

_installed: weakref.WeakSet[Any] = weakref.WeakSet()

Stamps = deque[tuple[int, int]]


def install(ws: Any) -> Stamps | None:
    """Stamps the messages ``ws`` receives from now on; the stamps (None when ``ws`` has no
    ``process_event``: not a websockets connection, or a version that reads differently)."""
    stamps: Stamps | None = ws.__dict__.get(ATTRIBUTE)
    if stamps is not None:
        return stamps
    original = getattr(ws, "process_event", None)
    if original is None:
        return None
    try:
        from websockets.frames import Opcode
    except ImportError:  # no websockets: not one of its connections
        return None
    stamps = deque(maxlen=MAX_STAMPS)
    partial = [0]  # bytes of the frames so far of a fragmented message (the reader's thread only)
    text, binary, cont = Opcode.TEXT, Opcode.BINARY, Opcode.CONT

    def process_event(
        event: Any, _append: Any = stamps.append, _clock: Any = clock, _original: Any = original
    ) -> None:
        # the last frame of a data message (TEXT, BINARY, or CONT after fragments: websockets' frames
        # carry its Opcode members, compared by identity), stamped with the whole message's size
        # before it is queued, so recv() never returns a message whose stamp is not there yet;
        # anything else is websockets' alone: no exception of ours in its reader
        try:
            opcode = event.opcode
            if opcode is text or opcode is binary:
                if event.fin:
                    _append((_clock(), len(event.data)))
                else:
                    partial[0] = len(event.data)
            elif opcode is cont:
                if event.fin:
                    _append((_clock(), partial[0] + len(event.data)))
                    partial[0] = 0
                else:
                    partial[0] += len(event.data)
        except Exception:
            pass
        _original(event)

    ws.__dict__[ATTRIBUTE] = stamps
    ws.process_event = process_event
    _watch(ws)
    _installed.add(ws)
    return stamps


TURNS: Final = "_openai_latency_ws_turns"
"""The SDK connection's turns, kept on its websockets connection too (for :func:`lost`)."""
OWNER: Final = "_openai_latency_owner"


def own(ws: Any, connection: Any, turns: Any) -> None:
    """``ws`` belongs to the SDK ``connection``, whose open turns are ``turns``."""
    store = ws.__dict__
    if store.get(TURNS) is not turns:
        store[TURNS] = turns
        store[OWNER] = weakref.ref(connection)


def _watch(ws: Any) -> None:
    """``ws.recv`` (sync or asyncio) with :func:`lost` on the way out of a failure. websockets' own
    signatures (``timeout, decode`` sync, ``decode`` asyncio; the SDK passes ``decode=False``) get a
    watcher with the same parameters: no argument tuple and keyword dict to build per message."""
    original = getattr(ws, "recv", None)
    if original is None:
        return
    known = _parameters(original)
    if inspect.iscoroutinefunction(original):
        ws.recv = _async_watcher(ws, original) if known == ("decode",) else _any_async_watcher(ws, original)
    else:
        ws.recv = _watcher(ws, original) if known == ("timeout", "decode") else _any_watcher(ws, original)
    track(ws, ("recv",))


def _parameters(method: Any) -> tuple[str, ...] | None:
    try:
        return tuple(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return None


def _watcher(ws: Any, original: Any) -> Any:
    def recv(timeout: float | None = None, decode: bool | None = None) -> Any:
        try:
            return original(timeout, decode)
        except BaseException as exc:
            lost(ws, exc)
            raise

    return recv


def _async_watcher(ws: Any, original: Any) -> Any:
    async def recv(decode: bool | None = None) -> Any:
        try:
            return await original(decode)
        except BaseException as exc:
            lost(ws, exc)
            raise

    return recv


def _any_watcher(ws: Any, original: Any) -> Any:
    def recv(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except BaseException as exc:
            lost(ws, exc)
            raise

    return recv


def _any_async_watcher(ws: Any, original: Any) -> Any:
    async def recv(*args: Any, **kwargs: Any) -> Any:
        try:
            return await original(*args, **kwargs)
        except BaseException as exc:
            lost(ws, exc)
            raise

    return recv


def lost(ws: Any, exc: BaseException) -> None:
    """``recv`` raised: a lost connection ends the open turns as errors (a close of the caller's own
    ended them already; a cancelled ``recv`` is no loss: the SDK's ``recv`` is cancel-safe)."""
    try:
        store = ws.__dict__
        turns = store.get(TURNS)
        owner = store.get(OWNER)
        connection = owner() if owner is not None else None
        if turns is None or connection is None or getattr(connection, "_intentionally_closed", False):
            return
        from websockets.exceptions import ConnectionClosed

        if isinstance(exc, ConnectionClosed):
            # error naming reads ``exc.code``, which websockets >= 13.1 deprecates on ConnectionClosed:
            # no warning of ours in the application's output (a lost connection is rare: the global
            # filter change lasts one finish)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                turns.end_all(clock(), "error", exc)
    except Exception:
        report("websocket lost")


def take(ws: Any, message: Any) -> int:
    """The arrival of ``message``, which ``ws.recv()`` just returned, or 0 when unknown."""
    stamps: Stamps | None = ws.__dict__.get(ATTRIBUTE)
    return pop(stamps, message) if stamps else 0


def pop(stamps: Stamps, message: Any) -> int:
    """The oldest stamp's arrival if it is ``message``'s (same size), else 0: a message queued before
    :func:`install` has none, and the oldest stamp is then a later message's, left for it.
    (:func:`.responses.event_parser` does the same inline.)"""
    try:
        stamp = stamps.popleft()
        if stamp[1] == len(message):
            return stamp[0]
        stamps.appendleft(stamp)
    except Exception:  # no stamp (IndexError), a message without a size
        pass
    return 0


WRAPPED: Final = "_openai_latency_wrapped"


def track(ws: Any, names: tuple[str, ...]) -> None:
    """``ws`` has instance wrappers of ours under ``names`` too: :func:`uninstall_all` removes them."""
    ws.__dict__[WRAPPED] = (*ws.__dict__.get(WRAPPED, ()), *names)
    _installed.add(ws)


def uninstall_all() -> None:
    """Every connection back to websockets' own methods (``uninstrument()``)."""
    for ws in list(_installed):
        store = ws.__dict__
        for name in ("process_event", *store.pop(WRAPPED, ())):
            store.pop(name, None)
        for key in (ATTRIBUTE, TURNS, OWNER):
            store.pop(key, None)
    _installed.clear()

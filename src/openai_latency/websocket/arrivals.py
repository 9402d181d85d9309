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
frames is stamped at its last frame with that frame's length only: it reads as unstamped too.

The reader pauses when websockets' receive queue is full (``max_queue``, 16 messages by default):
messages that wait in the socket's buffer meanwhile are stamped when the reader takes them, so a
caller more than ``max_queue`` messages behind sees late arrivals (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any, Final

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
    stamps = deque(maxlen=MAX_STAMPS)

    def process_event(event: Any, _append: Any = stamps.append, _clock: Any = clock) -> None:
        # a final data frame (CONT 0, TEXT 1, BINARY 2; Opcode is an IntEnum): stamped before it is
        # queued, so recv() never returns a message whose stamp is not there yet
        if getattr(event, "fin", False) and event.opcode <= 2:
            _append((_clock(), len(event.data)))
        original(event)

    ws.__dict__[ATTRIBUTE] = stamps
    ws.process_event = process_event
    _installed.add(ws)
    return stamps


def take(ws: Any, message: Any) -> int:
    """The arrival of ``message``, which ``ws.recv()`` just returned, or 0 when unknown."""
    stamps: Stamps | None = ws.__dict__.get(ATTRIBUTE)
    if not stamps:
        return 0
    arrived, length = stamps[0]
    if length != len(message):
        return 0  # a message without a stamp (queued before install): the stamp is a later one's
    stamps.popleft()
    return arrived


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
        store.pop(ATTRIBUTE, None)
    _installed.clear()

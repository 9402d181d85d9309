"""Where a hook finds the call it belongs to: the process-wide registries.

:mod:`.sdk_hooks` writes them; :mod:`.sdk_hooks`, :mod:`.dns` (and tests) read them. They live on
their own so that a low-level hook (DNS) does not depend on the wrappers module.
"""

from __future__ import annotations

import weakref
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..call.operation import Operation

CURRENT: ContextVar[Operation | None] = ContextVar("openai_latency_operation", default=None)
"""The operation of the SDK call running in this context (thread or task), if any."""

BY_RESPONSE: weakref.WeakKeyDictionary[object, Operation] = weakref.WeakKeyDictionary()
"""HTTP response -> its operation, for streams (the SDK builds the stream from the response)."""


class DnsMarks(Protocol):
    """What :mod:`.dns` notes a name resolution on: an HTTP attempt, or a WebSocket handshake."""

    def note_dns(self, start_ns: int, end_ns: int) -> None: ...


HANDSHAKE: ContextVar[DnsMarks | None] = ContextVar("openai_latency_handshake", default=None)
"""The WebSocket opening handshake in flight in this context (``websocket.handshake.Marks``), if any:
its DNS (:mod:`.dns`) and its HTTP upgrade are noted on it."""

"""When the bytes of a read reached the process: stamped by the event loop, not by the caller.

An async stream's chunk is handed over when its task runs again, and on a busy event loop (64
streams on one core) that is tens of milliseconds after the socket had the bytes, longer towards
a stream's end than at its start. A read that waited only for the loop then looks like a wait for
the network, so a stopwatch at the hand-over counts the loop's lag as the server's time, and a
whole stream that sat in the socket buffer can read as a window of a few milliseconds.

anyio's asyncio streams (under httpx/httpcore and httpx2/httpcore2) receive bytes in
``StreamProtocol.data_received``, which the loop calls in the iteration that polls the socket, one
iteration before the task that waits for the bytes runs: :func:`install` stamps each call there, in
a queue beside anyio's own queue of received chunks (``read_queue``), one stamp a chunk.
``SocketStream.receive`` takes chunks from the front of ``read_queue``; the stamps of the chunks
taken are dropped from the front of ours, the last one dropped kept as ``consumed``: the arrival of
the newest bytes a reader has taken. :func:`consumed_ns`, asked right after a read of the body, is
that read's arrival.

The stamp is the moment the loop's selector returned in that iteration (:func:`_polled`), not the
moment ``data_received`` ran: the loop first runs the task steps queued before the poll (on a
saturated loop, milliseconds of other streams' parsing), then the read callbacks, so a clock read in
``data_received`` is late by all of them, by an amount that changes from one iteration to the next.
The poll's return is an upper bound for every byte that was in the socket when it returned; bytes
that came between the poll and the read are stamped up to that same wait early (a loaded loop only;
an idle one reads within microseconds of its poll). Each selector is watched from its first stamped
read (an instance ``select`` that notes its return), and left as it was by :func:`uninstall`; a loop
without a Python selector (uvloop) keeps the clock at ``data_received``.

Only HTTP/1.1 connections are followed (an HTTP/2 connection's reads serve every stream on it), and
only anyio's asyncio backend (trio, uvloop's own transports and the sync client keep the read's
return, :mod:`.reads`). The cost is a clock read and two deque operations per ``data_received``, and
a clock read per iteration of a watched loop.
"""

from __future__ import annotations

import weakref
from asyncio import get_running_loop
from collections import deque
from typing import Any

from .._guard import guarded, report
from ..clock import clock

_PATCHED: tuple[Any, Any] | None = None
"""(anyio's StreamProtocol, its own data_received) while installed."""

_POLLS = "_openai_latency_polls"
"""A watched selector's attribute: a one-item list, the clock when its ``select`` last returned."""

_WATCHED: weakref.WeakSet[Any] = weakref.WeakSet()
_UNWATCHABLE: set[type] = set()


class Arrivals:
    """The stamps of one connection's received chunks not yet taken by a reader, oldest first, and
    the stamp of the newest chunk taken."""

    __slots__ = ("consumed", "stamps")

    def __init__(self) -> None:
        self.stamps: deque[int] = deque()
        self.consumed = 0


def _data_received(original: Any) -> Any:
    def data_received(self: Any, data: bytes) -> None:
        original(self, data)
        try:
            arrivals = self.__dict__.get("_openai_latency_arrivals")
            if arrivals is None:
                arrivals = self._openai_latency_arrivals = Arrivals()
            _settle(arrivals, len(self.read_queue) - 1)
            arrivals.stamps.append(_polled(clock()))
        except Exception:
            report("arrival stamp")

    data_received.__wrapped__ = original  # type: ignore[attr-defined]
    return data_received


def _polled(now: int) -> int:
    """When the running loop's selector last returned (at most ``now``), else ``now``."""
    selector = getattr(get_running_loop(), "_selector", None)
    polls = getattr(selector, _POLLS, None)
    if polls is None:
        if selector is not None and type(selector) not in _UNWATCHABLE:
            _watch(selector)
        return now
    polled: int = polls[0]
    return polled if 0 < polled <= now else now


def _watch(selector: Any) -> None:
    """Gives ``selector`` an instance ``select`` that notes the clock when it returns."""
    select = selector.select
    polls = [0]

    def timed_select(timeout: float | None = None) -> Any:
        events = select(timeout)
        polls[0] = clock()
        return events

    try:
        selector.select = timed_select
        setattr(selector, _POLLS, polls)
        _WATCHED.add(selector)
    except (AttributeError, TypeError):  # slots, or no weak references: keep the clock at the read
        _unwatch(selector)
        _UNWATCHABLE.add(type(selector))


def _unwatch(selector: Any) -> None:
    """Removes what :func:`_watch` set: the selector's class ``select`` serves again."""
    attributes = getattr(selector, "__dict__", {})
    attributes.pop("select", None)
    attributes.pop(_POLLS, None)


def _settle(arrivals: Arrivals, queued: int) -> None:
    """Drops the stamps of the chunks a reader took (``queued`` chunks are still in anyio's queue)."""
    stamps = arrivals.stamps
    while len(stamps) > queued:
        arrivals.consumed = stamps.popleft()


@guarded()
def install() -> None:
    """Stamps every ``data_received`` of anyio's asyncio stream protocol (once per process)."""
    global _PATCHED
    if _PATCHED is not None:
        return
    try:
        from anyio._backends._asyncio import StreamProtocol
    except ImportError:
        return
    original = StreamProtocol.__dict__.get("data_received")
    if original is None:
        return
    StreamProtocol.data_received = _data_received(original)  # type: ignore[method-assign]
    _PATCHED = (StreamProtocol, original)


@guarded()
def uninstall() -> None:
    global _PATCHED
    if _PATCHED is None:
        return
    protocol_class, original = _PATCHED
    protocol_class.data_received = original
    _PATCHED = None
    for selector in list(_WATCHED):
        _unwatch(selector)
    _WATCHED.clear()


@guarded()
def protocol_of(response: Any) -> Any:
    """The anyio protocol under an HTTP/1.1 response's connection, once its bytes are stamped; else
    None."""
    if _PATCHED is None or getattr(response, "http_version", None) != "HTTP/1.1":
        return None
    extensions = getattr(response, "extensions", None)
    stream = extensions.get("network_stream") if isinstance(extensions, dict) else None
    stream = getattr(stream, "_stream", None)  # httpcore's AnyIOStream -> anyio's stream
    stream = getattr(stream, "transport_stream", stream)  # TLS: the socket stream below it
    protocol = getattr(stream, "_protocol", None)
    if protocol is None or not isinstance(protocol, _PATCHED[0]):
        return None
    return protocol


@guarded(0)
def consumed_ns(protocol: Any) -> int:
    """The arrival of the newest bytes a reader took from ``protocol``'s connection (0: not known)."""
    arrivals = protocol.__dict__.get("_openai_latency_arrivals")
    if arrivals is None:
        return 0
    _settle(arrivals, len(protocol.read_queue))
    return int(arrivals.consumed)

"""Which network read brought each chunk of a stream, counted where the SDK reads the body.

The SDK's ``Stream`` decodes server-sent events from ``response.iter_bytes()`` (``aiter_bytes()``
when async), and yields every event complete in the bytes it holds before it asks for more. Each
item of that iterator is one read of the body (httpcore reads up to 64 KiB from the socket at a
time, and with no content encoding httpx hands each read on as it came), so the number of reads
made so far, looked at when a chunk is handed over, says which read completed it. Chunks handed over
under the same number came in one read: that tells a batch apart from a pace without a stopwatch,
so the client's CPU speed or starvation cannot change the answer (:mod:`.streams`' first-read burst).

Each read also takes the time it returned (``st.read_ns``): its bytes had arrived by then, and the
chunks it completed are handed over only after the SDK parsed the ones before them, so the read's
time is the tighter upper bound of their arrival, one the client's parsing speed does not move.
An async read on anyio's asyncio streams takes the arrival of its bytes where the event loop stamped
them instead (:mod:`.arrival_stamps`): a busy loop returns the read a whole iteration of other tasks'
work later, and that lag grows along a stream when the loop is saturated. Either is an upper bound
of the arrival, and the chunk loop's doubt (the caller's own time) applies to both alike.

The cost is an integer increment and a clock read per read, and the iterator is the SDK's own: what
it yields and raises, and when it is closed, are unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .._guard import guarded
from ..clock import clock
from ..model import StreamStats
from . import arrival_stamps


@guarded()
def count_reads(response: Any, st: StreamStats, is_async: bool, headers_ns: int = 0) -> None:
    """Counts the reads of ``response``'s body into ``st.reads``: the response's ``iter_bytes`` (or
    ``aiter_bytes``) is shadowed on the instance alone, before the SDK's generator first asks for it.
    A response without that method (not httpx's) is left alone: ``st.reads`` then stays 0. An async
    read stamped by the event loop is never put before ``headers_ns``, the response headers' mark."""
    name = "aiter_bytes" if is_async else "iter_bytes"
    read: Callable[..., Any] | None = getattr(response, name, None)
    if read is None:
        return
    counted: Callable[..., Any]
    if is_async:
        protocol = arrival_stamps.protocol_of(response)
        if protocol is None:
            counted = _async_counter(read, st)
        else:
            counted = _stamped_counter(read, st, protocol, headers_ns)
    else:
        counted = _counter(read, st)
    setattr(response, name, counted)


def _counter(read: Callable[..., Iterator[bytes]], st: StreamStats) -> Callable[..., Iterator[bytes]]:
    def iter_bytes(*args: Any, **kwargs: Any) -> Iterator[bytes]:
        for chunk in read(*args, **kwargs):
            st.reads += 1
            st.read_ns = clock()
            yield chunk

    return iter_bytes


def _async_counter(
    read: Callable[..., AsyncIterator[bytes]], st: StreamStats
) -> Callable[..., AsyncIterator[bytes]]:
    async def aiter_bytes(*args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
        async for chunk in read(*args, **kwargs):
            st.reads += 1
            st.read_ns = clock()
            yield chunk

    return aiter_bytes


def _stamped_counter(
    read: Callable[..., AsyncIterator[bytes]], st: StreamStats, protocol: Any, headers_ns: int
) -> Callable[..., AsyncIterator[bytes]]:
    async def aiter_bytes(*args: Any, **kwargs: Any) -> AsyncIterator[bytes]:
        async for chunk in read(*args, **kwargs):
            st.reads += 1
            # bytes that came with the headers' segment carry its stamp: never before the headers' mark
            stamp = arrival_stamps.consumed_ns(protocol)
            st.read_ns = max(stamp, headers_ns) if stamp else clock()
            yield chunk

    return aiter_bytes

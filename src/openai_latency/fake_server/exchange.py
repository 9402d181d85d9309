"""What HTTP/1.1 (:mod:`.protocol`) and HTTP/2 (:mod:`.h2_protocol`) share: the one core of a request.

- :class:`Request`, :func:`collect_headers` and :func:`build_request`: method, target, header fields
  and body become the same request on both protocols (lower-cased names, repeated headers joined, the
  ``x-fake-*`` script split out, path unquoted, query parsed, ``received_ns`` taken once the body is
  complete);
- :class:`ResponseWriter`: how the app answers, with the one :meth:`~ResponseWriter.sleep` that wakes
  early when the client goes away;
- :class:`ServerConnection`: the asyncio side of a connection (registration, the client going away,
  back-pressure and the waits for the transport to drain);
- :class:`Wakeup` and :func:`wake`: the single-waiter future behind the other waits (data to read, a
  flow-control window, a sleep).

A record (:mod:`.records`) therefore means the same on both protocols: ``received_ns`` when the request
was complete, ``headers_sent_ns`` and every event after the bytes were handed to the socket (drained).
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, unquote

from .script import HEADER_PREFIX

MAX_BODY_BYTES: Final = 64 * 1024 * 1024


class HttpError(Exception):
    """A request the server cannot parse: answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names, repeated headers joined with ", "
    script: dict[str, str]  # x-fake-* headers, prefix stripped
    body: bytes
    keep_alive: bool
    received_ns: int


def collect_headers(fields: Iterable[tuple[str, str]]) -> tuple[dict[str, str], dict[str, str]]:
    """``(headers, script)`` of header fields: names lower-cased, names and values stripped, repeated
    names joined with ``", "``; ``script`` holds the ``x-fake-*`` ones without the prefix."""
    headers: dict[str, str] = {}
    script: dict[str, str] = {}
    for raw_name, raw_value in fields:
        name = raw_name.strip().lower()
        value = raw_value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if name.startswith(HEADER_PREFIX):
            script[name[len(HEADER_PREFIX) :]] = value
    return headers, script


def build_request(
    method: str,
    target: str,
    headers: dict[str, str],
    script: dict[str, str],
    body: bytes,
    keep_alive: bool,
) -> Request:
    """The request once its body is complete (``received_ns`` is now)."""
    path, _, query_string = target.partition("?")
    return Request(
        method=method,
        path=unquote(path),
        query=dict(parse_qsl(query_string, keep_blank_values=True)),
        headers=headers,
        script=script,
        body=body,
        keep_alive=keep_alive,
        received_ns=time.perf_counter_ns(),
    )


def wake(waiter: asyncio.Future[None] | None) -> None:
    """Resolve ``waiter`` unless it is absent or already done."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class Wakeup:
    """A place where one coroutine waits until :meth:`wake` (or a timeout): data to read, a flow-control
    window opened, a sleep over."""

    __slots__ = ("_timer", "_waiter")

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def arm(self, timeout: float | None = None) -> asyncio.Future[None]:
        """The future to await (resolved by :meth:`wake` or after ``timeout`` s); :meth:`disarm` after it."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        if timeout is not None:
            self._timer = loop.call_later(timeout, wake, waiter)
        return waiter

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiter = None

    async def wait(self) -> None:
        """Until :meth:`wake`."""
        waiter = self.arm()
        try:
            await waiter
        finally:
            self.disarm()

    def wake(self) -> None:
        wake(self._waiter)


class ResponseWriter(abc.ABC):
    """How the app answers one request, whatever the HTTP version: HTTP/1.1 ``protocol.Connection``
    (one request at a time) and HTTP/2 ``h2_protocol.H2Stream`` (one stream) implement it.

    Every ``send_*`` returns once the bytes are handed to the socket (and drained when the transport
    pushed back), so a timestamp taken right after it means "written"; ``False`` means the client
    went away (connection closed, or HTTP/2 stream reset) and nothing more should be sent.
    """

    def __init__(self) -> None:
        self._sleeper = Wakeup()
        self._peer_gone = False  # a plain flag: read before every write and sleep

    @property
    @abc.abstractmethod
    def connection_id(self) -> int: ...

    @property
    @abc.abstractmethod
    def request_index(self) -> int:
        """0 for the first request of the connection, 1 for the next, ... (arrival order)."""

    @property
    def peer_gone(self) -> bool:
        """The client went away: closed (or reset) the connection, or reset the HTTP/2 stream."""
        return self._peer_gone

    @abc.abstractmethod
    async def send_head(
        self, status: int, headers: Sequence[tuple[str, str]], length: int | None, body: bytes = b""
    ) -> bool:
        """Status and headers; ``length`` None for a streamed body. With ``body`` of ``length``
        bytes the whole response goes in one write and is complete."""

    @abc.abstractmethod
    async def send_body(self, data: bytes, end: bool = False) -> bool:
        """One body piece (``end``: the last one)."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Give up on the response at once (HTTP/1.1: drop the connection; HTTP/2: reset the stream)."""

    async def sleep(self, seconds: float) -> bool:
        """Sleep, waking early if the client goes away; ``False`` if it did."""
        if seconds > 0 and not self._peer_gone:
            # arm/await/disarm here rather than ``await self._sleeper.wait()``: a paced chunk costs
            # no extra coroutine
            waiter = self._sleeper.arm(seconds)
            try:
                await waiter
            finally:
                self._sleeper.disarm()
        return not self._peer_gone


class ServerConnection(asyncio.Protocol, metaclass=abc.ABCMeta):
    """The transport side of a client connection, the same on both protocols: registration with the
    server (which aborts what is left at shutdown), the client going away, back-pressure.

    Subclasses start serving in :meth:`_connected` and wake their own waiters in :meth:`_gone`.
    """

    def __init__(self, registry: set[ServerConnection]) -> None:
        self._registry = registry
        self._transport: asyncio.Transport | None = None
        self._peer_gone = False
        self._paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    @property
    def peer_gone(self) -> bool:
        """The client closed (or reset) the connection."""
        return self._peer_gone

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._registry.add(self)
        self._connected()

    def eof_received(self) -> bool | None:
        # Neither protocol has a half-closed client: EOF means it has gone away.
        self._mark_gone()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._mark_gone()
        self._registry.discard(self)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drain()

    async def _wait_drained(self) -> None:
        """Wait until the transport takes writes again (or the client is gone); call it only when
        paused. Several writers (HTTP/2 streams) may wait at once."""
        waiter = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._drain_waiters:
                self._drain_waiters.remove(waiter)

    def _wake_drain(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            wake(waiter)

    def _mark_gone(self) -> None:
        self._peer_gone = True
        self._wake_drain()
        self._gone()

    def abort(self) -> None:
        """Drop the connection at once, without finishing any response."""
        if self._transport is not None:
            self._transport.abort()
        self._mark_gone()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    @abc.abstractmethod
    def _connected(self) -> None:
        """The transport is there: start serving."""

    @abc.abstractmethod
    def _gone(self) -> None:
        """The client went away: wake whatever waits for it."""


Handler = Callable[[ResponseWriter, Request], Awaitable[None]]

"""A small HTTP/1.1 server connection on a raw :class:`asyncio.Protocol`.

Enough HTTP for httpx/httpcore (and their httpx2/httpcore2 forks): keep-alive, Content-Length and
chunked request bodies, Content-Length or chunked responses. Owning the protocol (instead of asyncio
streams) lets the server notice a client that goes away *while it sleeps* between events, and keeps
the per-event cost to one ``transport.write``.

The app answers through :class:`ResponseWriter`, which :class:`Connection` implements for HTTP/1.1
and ``h2_protocol.H2Stream`` for one HTTP/2 stream; :class:`AlpnSwitch` picks one per TLS connection.
"""

from __future__ import annotations

import asyncio
import http
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol
from urllib.parse import parse_qsl, unquote

from .script import HEADER_PREFIX

MAX_HEAD_BYTES: Final = 64 * 1024
MAX_BODY_BYTES: Final = 64 * 1024 * 1024
CHUNKED_END: Final = b"0\r\n\r\n"


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


def reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def frame_chunk(payload: bytes) -> bytes:
    """One chunk of a ``Transfer-Encoding: chunked`` body."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


class ResponseWriter(Protocol):
    """How the app answers one request, whatever the HTTP version.

    Every ``send_*`` returns once the bytes are handed to the socket (and drained when the transport
    pushed back), so a timestamp taken right after it means "written"; ``False`` means the client
    went away (connection closed, or HTTP/2 stream reset) and nothing more should be sent.
    """

    @property
    def connection_id(self) -> int: ...

    @property
    def request_index(self) -> int:
        """0 for the first request of the connection, 1 for the next, ... (arrival order)."""
        ...

    @property
    def peer_gone(self) -> bool: ...

    async def send_head(
        self, status: int, headers: Sequence[tuple[str, str]], length: int | None, body: bytes = b""
    ) -> bool:
        """Status and headers; ``length`` None for a streamed body. With ``body`` of ``length``
        bytes the whole response goes in one write and is complete."""
        ...

    async def send_body(self, data: bytes, end: bool = False) -> bool:
        """One body piece (``end``: the last one)."""
        ...

    async def sleep(self, seconds: float) -> bool:
        """Sleep, waking early if the client goes away; ``False`` if it did."""
        ...

    def abort(self) -> None:
        """Give up on the response at once (HTTP/1.1: drop the connection; HTTP/2: reset the stream)."""
        ...


class ServerConnection(Protocol):
    def abort(self) -> None: ...


Handler = Callable[[ResponseWriter, Request], Awaitable[None]]


class AlpnSwitch(asyncio.Protocol):
    """Hands a new connection to the protocol its negotiated ALPN names (``default`` without one).

    asyncio calls ``connection_made`` after the TLS handshake, so the choice is known there.
    """

    def __init__(
        self, protocols: Mapping[str, Callable[[], asyncio.Protocol]], default: Callable[[], asyncio.Protocol]
    ) -> None:
        self._protocols = protocols
        self._default = default

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        ssl_object = transport.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        protocol = self._protocols.get(alpn or "", self._default)()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)


class Connection(asyncio.Protocol):
    """One client connection: reads requests in turn and hands each to ``handler``."""

    def __init__(self, handler: Handler, connection_id: int, registry: set[ServerConnection]) -> None:
        self._connection_id = connection_id
        self.requests_served = 0
        self._keep_alive = True
        self._chunked = False
        self._handler = handler
        self._registry = registry
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._peer_gone = False
        self._read_waiter: asyncio.Future[None] | None = None
        self._sleeper: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._task: asyncio.Task[None] | None = None

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._registry.add(self)
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        self._buf += data
        _wake(self._read_waiter)

    def eof_received(self) -> bool | None:
        # A client never half-closes an HTTP/1.1 connection: EOF means it has gone away.
        self._mark_gone()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._mark_gone()
        self._registry.discard(self)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        _wake(self._drain_waiter)

    def _mark_gone(self) -> None:
        self._peer_gone = True
        _wake(self._read_waiter)
        _wake(self._sleeper)
        _wake(self._drain_waiter)

    # -- what handlers use ------------------------------------------------------------------------

    @property
    def connection_id(self) -> int:
        return self._connection_id

    @property
    def request_index(self) -> int:
        return self.requests_served

    @property
    def peer_gone(self) -> bool:
        """The client closed (or reset) the connection."""
        return self._peer_gone

    async def send_head(
        self, status: int, headers: Sequence[tuple[str, str]], length: int | None, body: bytes = b""
    ) -> bool:
        self._chunked = length is None
        head = "".join(
            [
                f"HTTP/1.1 {status} {reason(status)}\r\n",
                *(f"{name}: {value}\r\n" for name, value in headers),
                "transfer-encoding: chunked\r\n" if length is None else f"content-length: {length}\r\n",
                "connection: keep-alive\r\n\r\n" if self._keep_alive else "connection: close\r\n\r\n",
            ]
        )
        return await self.send(head.encode("latin-1") + body)

    async def send_body(self, data: bytes, end: bool = False) -> bool:
        if self._chunked:
            if not data:
                data = CHUNKED_END if end else b""
            else:
                data = frame_chunk(data) + CHUNKED_END if end else frame_chunk(data)
        return await self.send(data) if data else not self._peer_gone

    async def send(self, data: bytes) -> bool:
        """Write and drain; ``False`` if the client is gone (nothing more should be sent)."""
        if self._peer_gone or self._transport is None:
            return False
        self._transport.write(data)
        if self._paused:
            waiter = self._drain_waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._drain_waiter = None
        return not self._peer_gone

    async def sleep(self, seconds: float) -> bool:
        """Sleep, waking early if the client goes away; ``False`` if it did."""
        if seconds > 0 and not self._peer_gone:
            loop = asyncio.get_running_loop()
            waiter = self._sleeper = loop.create_future()
            timer = loop.call_later(seconds, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._sleeper = None
        return not self._peer_gone

    def abort(self) -> None:
        """Drop the connection at once, without finishing the response."""
        if self._transport is not None:
            self._transport.abort()
        self._mark_gone()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    # -- request loop -----------------------------------------------------------------------------

    async def _serve(self) -> None:
        try:
            while not self._peer_gone:
                try:
                    request = await self._read_request()
                except HttpError as exc:
                    body = f"{exc}\n".encode()
                    head = (
                        f"HTTP/1.1 {exc.status} {reason(exc.status)}\r\ncontent-type: text/plain\r\n"
                        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
                    )
                    await self.send(head.encode("latin-1") + body)
                    break
                if request is None:
                    break
                self._keep_alive = request.keep_alive
                await self._handler(self, request)
                self.requests_served += 1
                if not request.keep_alive:
                    break
        finally:
            self.close()

    async def _wait_for_data(self) -> None:
        waiter = self._read_waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._read_waiter = None

    async def _read_request(self) -> Request | None:
        buf = self._buf
        while (end := buf.find(b"\r\n\r\n")) < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise HttpError(431, "request head too large")
            if self._peer_gone:
                return None
            await self._wait_for_data()
        head = buf[:end].decode("latin-1")
        del buf[: end + 4]
        request_line, *lines = head.split("\r\n")
        try:
            method, target, version = request_line.split(" ")
        except ValueError:
            raise HttpError(400, "malformed request line") from None
        headers: dict[str, str] = {}
        script: dict[str, str] = {}
        for line in lines:
            name, sep, value = line.partition(":")
            if not sep:
                raise HttpError(400, "malformed header line")
            name = name.strip().lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
            if name.startswith(HEADER_PREFIX):
                script[name[len(HEADER_PREFIX) :]] = value
        path, _, query_string = target.partition("?")
        connection = headers.get("connection", "").lower()
        keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = await self._read_chunked_body()
        else:
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                raise HttpError(400, "bad content-length") from None
            if not 0 <= length <= MAX_BODY_BYTES:
                raise HttpError(413, "bad content-length")
            body = await self._read_exactly(length)
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

    async def _read_exactly(self, size: int) -> bytes:
        buf = self._buf
        while len(buf) < size:
            if self._peer_gone:
                raise HttpError(400, "connection closed inside the request body")
            await self._wait_for_data()
        data = bytes(buf[:size])
        del buf[:size]
        return data

    async def _read_line(self) -> bytes:
        buf = self._buf
        while (end := buf.find(b"\r\n")) < 0:
            if self._peer_gone or len(buf) > MAX_HEAD_BYTES:
                raise HttpError(400, "bad chunked body")
            await self._wait_for_data()
        line = bytes(buf[:end])
        del buf[: end + 2]
        return line

    async def _read_chunked_body(self) -> bytes:
        body = bytearray()
        while True:
            try:
                size = int(bytes(await self._read_line()).split(b";")[0], 16)
            except ValueError:
                raise HttpError(400, "bad chunk size") from None
            if size == 0:
                while await self._read_line():  # trailers, up to the empty line
                    pass
                return bytes(body)
            body += await self._read_exactly(size)
            if len(body) > MAX_BODY_BYTES:
                raise HttpError(413, "request body too large")
            await self._read_exactly(2)


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)

"""A small HTTP/1.1 server connection on a raw :class:`asyncio.Protocol`.

Enough HTTP for httpx/httpcore (and their httpx2/httpcore2 forks): keep-alive, Content-Length and
chunked request bodies, Content-Length or chunked responses. Owning the protocol (instead of asyncio
streams) lets the server notice a client that goes away *while it sleeps* between events, and keeps
the per-event cost to one ``transport.write``.

What is not HTTP/1.1 (the request the app gets, the :class:`~.exchange.ResponseWriter` it answers
through, sleeping and wake-ups) is in :mod:`.exchange`, shared with HTTP/2 (:mod:`.h2_protocol`);
:class:`AlpnSwitch` picks the protocol of a TLS connection.
"""

from __future__ import annotations

import asyncio
import http
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final

from .exchange import (
    MAX_BODY_BYTES,
    Handler,
    HttpError,
    Request,
    ResponseWriter,
    ServerConnection,
    Wakeup,
    build_request,
    collect_headers,
)

MAX_HEAD_BYTES: Final = 64 * 1024
CHUNKED_END: Final = b"0\r\n\r\n"


def reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def frame_chunk(payload: bytes) -> bytes:
    """One chunk of a ``Transfer-Encoding: chunked`` body."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


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


class Connection(ServerConnection, ResponseWriter):
    """One client connection: reads requests in turn and hands each to ``handler``; it is also the
    :class:`~.exchange.ResponseWriter` of the request being answered (``abort`` drops the connection)."""

    def __init__(self, handler: Handler, connection_id: int, registry: set[ServerConnection]) -> None:
        ServerConnection.__init__(self, registry)
        ResponseWriter.__init__(self)
        self._connection_id = connection_id
        self.requests_served = 0
        self._keep_alive = True
        self._chunked = False
        self._handler = handler
        self._buf = bytearray()
        self._reader = Wakeup()
        self._task: asyncio.Task[None] | None = None

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def _connected(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        self._buf += data
        self._reader.wake()

    def _gone(self) -> None:
        self._reader.wake()
        self._sleeper.wake()

    # -- the ResponseWriter -----------------------------------------------------------------------

    @property
    def connection_id(self) -> int:
        return self._connection_id

    @property
    def request_index(self) -> int:
        return self.requests_served

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
            await self._wait_drained()
        return not self._peer_gone

    async def read_available(self) -> bytes:
        """What the client sent and no request took yet, waiting for some; ``b""`` once it is gone
        (an upgraded connection's bytes: :mod:`.ws_session`)."""
        while not self._buf:
            if self._peer_gone:
                return b""
            await self._reader.wait()
        data = bytes(self._buf)
        self._buf.clear()
        return data

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

    async def _read_request(self) -> Request | None:
        buf = self._buf
        while (end := buf.find(b"\r\n\r\n")) < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise HttpError(431, "request head too large")
            if self._peer_gone:
                return None
            await self._reader.wait()
        head = buf[:end].decode("latin-1")
        del buf[: end + 4]
        request_line, *lines = head.split("\r\n")
        try:
            method, target, version = request_line.split(" ")
        except ValueError:
            raise HttpError(400, "malformed request line") from None
        headers, script = collect_headers(_header_fields(lines))
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
        return build_request(method, target, headers, script, body, keep_alive)

    async def _read_exactly(self, size: int) -> bytes:
        buf = self._buf
        while len(buf) < size:
            if self._peer_gone:
                raise HttpError(400, "connection closed inside the request body")
            await self._reader.wait()
        data = bytes(buf[:size])
        del buf[:size]
        return data

    async def _read_line(self) -> bytes:
        buf = self._buf
        while (end := buf.find(b"\r\n")) < 0:
            if self._peer_gone or len(buf) > MAX_HEAD_BYTES:
                raise HttpError(400, "bad chunked body")
            await self._reader.wait()
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


def _header_fields(lines: list[str]) -> Iterator[tuple[str, str]]:
    """``(name, value)`` of HTTP/1.1 header lines; a line without a colon is a 400."""
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpError(400, "malformed header line")
        yield name, value

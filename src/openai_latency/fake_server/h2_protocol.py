"""HTTP/2 for the fake server (TLS + ALPN ``h2``), on the ``h2`` sans-IO state machine.

Each stream becomes one :class:`~.exchange.Request`, built by the same code as on HTTP/1.1 and handed
to the same handler, answered through :class:`H2Stream` (a :class:`~.exchange.ResponseWriter`, whose
``sleep`` is the shared one), so a record means the same on both protocols: ``headers_sent_ns`` and
every event are taken after the frames were written (and drained).

Flow control is honoured: a DATA frame never exceeds the stream/connection window; the writer waits
for the client's WINDOW_UPDATE. A client RST_STREAM ends only its stream (outcome ``client_closed``);
a closed connection ends all of them. ``abort()`` (the ``disconnect`` fault) resets one stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

from . import exchange

_CONFIG = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class H2Stream(exchange.ResponseWriter):
    """One request/response exchange on an HTTP/2 connection: the app's response writer."""

    def __init__(self, conn: H2Connection, stream_id: int, headers: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self._conn = conn
        self.stream_id = stream_id
        self.headers = headers
        self.body = bytearray()
        self.index = -1  # the request index, set when the request is complete
        self.reset = False
        self.ended = False  # our END_STREAM was sent
        self._window = exchange.Wakeup()
        self._peer_gone = conn.peer_gone  # then set by mark_reset() or connection_gone()

    @property
    def connection_id(self) -> int:
        return self._conn.connection_id

    @property
    def request_index(self) -> int:
        return self.index

    def wake(self) -> None:
        self._sleeper.wake()
        self._window.wake()

    def window_opened(self) -> None:
        self._window.wake()

    async def send_head(
        self, status: int, headers: Sequence[tuple[str, str]], length: int | None, body: bytes = b""
    ) -> bool:
        if self.peer_gone:
            return False
        fields = [(":status", str(status)), *((name.lower(), value) for name, value in headers)]
        if length is not None:
            fields.append(("content-length", str(length)))
        complete = length is not None and len(body) == length
        try:
            self._conn.h2.send_headers(self.stream_id, fields, end_stream=complete and not body)
        except h2.exceptions.ProtocolError:
            return self.mark_reset()
        if complete and not body:
            self.ended = True
            return await self._conn.flush()
        if body:  # the headers go out in the same write as the (first window of the) body
            return await self.send_body(body, end=complete)
        return await self._conn.flush()

    async def send_body(self, data: bytes, end: bool = False) -> bool:
        if not data and not end:
            return not self.peer_gone
        view = memoryview(data)
        h2c = self._conn.h2
        while True:
            if self.peer_gone:
                return False
            try:
                allowed = min(h2c.local_flow_control_window(self.stream_id), h2c.max_outbound_frame_size)
                if view and allowed <= 0:
                    if not await self._conn.flush():
                        return False
                    await self._window.wait()
                    continue
                piece, view = view[:allowed], view[allowed:]
                last = end and not view
                h2c.send_data(self.stream_id, piece, end_stream=last)
            except h2.exceptions.ProtocolError:
                return self.mark_reset()
            if not view:
                self.ended = last
                return await self._conn.flush() and not self.reset

    def abort(self) -> None:
        """Reset this stream (RST_STREAM INTERNAL_ERROR); the connection and its other streams live on."""
        if not self.peer_gone and not self.ended:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self._conn.h2.reset_stream(self.stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
            self._conn.write_pending()
        self.mark_reset()

    def mark_reset(self) -> bool:
        """The stream is over for us (reset by either side, or refused by h2); ``False``."""
        self.reset = self._peer_gone = True
        self.wake()
        return False

    def connection_gone(self) -> None:
        self._peer_gone = True
        self.wake()

    def request(self) -> exchange.Request:
        """The request, complete: pseudo-headers give the method and target (``:authority`` the host
        when there is no ``host`` header), the rest are the headers as on HTTP/1.1."""
        pseudo = {name: value for name, value in self.headers if name.startswith(":")}
        headers, script = exchange.collect_headers((n, v) for n, v in self.headers if not n.startswith(":"))
        if ":authority" in pseudo:
            headers.setdefault("host", pseudo[":authority"])
        method = pseudo.get(":method", "GET")
        return exchange.build_request(
            method, pseudo.get(":path", "/"), headers, script, bytes(self.body), True
        )


class H2Connection(exchange.ServerConnection):
    """One HTTP/2 client connection: streams are served concurrently, each by its own task."""

    def __init__(
        self, handler: exchange.Handler, connection_id: int, registry: set[exchange.ServerConnection]
    ) -> None:
        super().__init__(registry)
        self.connection_id = connection_id
        self.h2 = h2.connection.H2Connection(config=_CONFIG)
        self._handler = handler
        self._streams: dict[int, H2Stream] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._requests = 0

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def _connected(self) -> None:
        self.h2.initiate_connection()
        self.write_pending()

    def data_received(self, data: bytes) -> None:
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.write_pending()  # the GOAWAY h2 queued
            self.abort()
            return
        for event in events:
            self._on_event(event)
        self.write_pending()

    def _gone(self) -> None:
        for stream in self._streams.values():
            stream.connection_gone()

    # -- frames -----------------------------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        if isinstance(event, h2.events.RequestReceived):
            assert event.stream_id is not None and event.headers is not None
            headers = [(_text(name), _text(value)) for name, value in event.headers]
            self._streams[event.stream_id] = H2Stream(self, event.stream_id, headers)
        elif isinstance(event, h2.events.DataReceived):
            assert event.stream_id is not None
            stream = self._streams.get(event.stream_id)
            if event.flow_controlled_length:
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if stream is not None and event.data:
                stream.body += event.data
                if len(stream.body) > exchange.MAX_BODY_BYTES:
                    self.h2.reset_stream(event.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                    self._streams.pop(event.stream_id, None)
        elif isinstance(event, h2.events.StreamEnded):
            stream = self._streams.get(event.stream_id or 0)
            if stream is not None and stream.index < 0:
                self._start(stream)
        elif isinstance(event, h2.events.StreamReset):
            stream = self._streams.get(event.stream_id or 0)
            if stream is not None:
                stream.mark_reset()
                if stream.index < 0:  # reset before the request was complete: nobody serves it
                    self._streams.pop(stream.stream_id, None)
        elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            stream_id = getattr(event, "stream_id", 0)
            for stream in list(self._streams.values()) if not stream_id else [self._streams.get(stream_id)]:
                if stream is not None:
                    stream.window_opened()
        elif isinstance(event, h2.events.ConnectionTerminated):  # GOAWAY: the client is leaving
            self.write_pending()
            self.close()
            self._mark_gone()

    def _start(self, stream: H2Stream) -> None:
        stream.index = self._requests
        self._requests += 1
        task = asyncio.get_running_loop().create_task(self._serve(stream, stream.request()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, stream: H2Stream, request: exchange.Request) -> None:
        try:
            await self._handler(stream, request)
        finally:
            if not stream.ended and not stream.peer_gone:  # an unfinished response: do not hang the client
                stream.abort()
            self._streams.pop(stream.stream_id, None)

    # -- writing ----------------------------------------------------------------------------------

    def write_pending(self) -> None:
        """Hand whatever frames h2 has queued to the transport."""
        data = self.h2.data_to_send()
        if data and self._transport is not None and not self._peer_gone:
            self._transport.write(data)

    async def flush(self) -> bool:
        """Write the queued frames and wait while the transport pushes back; ``False`` if gone."""
        self.write_pending()
        if self._paused and not self._peer_gone:
            await self._wait_drained()
        return not self._peer_gone

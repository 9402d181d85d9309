"""WebSocket on the HTTP/1.1 port: ``GET /v1/responses`` (Responses WebSocket mode) and ``GET /v1/realtime``
(Realtime sessions) upgraded in place, on the connection that read the request (:mod:`.protocol`).

The WebSocket protocol itself is the ``websockets`` package's sans-I/O :class:`ServerProtocol` (the
SDK's own realtime dependency, optional here like ``h2``): bytes read by the HTTP connection go in,
frames come out. The answers are the HTTP side's: a turn is a :class:`~.records.RequestRecord` (method
``WS``) answered by the same stream engine (:mod:`.stream_engine`) through :class:`TurnWriter`, a
:class:`~.exchange.ResponseWriter` that sends each SSE event of a plan as one text frame (the JSON of
its ``data:`` line) and logs it after the write, on the same clock as HTTP. So every script key of a
Responses stream works here too: ``delay-ms`` (before ``response.created``), ``ttft-ms``,
``chunk-delay-ms``, reasoning, ``stream-error-after`` (an ``error`` event), ``disconnect-after`` (the
TCP connection dropped mid-turn), ``malformed-after`` (a frame that is not JSON), ``error`` (an
``error`` event with that code instead of a response).

The script of a turn: the server's defaults, then the handshake's ``x-fake-*`` headers and query
parameters, then the ``x-fake-*`` entries of the ``response.create`` event's ``metadata``.
Realtime sessions: :mod:`.ws_realtime`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from websockets.frames import Frame, Opcode
from websockets.http11 import Request as WsRequest
from websockets.server import ServerProtocol

from .exchange import Request, ResponseWriter
from .records import Outcome, RecordLog, RequestRecord
from .script import HEADER_PREFIX, Script, ScriptError, parse_script

if TYPE_CHECKING:
    from .protocol import Connection

logger = logging.getLogger("openai_latency.fake_server")

WS_PATHS: Final = ("/v1/responses", "/v1/realtime")
SECRET_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie", "api-key", "x-api-key"})


def is_upgrade(req: Request) -> bool:
    return req.method == "GET" and "websocket" in req.headers.get("upgrade", "").lower()


def sse_payloads(data: bytes) -> list[tuple[str, bytes]]:
    """``(event name, JSON bytes)`` of each SSE event in ``data`` (one event or a batch of them)."""
    out = []
    for block in data.split(b"\n\n"):
        if not block:
            continue
        name, payload = "", b""
        for line in block.split(b"\n"):
            if line.startswith(b"event: "):
                name = line[7:].decode()
            elif line.startswith(b"data: "):
                payload = line[6:]
        out.append((name, payload))
    return out


def ws_error(
    status: int | None, kind: str, code: str | None, message: str, param: str | None = None
) -> bytes:
    """A Responses WebSocket ``error`` event (``ResponseWsError``)."""
    event: dict[str, Any] = {"type": "error", "error": {"type": kind, "code": code, "message": message}}
    if param is not None:
        event["error"]["param"] = param
    if status is not None:
        event["status"] = status
    return json.dumps(event, separators=(",", ":")).encode()


class Session:
    """One upgraded connection: the handshake, the frames in and out, the turns in flight."""

    def __init__(
        self, conn: Connection, req: Request, log: RecordLog, defaults: tuple[dict[str, str], Script]
    ):
        self.conn = conn
        self.req = req
        self.log = log
        raw_defaults, _ = defaults
        script = dict(raw_defaults)
        script.update(req.script)
        script.update(
            {k[len(HEADER_PREFIX) :]: v for k, v in req.query.items() if k.startswith(HEADER_PREFIX)}
        )
        self.raw_script = script
        self.protocol = ServerProtocol(max_size=None)
        self.turns: set[asyncio.Task[None]] = set()
        self.turn_index = 0

    # -- frames -------------------------------------------------------------------------------------

    async def accept(self) -> bool:
        """The opening handshake: the request the HTTP side read, given to websockets as its bytes
        (its parser starts with the request), and its ``101`` (or error) written."""
        lines = [f"GET {self.req.path} HTTP/1.1", *(f"{k}: {v}" for k, v in self.req.headers.items())]
        self.protocol.receive_data(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        request = next((e for e in self.protocol.events_received() if isinstance(e, WsRequest)), None)
        if request is None:
            return False
        response = self.protocol.accept(request)
        self.protocol.send_response(response)
        return await self.flush() and response.status_code == 101

    async def flush(self) -> bool:
        data = b"".join(self.protocol.data_to_send())
        if not data:
            return not self.conn.peer_gone
        return await self.conn.send(data)

    async def send_text(self, payload: bytes) -> bool:
        """One text frame, written (and drained) when this returns; ``False`` if the client is gone."""
        if self.conn.peer_gone:
            return False
        self.protocol.send_text(payload)
        return await self.flush()

    async def send_frame(self, payload: bytes, binary: bool = False) -> bool:
        """A text (or binary) frame of ``payload`` as it is."""
        if self.conn.peer_gone:
            return False
        if binary:
            self.protocol.send_binary(payload)
        else:
            self.protocol.send_text(payload)
        return await self.flush()

    def new_record(self, path: str, body: Any = None) -> RequestRecord:
        record = RequestRecord(
            request_id=f"req_{secrets.token_hex(16)}",
            method="WS",
            path=path,
            query=dict(self.req.query),
            headers={k: v for k, v in self.req.headers.items() if k not in SECRET_HEADERS},
            body=body,
            attempt=0,
            connection_id=self.conn.connection_id,
            connection_request_index=self.turn_index,
            received_ns=time.perf_counter_ns(),
        )
        self.turn_index += 1
        self.log.add(record)
        return record

    def script(self, extra: Mapping[str, str] = ()) -> Script:  # type: ignore[assignment]
        return parse_script({**self.raw_script, **dict(extra)})

    def start_turn(self, run: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(run())
        self.turns.add(task)
        task.add_done_callback(self.turns.discard)
        return task

    async def run(self, on_message: Callable[[Any, int], Awaitable[None]]) -> None:
        """Reads frames until the client closes or goes away; each JSON text message goes to
        ``on_message(message, received_ns)`` (anything else is answered with an ``error`` event)."""
        fragments: list[bytes] = []
        try:
            while True:
                data = await self.conn.read_available()
                if not data:
                    self.protocol.receive_eof()
                    break
                self.protocol.receive_data(data)
                for event in self.protocol.events_received():
                    if not isinstance(event, Frame):
                        continue
                    if event.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                        fragments.append(bytes(event.data))
                        if event.fin:
                            await self._message(b"".join(fragments), on_message)
                            fragments = []
                await self.flush()  # pongs, the closing handshake
                if self.protocol.close_expected():
                    break
        finally:
            for task in list(self.turns):
                task.cancel()
            if self.turns:
                await asyncio.gather(*self.turns, return_exceptions=True)
            self.conn.close()

    async def _message(self, data: bytes, on_message: Callable[[Any, int], Awaitable[None]]) -> None:
        received = time.perf_counter_ns()
        try:
            message = json.loads(data)
        except ValueError:
            message = None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            await self.send_text(
                ws_error(400, "invalid_request_error", "invalid_json", "expected a JSON event")
            )
            return
        await on_message(message, received)


class TurnWriter(ResponseWriter):
    """The :class:`~.exchange.ResponseWriter` of one turn: every SSE event the stream engine writes
    goes out as one text frame of its JSON (an ``error`` event reshaped as the WebSocket API's
    ``ResponseWsError``); the events of one write are logged by the engine after it returns."""

    def __init__(self, session: Session, index: int) -> None:
        super().__init__()
        self._session = session
        self._index = index

    @property
    def connection_id(self) -> int:
        return self._session.conn.connection_id

    @property
    def request_index(self) -> int:
        return self._index

    @property
    def peer_gone(self) -> bool:
        return self._session.conn.peer_gone

    async def send_head(
        self, status: int, headers: Sequence[tuple[str, str]], length: int | None, body: bytes = b""
    ) -> bool:
        return not self.peer_gone  # no headers on a WebSocket: the events are the answer

    async def send_body(self, data: bytes, end: bool = False) -> bool:
        for name, payload in sse_payloads(data):
            if name == "error":
                payload = _reshape_error(payload)
            if not await self._session.send_text(payload):
                return False
        return not self.peer_gone

    def abort(self) -> None:
        self._session.conn.abort()

    async def sleep(self, seconds: float) -> bool:
        if seconds > 0 and not self.peer_gone:
            await asyncio.sleep(seconds)
        return not self.peer_gone


def _reshape_error(payload: bytes) -> bytes:
    try:
        event = json.loads(payload)
        return ws_error(None, "server_error", event.get("code"), str(event.get("message")))
    except (ValueError, AttributeError):
        return payload


async def finish_turn(log: RecordLog, record: RequestRecord, run: Awaitable[Outcome]) -> None:
    """Runs one turn and logs its outcome (a turn cut by the session's end is ``client_closed``)."""
    outcome: Outcome = "error"
    try:
        outcome = await run
    except asyncio.CancelledError:
        outcome = "client_closed"
        raise
    except Exception:
        logger.exception("fake server: error while answering a WebSocket turn")
    finally:
        log.finish(record, outcome, time.perf_counter_ns())


def metadata_script(event: Mapping[str, Any]) -> dict[str, str]:
    """The ``x-fake-*`` entries of an event's ``metadata`` (a turn's own script), prefix stripped."""
    metadata = event.get("metadata")
    if not isinstance(metadata, dict):
        return {}
    return {k[len(HEADER_PREFIX) :]: str(v) for k, v in metadata.items() if k.startswith(HEADER_PREFIX)}


__all__ = [
    "WS_PATHS",
    "ScriptError",
    "Session",
    "TurnWriter",
    "finish_turn",
    "is_upgrade",
    "metadata_script",
    "sse_payloads",
    "ws_error",
]

"""What an upgraded connection serves: ``/v1/responses`` turns here, ``/v1/realtime`` in :mod:`.ws_realtime`.

A ``response.create`` event is a turn: it is answered as ``POST /v1/responses`` with ``stream: true``
would be (the app's own endpoint, script and stream engine), its events sent as frames. Turns of one lane
(the ``stream_id`` of the event, echoed on every event of its turn; none is a lane too) run one at
a time, in arrival order (the protocol's rule); lanes run side by side, their events interleaved.
``FakeServer.enqueue`` makes the next turn get its canned pieces as frames, as given.
Any other client event is answered with an ``error`` event.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from . import ws_realtime
from .exchange import Request
from .payloads import Canned
from .records import Outcome, RecordLog, RequestRecord
from .script import Script, ScriptError
from .ws_session import Session, TurnWriter, finish_turn, metadata_script, ws_error

if TYPE_CHECKING:
    from .protocol import Connection

#: ``(writer, request, record, script keys) -> outcome``: the app's answer to a turn.
Answer = Callable[[TurnWriter, Request, RequestRecord, dict[str, str]], Awaitable[Outcome]]


async def serve(
    conn: Connection,
    req: Request,
    log: RecordLog,
    defaults: tuple[dict[str, str], Script],
    answer: Answer,
    canned: collections.deque[Canned] | None = None,
) -> None:
    """Upgrades ``conn`` and serves it until the client closes; the HTTP connection ends with it."""
    req.keep_alive = False
    session = Session(conn, req, log, defaults)
    try:
        session.script()
    except ScriptError as exc:
        await conn.send_head(400, [("content-type", "text/plain")], len(str(exc)), str(exc).encode())
        return
    if not await session.accept():
        return
    if req.path == "/v1/realtime":
        await ws_realtime.RealtimeSession(session).serve()
        return
    turns = _ResponsesTurns(session, answer, canned if canned is not None else collections.deque())
    await session.run(turns.on_message)


class _ResponsesTurns:
    def __init__(self, session: Session, answer: Answer, canned: collections.deque[Canned]) -> None:
        self.session = session
        self.answer = answer
        self.canned = canned
        self.previous: dict[object, asyncio.Task[None]] = {}  # the last turn of each lane

    async def on_message(self, message: dict[str, Any], received_ns: int) -> None:
        session = self.session
        if message.get("type") != "response.create":
            await session.send_text(
                ws_error(
                    400, "invalid_request_error", "unknown_event", f"unsupported event {message['type']!r}"
                )
            )
            return
        body = {k: v for k, v in message.items() if k != "type"}
        body["stream"] = True
        record = session.new_record("/v1/responses", message)
        record.received_ns = received_ns
        if self.canned:
            pieces = self.canned.popleft()
            session.start_turn(lambda: finish_turn(session.log, record, self._canned(record, pieces)))
            return
        lane = body.get("stream_id")
        previous = self.previous.get(lane)
        self.previous[lane] = session.start_turn(
            lambda: finish_turn(session.log, record, self._turn(record, body, previous))
        )

    async def _canned(self, record: RequestRecord, canned: Canned) -> Outcome:
        """Frames written as given (fuzzing: shapes no script makes); binary with an
        ``application/octet-stream`` content type."""
        binary = canned.content_type == "application/octet-stream"
        for piece in canned.pieces:
            if not await self.session.send_frame(piece, binary):
                return "client_closed"
            record.events.append(("canned", time.perf_counter_ns()))
        return "ok"

    async def _turn(
        self, record: RequestRecord, body: dict[str, Any], previous: asyncio.Task[None] | None
    ) -> Outcome:
        if previous is not None:  # one turn at a time per lane (stream_id), lanes side by side
            await asyncio.gather(previous, return_exceptions=True)
        session = self.session
        writer = TurnWriter(session, record.connection_request_index)
        try:
            script = session.script(metadata_script(body))
        except ScriptError as exc:
            await session.send_text(ws_error(400, "invalid_request_error", "invalid_fake_script", str(exc)))
            return "error"
        lane = body.get("stream_id")
        if isinstance(lane, str):
            writer = _LaneWriter(session, record.connection_request_index, lane)
        if script.error is not None:
            if not await writer.sleep(script.delay):
                return "client_closed"
            spec = script.error
            model = str(body.get("model") or "")
            sent = await session.send_text(
                ws_error(spec.status, spec.type, spec.code, spec.message.format(model=model), spec.param)
            )
            record.events.append(("event:error", time.perf_counter_ns()))
            return "error" if sent else "client_closed"
        request = Request(
            "POST", "/v1/responses", {}, {}, {}, json.dumps(body).encode(), True, record.received_ns
        )
        record.body = body
        return await self.answer(writer, request, record, {**session.raw_script, **metadata_script(body)})


class _LaneWriter(TurnWriter):
    """A turn of a ``stream_id`` lane: every event echoes the lane."""

    def __init__(self, session: Session, index: int, lane: str) -> None:
        super().__init__(session, index)
        self._lane = json.dumps(lane)

    async def send_body(self, data: bytes, end: bool = False) -> bool:
        marked = data.replace(b'data: {"type":', b'data: {"stream_id":' + self._lane.encode() + b',"type":')
        return await super().send_body(marked, end)

"""The stream engine: sends a :class:`~.payloads.StreamPlan` on the script's schedule and logs it.

The preamble goes at once; then the reasoning (hidden: ``ttft-ms`` and N x ``reasoning-delay-ms`` of
silence, logged as ``reasoning_hidden_start``/``reasoning_hidden_end``; streamed: a token per
``reasoning-delay-ms`` after ``ttft-ms``); then the answer chunks (``ttft-ms`` before the first, or
``reasoning-delay-ms`` after streamed reasoning, or nothing more after hidden reasoning;
``chunk-delay-ms`` +- jitter between them; stalls), with the scripted faults between them; then the
epilogue at once. A :class:`Pacer` writes the tokens: each on its own, or ``write-batch`` at a time.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Final

from . import payloads
from .exchange import ResponseWriter
from .payloads import Event, StreamPlan
from .records import HIDDEN_REASONING_END, HIDDEN_REASONING_START, Outcome, RequestRecord
from .respond import SSE_TYPE, disconnect, response_headers, send_head
from .script import Script

NS: Final = 1_000_000_000


class Pacer:
    """Writes one stream's events and logs each after its write: unpaced events at once, tokens when
    their pause has run out.

    With ``batch`` 1 a token's pause is slept after the previous write (every gap is at least the
    scripted one). With ``batch`` K > 1 tokens are due at absolute deadlines, pause after pause from
    :meth:`start`, and go out K at a time in one write once the last of them is due (a late wake-up
    shortens the next wait: the average pace holds even at 1-2 ms a token); each token's deadline is
    logged in ``record.scripted_ns``.
    """

    __slots__ = ("_batch", "_conn", "_deadline", "_due", "_events", "_pending", "_scripted", "emitted")

    def __init__(self, conn: ResponseWriter, record: RequestRecord, batch: int) -> None:
        self._conn = conn
        self._events = record.events
        self._scripted = record.scripted_ns
        self._batch = batch
        self._deadline = time.perf_counter_ns()
        self._pending: list[Event] = []  # events of the batch being gathered (tokens and their prefixes)
        self._due: list[int] = []  # due times of that batch's tokens
        self.emitted = 0
        """Events written so far (a Responses error event's sequence number)."""

    def start(self) -> None:
        """The clock of the absolute deadlines starts now (after the opening events)."""
        self._deadline = time.perf_counter_ns()

    def mark(self, kind: str) -> None:
        """Log an event that writes nothing (the bounds of hidden reasoning)."""
        self._events.append((kind, time.perf_counter_ns()))

    async def emit(self, kind: str, data: bytes, last: bool = False) -> bool:
        """Write one event now (nothing may be pending); ``False`` if the client went away."""
        if not await self._conn.send_body(data, end=last):
            return False
        self._events.append((kind, time.perf_counter_ns()))
        self.emitted += 1
        return True

    async def wait(self, pause: float) -> bool:
        """A pause that writes nothing; a pending batch goes out first (when it is due)."""
        if self._batch == 1:
            return await self._conn.sleep(pause)
        if not await self.flush():
            return False
        self._deadline += round(pause * NS)
        return await self._sleep_until(self._deadline)

    async def token(self, pause: float, event: Event, prefix: Sequence[Event] = ()) -> bool:
        """A token due ``pause`` s after the previous one, written after the (non-token) ``prefix``."""
        if self._batch == 1:  # written inline: a paced chunk costs no coroutine more than before
            conn = self._conn
            if not await conn.sleep(pause):
                return False
            for kind, data in prefix:
                if not await self.emit(kind, data):
                    return False
            if not await conn.send_body(event[1]):
                return False
            self._events.append((event[0], time.perf_counter_ns()))
            self.emitted += 1
            return True
        self._deadline += round(pause * NS)
        self._pending += prefix
        self._pending.append(event)
        self._due.append(self._deadline)
        return len(self._due) < self._batch or await self.flush()

    async def flush(self) -> bool:
        """Write the pending batch, in one write, once its last token is due."""
        if not self._pending:
            return not self._conn.peer_gone
        if not await self._sleep_until(self._deadline):
            return False
        pending, due = self._pending, self._due
        self._pending, self._due = [], []
        if not await self._conn.send_body(b"".join([data for _, data in pending])):
            return False
        now = time.perf_counter_ns()
        self._events += [(kind, now) for kind, _ in pending]
        self._scripted += due
        self.emitted += len(pending)
        return True

    async def _sleep_until(self, deadline_ns: int) -> bool:
        return await self._conn.sleep((deadline_ns - time.perf_counter_ns()) / NS)


async def _send_reasoning(pacer: Pacer, script: Script, plan: StreamPlan) -> bool:
    """Hidden reasoning's silence, then the streamed reasoning tokens; ``False`` if the client left."""
    first = script.ttft
    if plan.hidden_reasoning:
        if not await pacer.wait(script.ttft):
            return False
        pacer.mark(HIDDEN_REASONING_START)
        if not await pacer.wait(plan.hidden_reasoning * script.reasoning_delay):
            return False
        pacer.mark(HIDDEN_REASONING_END)
        first = 0.0
    for index, event in enumerate(plan.reasoning):
        pause = script.reasoning_delay if index else first
        if not await pacer.token(pause, event, () if index else plan.reasoning_open):
            return False
    return True


def _first_answer_pause(script: Script, plan: StreamPlan) -> float:
    """The pause before the first answer chunk: after the reasoning when there was some."""
    if plan.reasoning:
        return script.reasoning_delay
    return 0.0 if plan.hidden_reasoning else script.ttft


async def send_stream(
    conn: ResponseWriter,
    record: RequestRecord,
    script: Script,
    status: int,
    plan: StreamPlan,
) -> Outcome:
    if not await send_head(conn, record, status, response_headers(record, script, SSE_TYPE, True), None):
        return "client_closed"
    pacer = Pacer(conn, record, script.write_batch)
    for kind, data in plan.preamble:
        if not await pacer.emit(kind, data):
            return "client_closed"
    pacer.start()
    if not await _send_reasoning(pacer, script, plan):
        return "client_closed"
    faults = [
        (n, fault)
        for n, fault in (
            (script.disconnect_after, "disconnect"),
            (script.malformed_after, "malformed"),
            (script.stream_error_after, "error_event"),
        )
        if n is not None
    ]
    cut, fault = min(faults) if faults else (-1, "")
    rng = random.Random(script.seed) if script.jitter > 0 else None
    content = plan.content
    if script.corrupt == "wrong-shape" and content:
        content = [(content[0][0], payloads.sse(payloads.dumps(payloads.WRONG_SHAPE))), *content[1:]]
    first = _first_answer_pause(script, plan)
    for i in range(len(content) + 1):
        pause = script.stall if script.stall_after == i else 0.0
        if i < len(content):
            if i == 0:
                pause += first
            else:
                gap = script.chunk_delay + (rng.uniform(-script.jitter, script.jitter) if rng else 0.0)
                pause += max(0.0, gap)
        if i == cut or i == len(content):
            if not await pacer.wait(pause):
                return "client_closed"
            if i == cut:
                if fault == "disconnect":
                    return disconnect(conn, record)
                data = payloads.MALFORMED if fault == "malformed" else plan.error_event(pacer.emitted)
                return "error" if await pacer.emit(fault, data, last=True) else "client_closed"
        elif not await pacer.token(pause, content[i], () if i else plan.reasoning_close):
            return "client_closed"
    closing = plan.epilogue if content else [*plan.reasoning_close, *plan.epilogue]
    for index, (kind, data) in enumerate(closing):
        if not await pacer.emit(kind, data, last=index == len(closing) - 1):
            return "client_closed"
    return "ok" if status < 400 else "error"

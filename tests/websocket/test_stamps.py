"""The arrival stamps of a real websockets connection (:mod:`.arrivals`) against a real websockets
server on 127.0.0.1: every data message is stamped in the client's reader with its whole size, so the
caller's pairing (:func:`.arrivals.take`) finds each one, a fragmented message too; a message that was
queued before the stamps were installed reads as unstamped, and leaves the next one's stamp to it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from openai_latency.clock import clock
from openai_latency.websocket import arrivals

Message = str | list[str]
"""A text message; a list is sent as one message fragmented into those frames."""


@contextmanager
def _server(before: list[Message], after: list[Message]) -> Iterator[str]:
    """Sends ``before`` at once, then ``after`` when the client says "go"."""
    from websockets.sync.server import ServerConnection, serve

    def handler(ws: ServerConnection) -> None:
        for message in before:
            ws.send(message)
        ws.recv()
        for message in after:
            ws.send(message)
            time.sleep(0.002)  # the client's reader gets them one by one
        ws.recv()

    with serve(handler, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
        finally:
            server.shutdown()
            thread.join(5)


def _received(url: str, before: int, after: int) -> tuple[list[tuple[bytes, int, int]], Any]:
    """(message, its stamp, when recv returned it) of every message, and the connection's stamps."""
    from websockets.sync.client import connect

    with connect(url) as ws:
        # the ``before`` messages queued in websockets' receive queue (one frame each) before the
        # stamps are installed
        deadline = time.monotonic() + 10
        while ws.recv_messages.frames.qsize() < before and time.monotonic() < deadline:
            time.sleep(0.005)
        assert ws.recv_messages.frames.qsize() == before
        stamps = arrivals.install(ws)
        ws.send("go")
        received = []
        for _ in range(before + after):
            data = ws.recv(decode=False)
            received.append((data, arrivals.take(ws, data), clock()))
        ws.send("done")
    arrivals.uninstall_all()
    return received, stamps


async def _received_async(url: str, count: int) -> tuple[list[tuple[bytes, int, int]], Any]:
    """:func:`_received` with websockets' asyncio client (its reader is the protocol's
    ``data_received``, on the event loop), every message sent after install."""
    from websockets.asyncio.client import connect

    async with connect(url) as ws:
        stamps = arrivals.install(ws)
        await ws.send("go")
        received = []
        for _ in range(count):
            data = await ws.recv(decode=False)
            received.append((data, arrivals.take(ws, data), clock()))
        await ws.send("done")
    arrivals.uninstall_all()
    return received, stamps


@pytest.mark.parametrize("client", ["sync", "asyncio"])
def test_a_fragmented_message_is_stamped_and_so_are_the_ones_after_it(client: str) -> None:
    after: list[Message] = [
        '{"n": 1}',
        ['{"n": 2, "text": "', "split over", ' three frames"}'],
        '{"n": 3}',
        "{}",
    ]
    with _server([], after) as url:
        if client == "sync":
            received, stamps = _received(url, 0, len(after))
        else:
            received, stamps = asyncio.run(_received_async(url, len(after)))
    assert [data for data, _, _ in received] == [
        (m if isinstance(m, str) else "".join(m)).encode() for m in after
    ]
    stamped = [stamp for _, stamp, _ in received]
    assert all(stamped), stamped
    assert stamped == sorted(stamped)
    assert all(stamp <= handed for _, stamp, handed in received)
    assert not stamps


def test_a_message_queued_before_install_is_unstamped_and_leaves_the_next_ones_stamp() -> None:
    before: list[Message] = ['{"type": "session.created"}']
    after: list[Message] = ['{"type": "first"}', ['{"type": ', '"second"}'], '{"type": "third"}']
    with _server(before, after) as url:
        received, stamps = _received(url, len(before), len(after))
    assert [stamp for _, stamp, _ in received][:1] == [0]
    assert all(stamp for _, stamp, _ in received[1:])
    assert not stamps

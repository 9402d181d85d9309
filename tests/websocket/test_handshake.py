"""The handshake span's inside (issue 31, item 1): ``openai_latency.websocket.dns`` (sync client, with
``OPENAI_LATENCY_TRACE_DNS=true``), ``.connect`` (TCP and TLS; DNS too when not observed apart) and
``.upgrade`` (the HTTP upgrade), on success and failure, sync and async."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest

from openai_latency.fake_server import FakeServer
from tests.e2e.processes import free_port
from tests.support.span_checks import Captured, assert_close_ns, attrs, duration_ns, start_mono
from tests.websocket.support import require_responses_ws, ws_url

require_responses_ws()

SLOW_S = 0.100
DNS = "openai_latency.websocket.dns"
CONNECT = "openai_latency.websocket.connect"
UPGRADE = "openai_latency.websocket.upgrade"
TLS = "openai_latency.websocket.tls"


@pytest.fixture
def slow_resolver(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """``socket.getaddrinfo`` 100 ms slower, IPv4 answers only; the (start, end) of each lookup."""
    real = socket.getaddrinfo
    took: list[tuple[int, int]] = []

    def getaddrinfo(host: Any, port: Any, family: int = 0, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        time.sleep(SLOW_S)
        try:
            return real(host, port, socket.AF_INET, *args, **kwargs)
        finally:
            took.append((start, time.perf_counter_ns()))

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return took


def _handshake(captured: Captured) -> Any:
    [span] = [s for s in captured.spans() if s.name == "openai.websocket.connect"]
    return span


def _client(server: FakeServer, host: str = "127.0.0.1", **kwargs: Any) -> Any:
    base = f"http://{host}:{server.port}/v1"
    return openai.OpenAI(base_url=base, api_key="sk-test", **kwargs)


def _parts_inside(span: Any) -> None:
    """dns, connect and upgrade follow each other inside the span: their sum is at most its length."""
    a = attrs(span)
    total = round((a.get(DNS, 0.0) + a[CONNECT] + a.get(TLS, 0.0) + a.get(UPGRADE, 0.0)) * 1e9)
    assert 0 < total <= duration_ns(span), (a, duration_ns(span))


def test_connect_and_upgrade_on_the_sync_client(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    before = time.perf_counter_ns()
    with _client(server, websocket_base_url=ws_url(server)).realtime.connect(model="gpt-realtime"):
        pass
    span = _handshake(captured)
    a = attrs(span)
    assert a[CONNECT] > 0 and a[UPGRADE] > 0
    assert DNS not in a  # DNS tracing is off: connect includes the lookup
    _parts_inside(span)
    # the server opens the Realtime session (its first record) once it has the upgrade request,
    # which left after the upgrade started (one clock: the fake server's log)
    record = server.records()[-1]  # the session opened by this test
    upgrade_start = start_mono(span) + round(a[CONNECT] * 1e9)  # connect: span start -> upgrade start
    assert before <= start_mono(span) <= upgrade_start <= record.received_ns


async def test_connect_and_upgrade_on_the_async_client(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    client = openai.AsyncOpenAI(
        base_url=server.base_url, websocket_base_url=ws_url(server), api_key="sk-test"
    )
    async with client.realtime.connect(model="gpt-realtime"):
        await asyncio.sleep(0)
    span = _handshake(captured)
    a = attrs(span)
    assert a[CONNECT] > 0 and a[UPGRADE] > 0 and DNS not in a
    _parts_inside(span)
    record = server.records()[-1]  # the session opened by this test
    assert start_mono(span) + round(a[CONNECT] * 1e9) <= record.received_ns


def test_dns_apart_on_the_sync_client_with_trace_dns(
    instrument: Callable[..., Captured], server: FakeServer, slow_resolver: list[tuple[int, int]]
) -> None:
    captured = instrument(trace_dns=True)
    with _client(server, host="localhost").responses.connect():
        pass
    span = _handshake(captured)
    a = attrs(span)
    [(start, end)] = slow_resolver
    assert_close_ns(round(a[DNS] * 1e9), end - start, "the lookup")
    assert a[CONNECT] < SLOW_S  # the lookup is not in connect any more
    _parts_inside(span)


async def test_dns_apart_on_the_async_client_with_trace_dns(
    instrument: Callable[..., Captured], server: FakeServer, slow_resolver: list[tuple[int, int]]
) -> None:
    """asyncio resolves in its executor; the handshake's task awaits the loop's getaddrinfo meanwhile."""
    captured = instrument(trace_dns=True)
    client = openai.AsyncOpenAI(base_url=f"http://localhost:{server.port}/v1", api_key="sk-test")
    async with client.responses.connect():
        await asyncio.sleep(0)
    span = _handshake(captured)
    a = attrs(span)
    [(start, end)] = slow_resolver
    assert_close_ns(round(a[DNS] * 1e9), end - start, "the lookup")
    assert a[CONNECT] < SLOW_S
    _parts_inside(span)


def test_a_refused_connection_has_connect_and_no_upgrade(instrument: Callable[..., Captured]) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="sk-test")
    with pytest.raises(OSError):
        client.responses.connect().enter()
    span = _handshake(captured)
    a = attrs(span)
    assert a["error.type"] == "ConnectionRefusedError"
    assert a[CONNECT] > 0 and UPGRADE not in a
    _parts_inside(span)


def test_a_rejected_upgrade_has_its_upgrade_time(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=server.origin + "/nowhere", api_key="sk-test")
    with pytest.raises(Exception, match="404"):
        client.responses.connect().enter()
    a = attrs(_handshake(captured))
    assert a["http.response.status_code"] == 404 and a[UPGRADE] > 0 and a[CONNECT] > 0


def test_someone_elses_websocket_is_not_timed(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    """websockets used directly (no SDK manager around it): the upgrade wrapper passes it through."""
    from websockets.sync.client import connect

    captured = instrument()
    with connect(f"ws://127.0.0.1:{server.port}/v1/responses") as ws:
        ws.send('{"type": "noop"}')
    assert captured.spans() == []

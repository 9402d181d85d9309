"""The handshake span on every SDK generation (issue 31, item 1): openai 1.x's Realtime managers,
which connect without ``_connect_ws``; TLS apart from the TCP connect on ``wss://`` (sync and asyncio:
a server whose TLS handshake takes 100 ms more shows up in ``tls``, not in ``connect``)."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.fake_server import FakeServer
from tests.support.span_checks import Captured, attrs, duration_ns, start_mono
from tests.websocket.support import require_realtime, ws_patched_callables, ws_url

require_realtime()

MODEL = "gpt-realtime"
SLOW_S = 0.100
DNS, CONNECT, TLS, UPGRADE = (f"openai_latency.websocket.{n}" for n in ("dns", "connect", "tls", "upgrade"))


def _handshake(captured: Captured) -> Any:
    [span] = [s for s in captured.spans() if s.name == "openai.websocket.connect"]
    return span


def _tile(span: Any) -> None:
    """The parts follow each other inside the span: their sum is at most its length."""
    a = attrs(span)
    total = round(sum(a.get(k, 0.0) for k in (DNS, CONNECT, TLS, UPGRADE)) * 1e9)
    assert 0 < total <= duration_ns(span), (a, duration_ns(span))


def _until_done(events: Any) -> None:
    for event in events:
        if event.type == "response.done":
            return


async def _until_done_async(events: Any) -> None:
    async for event in events:
        if event.type == "response.done":
            return


def _linked(captured: Captured, handshake: Any) -> None:
    turns = [s for s in captured.spans() if s.name.startswith("realtime")]
    assert turns and all([lk.context.span_id for lk in t.links] == [handshake.context.span_id] for t in turns)


def test_a_realtime_handshake_span_and_its_turn_links_to_it(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=server.base_url, websocket_base_url=ws_url(server), api_key="sk-test")
    with client.realtime.connect(model=MODEL) as connection:
        connection.send({"type": "response.create"})
        _until_done(connection)
    span = _handshake(captured)
    a = attrs(span)
    assert a["http.response.status_code"] == 101 and a["openai_latency.websocket.reconnect_attempt"] == 0
    assert a[CONNECT] > 0 and a[UPGRADE] > 0 and TLS not in a
    _tile(span)
    _linked(captured, span)


async def test_a_realtime_handshake_span_on_the_async_client(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    captured = instrument()
    client = openai.AsyncOpenAI(
        base_url=server.base_url, websocket_base_url=ws_url(server), api_key="sk-test"
    )
    async with client.realtime.connect(model=MODEL) as connection:
        await connection.send({"type": "response.create"})
        await _until_done_async(connection)
    span = _handshake(captured)
    assert attrs(span)[UPGRADE] > 0
    _tile(span)
    _linked(captured, span)


def test_a_rejected_realtime_upgrade(instrument: Callable[..., Captured], server: FakeServer) -> None:
    captured = instrument()
    client = openai.OpenAI(base_url=server.base_url, websocket_base_url=ws_url(server) + "/x", api_key="k")
    with pytest.raises(Exception, match="404"):
        client.realtime.connect(model=MODEL).enter()
    a = attrs(_handshake(captured))
    assert a["error.type"] == "404" and a["http.response.status_code"] == 404 and a[UPGRADE] > 0


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeServer, ssl.SSLContext]]:
    """A TLS fake server whose TLS handshake waits 100 ms (its SNI callback), and a client context."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server_context)
    server_context.sni_callback = lambda *_: time.sleep(SLOW_S)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    with FakeServer(ssl_context=server_context) as srv:
        yield srv, client_context


def _wss(srv: FakeServer) -> str:
    return f"wss://localhost:{srv.port}/v1"


def _tls_checked(captured: Captured, srv: FakeServer, before: int) -> None:
    span = _handshake(captured)
    a = attrs(span)
    assert a[TLS] >= SLOW_S and a[CONNECT] < SLOW_S, a  # the slow TLS handshake is in tls, not connect
    _tile(span)
    upgrade_start = start_mono(span) + round((a[CONNECT] + a[TLS]) * 1e9)
    # the server opens the session once it has the upgrade request, which left after TLS ended
    assert before <= start_mono(span) <= upgrade_start <= srv.records()[-1].received_ns


def test_tls_apart_on_the_sync_client(
    instrument: Callable[..., Captured], tls_server: tuple[FakeServer, ssl.SSLContext]
) -> None:
    srv, context = tls_server
    captured = instrument()
    client = openai.OpenAI(base_url=srv.base_url, websocket_base_url=_wss(srv), api_key="sk-test")
    before = time.perf_counter_ns()
    with client.realtime.connect(model=MODEL, websocket_connection_options={"ssl": context}):
        pass
    _tls_checked(captured, srv, before)


async def test_tls_apart_on_the_async_client(
    instrument: Callable[..., Captured], tls_server: tuple[FakeServer, ssl.SSLContext]
) -> None:
    srv, context = tls_server
    captured = instrument()
    client = openai.AsyncOpenAI(base_url=srv.base_url, websocket_base_url=_wss(srv), api_key="sk-test")
    before = time.perf_counter_ns()
    async with client.realtime.connect(model=MODEL, websocket_connection_options={"ssl": context}):
        await asyncio.sleep(0)
    _tls_checked(captured, srv, before)


def test_a_failed_tls_handshake_is_in_tls(
    instrument: Callable[..., Captured], tls_server: tuple[FakeServer, ssl.SSLContext]
) -> None:
    srv, _ = tls_server
    captured = instrument()
    client = openai.OpenAI(base_url=srv.base_url, websocket_base_url=_wss(srv), api_key="sk-test")
    untrusting = ssl.create_default_context(cafile=None)
    untrusting.load_verify_locations(cadata=_throwaway_ca_pem())
    with pytest.raises(ssl.SSLError):
        client.realtime.connect(model=MODEL, websocket_connection_options={"ssl": untrusting}).enter()
    a = attrs(_handshake(captured))
    assert a["error.type"] == "ssl.SSLCertVerificationError" and a[TLS] >= SLOW_S and UPGRADE not in a


def _throwaway_ca_pem() -> str:
    trustme = pytest.importorskip("trustme")
    return str(trustme.CA().cert_pem.bytes().decode())


def test_uninstrument_restores_the_managers_and_the_phase_hooks(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:

    def current() -> dict[str, Any]:
        return {
            **ws_patched_callables(),
            "getaddrinfo": vars(asyncio.base_events.BaseEventLoop)["getaddrinfo"],
        }

    before = current()
    instrument(trace_dns=True)
    during = current()
    assert all(during[key] is not before[key] for key in before)
    if not hasattr(openai.resources.realtime.realtime.RealtimeConnectionManager, "_connect_ws"):
        assert "RealtimeConnectionManager.__enter__@openai.resources.realtime.realtime" in before  # 1.x
    OpenAILatencyInstrumentor().uninstrument()
    assert current() == before
    client = openai.OpenAI(base_url=server.base_url, websocket_base_url=ws_url(server), api_key="sk-test")
    with client.realtime.connect(model=MODEL) as connection:  # still works, nothing timed
        connection.send({"type": "response.create"})
        _until_done(connection)

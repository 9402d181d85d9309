"""HTTP/2 (issue 3): ``network.protocol.version == "2"``, http.* sub-phases from ``http2.*`` trace events,
phases against the server log, multiplexing, and the fake server's own HTTP/2 behaviour.

The fake server offers ``h2`` by ALPN over TLS when the ``h2`` package is installed; the client asks
for it with ``http2=True``. Timing tests use a TLS fake server in its own process.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.trace import StatusCode

from openai_latency.fake_server import FakeServer, RequestRecord, SpawnedServer
from tests.support import network
from tests.support.network import MESSAGES, attr, network_waits, sub_phases
from tests.support.retry import retry_timing_async
from tests.support.span_checks import (
    MS,
    Captured,
    assert_close_ns,
    assert_same_instant,
    assert_tiles,
    duration_ns,
    end_mono,
    start_mono,
)

pytestmark = pytest.mark.usefixtures("detailed_spans")  # these tests read the http.* spans

HAS_H2 = importlib.util.find_spec("h2") is not None
needs_h2 = pytest.mark.skipif(not HAS_H2, reason="the h2 package is not installed: no HTTP/2 to test")
SUB_ORDER = ["http.pool_wait", "http.dns", "http.connect", "http.tls", "http.send", "http.server_wait"]
SRC = str(Path(__file__).resolve().parents[2] / "src")
# 150 ms before headers, a role chunk, first content 50 ms later, then 5 more at 60 ms each
STREAM_SCRIPT = {
    "x-fake-delay-ms": "150",
    "x-fake-ttft-ms": "50",
    "x-fake-chunks": "6",
    "x-fake-chunk-delay-ms": "60",
}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(PEM with the server's key and chain, PEM of the CA that signed it): a throwaway trustme CA."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    folder = tmp_path_factory.mktemp("tls")
    pem, ca_pem = folder / "server.pem", folder / "ca.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(pem))
    ca.cert_pem.write_to_path(str(ca_pem))
    return str(pem), str(ca_pem)


def _server_context(pem: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(pem)
    return ctx


@pytest.fixture(scope="module")
def h2_timing_server(tls: tuple[str, str]) -> Iterator[SpawnedServer]:
    """TLS fake server in its own process, HTTP/2 by ALPN."""
    if not HAS_H2:
        pytest.skip("the h2 package is not installed: no HTTP/2 to test")
    with FakeServer.spawn(certfile=tls[0]) as fake:
        assert fake.base_url.startswith("https://")
        yield fake


def _client(base_url: str, ca_pem: str, is_async: bool) -> Any:
    """An SDK client over an ``http2=True`` client of the HTTP library the SDK sends with."""
    http = network.http_client(is_async, http2=True, verify=ssl.create_default_context(cafile=ca_pem))
    return network.client(base_url, is_async, http_client=http, max_retries=0)


async def _consume(result: Any, is_async: bool, stream: bool) -> Any:
    if is_async:
        result = await result
        if stream:
            return [chunk async for chunk in result]
    elif stream:
        return list(result)
    return result


def _check_sub_phases(captured: Captured, op: Any) -> dict[str, Any]:
    """HTTP/2 on the network_wait; http.* children in order, tiling it (checked once: no timing)."""
    wait = network_waits(captured, op)[0]
    assert attr(wait, "network.protocol.version") == "2"
    children = captured.children(wait)
    names = [s.name for s in children]
    assert names == [n for n in SUB_ORDER if n in names], names
    assert {"http.pool_wait", "http.send", "http.server_wait"} <= set(names), names
    assert_tiles(wait, children, max_gap_ms=0.5)
    return sub_phases(captured, wait)


def _server_wait_timing(
    subs: dict[str, Any], record: RequestRecord, client_may_hold_headers: bool = False
) -> None:
    """server_wait = the server's wait, against its log (timing)."""
    assert record.headers_sent_ns is not None
    server_wait = subs["http.server_wait"]
    if client_may_hold_headers:
        # httpcore's (and httpcore2's) sync HTTP/2 reads the connection under one lock: a stream's
        # headers can sit in the client while another thread's read holds it (seen on every SDK leg,
        # not every run). The span shows when the caller got them, which is what it is for.
        assert duration_ns(server_wait) >= record.headers_sent_ns - record.received_ns - 3 * MS
    else:
        assert_close_ns(
            duration_ns(server_wait), record.headers_sent_ns - record.received_ns, "server_wait vs log"
        )
    # the wait spans the server's: the request was sent before the server had it, headers came after
    assert start_mono(server_wait) <= record.received_ns + 3 * MS
    assert end_mono(server_wait) >= record.headers_sent_ns - 3 * MS


class LegacyH2ThreadRace(Exception):
    """A sync call failed with ``Server disconnected`` on legacy httpcore's HTTP/2 (see
    :func:`_legacy_h2_thread_race`): upstream, not ours; the scenario is run again."""


def _legacy_h2_thread_race(exc: BaseException) -> bool:
    """The failure of legacy ``httpcore`` (1.0.x, the openai 1.x/2.x and legacy-httpx legs) when two
    threads share one new HTTP/2 connection: once in a few hundred runs both calls of the multiplex
    scenario get ``APIConnectionError`` from ``httpcore.RemoteProtocolError("Server disconnected")``
    while the server neither reset nor closed anything (its log shows the client's EOF only after the
    failure). It happens at about the same rate with the instrumentation off; it was not seen with
    httpcore2 in 800 runs (issue 11 item 11; formerly seen here as ``KeyError: None`` from the record
    lookup)."""
    if not isinstance(exc, openai.APIConnectionError):
        return False
    cause = exc.__cause__
    while cause is not None:
        kind = type(cause)
        if kind.__module__.split(".", 1)[0] == "httpcore" and kind.__name__ == "RemoteProtocolError":
            return str(cause) == "Server disconnected"
        cause = cause.__cause__
    return False


# -- the SDK over HTTP/2, instrumented --------------------------------------------------------------


@needs_h2
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_json_then_stream_over_http2(
    instrument: Callable[..., Captured],
    h2_timing_server: SpawnedServer,
    tls: tuple[str, str],
    is_async: bool,
) -> None:
    captured = instrument()
    await retry_timing_async(
        lambda: _json_then_stream(captured, h2_timing_server, tls[1], is_async),
        _json_then_stream_timing,
        attempts=4,
    )


@dataclass(frozen=True)
class _Call:
    op: Any
    record: RequestRecord
    subs: dict[str, Any]
    phases: dict[str, Any]


async def _json_then_stream(
    captured: Captured, server: SpawnedServer, ca_pem: str, is_async: bool
) -> tuple[_Call, _Call]:
    """A non-stream call on a fresh connection, then a stream on the same one; what does not depend on
    the scheduler is checked here, once."""
    captured.clear()
    # warm the SDK's lazy imports and parsers on a throwaway client (its own connection) ...
    warm = _client(server.base_url, ca_pem, is_async)
    await _consume(warm.chat.completions.create(model="m", messages=MESSAGES), is_async, stream=False)
    await _consume(
        warm.chat.completions.create(model="m", messages=MESSAGES, stream=True), is_async, stream=True
    )
    captured.clear()
    # ... so the measured client's first call opens a fresh connection (TCP, TLS, h2 preface)
    client = _client(server.base_url, ca_pem, is_async)
    completion = await _consume(
        client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            extra_headers={"x-fake-delay-ms": "200", "x-fake-body-delay-ms": "50"},
        ),
        is_async,
        stream=False,
    )
    assert completion.choices[0].message.content
    chunks = await _consume(
        client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, extra_headers=STREAM_SCRIPT
        ),
        is_async,
        stream=True,
    )
    assert len(chunks) == 8  # role + 6 content + finish
    json_op, stream_op = captured.operations()
    json_rec = server.record(attr(json_op, "openai_latency.request_id"))
    stream_rec = server.record(attr(stream_op, "openai_latency.request_id"))
    assert (json_rec.outcome, stream_rec.outcome) == ("ok", "ok")

    # one HTTP/2 connection: TLS on the first call only, the second reuses it
    assert json_rec.connection_id == stream_rec.connection_id
    assert (json_rec.connection_request_index, stream_rec.connection_request_index) == (0, 1)
    json_subs = _check_sub_phases(captured, json_op)
    stream_subs = _check_sub_phases(captured, stream_op)
    assert list(json_subs) == ["http.pool_wait", "http.connect", "http.tls", "http.send", "http.server_wait"]
    assert list(stream_subs) == ["http.pool_wait", "http.send", "http.server_wait"]
    assert duration_ns(json_subs["http.tls"]) > 0
    assert attr(json_op, "openai_latency.connection.reused") is False
    assert attr(stream_op, "openai_latency.connection.reused") is True
    assert json_rec.headers_sent_ns is not None and stream_rec.headers_sent_ns is not None
    assert json_rec.headers_sent_ns - json_rec.received_ns >= 200 * MS
    assert stream_rec.headers_sent_ns - stream_rec.received_ns >= 150 * MS

    # non-stream: response_read = headers -> body
    json_phases = {p.name: p for p in captured.phases(json_op)}
    assert list(json_phases) == ["openai.request_build", "openai.network_wait", "openai.response_read"]
    assert json_rec.event_ns("body")[0] - json_rec.headers_sent_ns >= 50 * MS
    assert_tiles(json_op, captured.phases(json_op))

    # stream: first_token = headers -> first content chunk; stream_drain = first content -> [DONE]
    stream_phases = {p.name: p for p in captured.phases(stream_op)}
    assert list(stream_phases) == [
        "openai.request_build",
        "openai.network_wait",
        "openai.first_token",
        "openai.stream_drain",
    ]
    assert stream_rec.first_content_ns is not None
    assert stream_rec.event_ns("done")[0] - stream_rec.first_content_ns >= 300 * MS
    assert_tiles(stream_op, captured.phases(stream_op))
    assert attr(stream_op, "openai_latency.stream.end_state") == "completed"
    return _Call(json_op, json_rec, json_subs, json_phases), _Call(
        stream_op, stream_rec, stream_subs, stream_phases
    )


def _json_then_stream_timing(calls: tuple[_Call, _Call]) -> None:
    """Each phase against the server's log."""
    json_call, stream_call = calls
    json_rec, stream_rec = json_call.record, stream_call.record
    _server_wait_timing(json_call.subs, json_rec)
    _server_wait_timing(stream_call.subs, stream_rec)
    assert json_rec.headers_sent_ns is not None and stream_rec.headers_sent_ns is not None
    body_ns = json_rec.event_ns("body")[0]
    assert_close_ns(
        duration_ns(json_call.phases["openai.response_read"]),
        body_ns - json_rec.headers_sent_ns,
        "response_read",
    )
    phases = stream_call.phases
    first_ns, done_ns = stream_rec.first_content_ns, stream_rec.event_ns("done")[0]
    assert first_ns is not None
    assert_close_ns(
        duration_ns(phases["openai.first_token"]), first_ns - stream_rec.headers_sent_ns, "first_token"
    )
    assert_close_ns(duration_ns(phases["openai.stream_drain"]), done_ns - first_ns, "stream_drain")
    assert_same_instant(end_mono(phases["openai.first_token"]), first_ns, "first output chunk")


@needs_h2
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_concurrent_calls_multiplex_on_one_connection(
    instrument: Callable[..., Captured],
    h2_timing_server: SpawnedServer,
    tls: tuple[str, str],
    is_async: bool,
) -> None:
    captured = instrument()
    await retry_timing_async(
        lambda: _two_concurrent_calls(captured, h2_timing_server, tls[1], is_async),
        lambda calls: _two_concurrent_calls_timing(calls, is_async),
        attempts=4,
        also=(LegacyH2ThreadRace,),  # upstream, not ours: the scenario is run again
    )


async def _two_concurrent_calls(
    captured: Captured, server: SpawnedServer, ca_pem: str, is_async: bool
) -> list[_Call]:
    """Two calls at once on one client; what does not depend on the scheduler is checked here, once."""
    captured.clear()
    client = _client(server.base_url, ca_pem, is_async)
    # Both requests are on the server at once; their answers come 150 ms apart, so the client handles
    # one response at a time (two at the same instant would wait for each other's read, client-side).
    delays = ("300", "450")
    if is_async:
        await asyncio.gather(
            *(
                client.chat.completions.create(
                    model="m", messages=MESSAGES, extra_headers={"x-fake-delay-ms": delay}
                )
                for delay in delays
            )
        )
    else:
        barrier = threading.Barrier(2)
        failures: list[BaseException] = []

        def call(delay: str) -> None:
            barrier.wait()
            try:
                client.chat.completions.create(
                    model="m", messages=MESSAGES, extra_headers={"x-fake-delay-ms": delay}
                )
            except BaseException as exc:  # re-raised below: a thread's exception would be lost
                failures.append(exc)

        threads = [threading.Thread(target=call, args=(delay,)) for delay in delays]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failures and all(_legacy_h2_thread_race(exc) for exc in failures):
            _check_failed_calls(captured, failures)  # what the instrumentation made of it: checked once
            raise LegacyH2ThreadRace(repr(failures[0])) from failures[0]
        if failures:
            # A call that failed has no response, hence no request id: raise what it raised (this
            # used to surface as ``KeyError: None`` from the record lookup below).
            raise failures[0]
    ops = captured.operations()
    # every call answered: two operations, each with its response's request id
    assert len(ops) == 2, [op.name for op in ops]
    for op in ops:
        assert attr(op, "openai_latency.request_id"), dict(op.attributes or {})
    records = {op.context.span_id: server.record(attr(op, "openai_latency.request_id")) for op in ops}
    first, second = sorted(records.values(), key=lambda r: r.received_ns)
    # one connection, two streams
    assert first.connection_id == second.connection_id
    assert {first.connection_request_index, second.connection_request_index} == {0, 1}
    # httpcore opened the connection for one call; the other found it there (no connect/TLS of its own)
    reused = sorted(
        bool(attr(network_waits(captured, op)[0], "openai_latency.connection.reused")) for op in ops
    )
    assert reused == [False, True]
    calls = []
    for op in ops:
        subs = _check_sub_phases(captured, op)
        assert ("http.tls" in subs) is (attr(op, "openai_latency.connection.reused") is False)
        assert_tiles(op, captured.phases(op))
        calls.append(_Call(op, records[op.context.span_id], subs, {}))
    return calls


def _two_concurrent_calls_timing(calls: list[_Call], is_async: bool) -> None:
    """Served at the same time (not one after the other), each wait against the server's log."""
    first, second = sorted((call.record for call in calls), key=lambda r: r.received_ns)
    assert first.headers_sent_ns is not None and second.received_ns < first.headers_sent_ns
    for call in calls:
        _server_wait_timing(call.subs, call.record, client_may_hold_headers=not is_async)


def test_only_legacy_httpcores_disconnect_is_retried() -> None:
    """The scenario is retried on the upstream failure only: that exception chain from legacy
    httpcore, not the same from httpcore2, nor another message, nor the exception alone."""
    lib = network.http_lib()
    core = importlib.import_module("httpcore2" if lib.__name__ == "httpx2" else "httpcore")

    def failure(message: str) -> BaseException:
        outer = lib.RemoteProtocolError(message)
        outer.__cause__ = core.RemoteProtocolError(message)
        exc = openai.APIConnectionError(request=lib.Request("POST", "https://api.test/v1/chat/completions"))
        exc.__cause__ = outer
        return exc

    assert _legacy_h2_thread_race(failure("Server disconnected")) is (core.__name__ == "httpcore")
    assert not _legacy_h2_thread_race(failure("Server disconnected without sending a response."))
    assert not _legacy_h2_thread_race(lib.RemoteProtocolError("Server disconnected"))
    assert not _legacy_h2_thread_race(openai.APIConnectionError(request=lib.Request("GET", "https://a.test")))


def _check_failed_calls(captured: Captured, failures: list[BaseException]) -> None:
    """Each call that raised has an operation span that ended with ERROR and the caller's exception
    type, no request id (no response), and a network_wait that ended with the transport's error on
    the one http.* step that failed."""
    ops = captured.operations()
    assert len(ops) == 2, [op.name for op in ops]
    failed = [op for op in ops if op.status.status_code is StatusCode.ERROR]
    assert len(failed) == len(failures), [dict(op.attributes or {}) for op in ops]
    for op in failed:
        assert attr(op, "error.type") == "openai.APIConnectionError", dict(op.attributes or {})
        assert attr(op, "openai_latency.request_id") is None
        (wait,) = network_waits(captured, op)
        assert attr(wait, "error.type") == "httpx.RemoteProtocolError", dict(wait.attributes or {})
        failed_steps = [s.name for s in captured.children(wait) if attr(s, "error.type")]
        assert len(failed_steps) == 1, failed_steps


@needs_h2
async def test_phase_spans_mode_phases_only_over_http2(
    instrument: Callable[..., Captured], h2_timing_server: SpawnedServer, tls: tuple[str, str]
) -> None:
    captured = instrument(phase_spans="phases")
    client = _client(h2_timing_server.base_url, tls[1], is_async=False)
    client.chat.completions.create(model="m", messages=MESSAGES, extra_headers={"x-fake-delay-ms": "20"})
    wait = network_waits(captured, captured.operation())[0]
    assert attr(wait, "network.protocol.version") == "2"
    assert captured.children(wait) == []


# -- the fake server's HTTP/2 itself, with a raw h2 client --------------------------------------------


class RawH2:
    """A minimal blocking HTTP/2 client (h2 state machine over a TLS socket) for what httpcore never does:
    RST_STREAM, tiny flow-control windows."""

    def __init__(self, port: int, ca_pem: str, window: int | None = None) -> None:
        import h2.config
        import h2.connection
        import h2.settings

        client_ctx = ssl.create_default_context(cafile=ca_pem)
        client_ctx.set_alpn_protocols(["h2"])
        self.sock = client_ctx.wrap_socket(
            socket.create_connection(("127.0.0.1", port)), server_hostname="localhost"
        )
        assert self.sock.selected_alpn_protocol() == "h2"
        self.sock.settimeout(10)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        if window is not None:
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.flush()

    def flush(self) -> None:
        self.sock.sendall(self.conn.data_to_send())

    def request(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        fields = [(":method", "POST"), (":path", path), (":scheme", "https"), (":authority", "localhost")]
        fields += [("content-type", "application/json"), *headers.items()]
        self.conn.send_headers(stream_id, fields)
        self.conn.send_data(stream_id, body, end_stream=True)
        self.flush()
        return stream_id

    def events(self, ack: bool = True) -> list[Any]:
        import h2.events

        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        events = self.conn.receive_data(data)
        for event in events:
            if ack and isinstance(event, h2.events.DataReceived):
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        self.flush()
        return events

    def response(self, stream_id: int) -> tuple[dict[str, str], bytes, list[int]]:
        """Headers, body and the size of every DATA frame of one stream, acknowledging as it reads."""
        import h2.events

        headers: dict[str, str] = {}
        body, frames = b"", []
        while True:
            for event in self.events():
                if getattr(event, "stream_id", None) != stream_id:
                    continue
                if isinstance(event, h2.events.ResponseReceived):
                    headers = {_s(k): _s(v) for k, v in event.headers or ()}
                elif isinstance(event, h2.events.DataReceived):
                    body += event.data or b""
                    frames.append(len(event.data or b""))
                elif isinstance(event, h2.events.StreamEnded):
                    return headers, body, frames
                elif isinstance(event, h2.events.StreamReset):
                    raise ConnectionError(f"stream {stream_id} reset")

    def close(self) -> None:
        self.sock.close()


def _s(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


CHAT = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
STREAM_CHAT = b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'


@needs_h2
def test_client_rst_stream_is_client_closed_and_the_connection_lives_on(tls: tuple[str, str]) -> None:
    import h2.errors

    with FakeServer(ssl_context=_server_context(tls[0])) as server:
        client = RawH2(server.port, tls[1])
        try:
            slow = client.request("/v1/chat/completions", STREAM_CHAT, {"x-fake-chunk-delay-ms": "100"})
            while server.records(wait=0) == [] or server.records(wait=0)[0].headers_sent_ns is None:
                client.events()
            client.conn.reset_stream(slow, h2.errors.ErrorCodes.CANCEL)
            client.flush()
            fast = client.request("/v1/chat/completions", CHAT, {})
            headers, body, _ = client.response(fast)
            assert headers[":status"] == "200" and b"tok0" in body
        finally:
            client.close()
        cancelled, answered = server.records()
    assert cancelled.outcome == "client_closed"
    assert cancelled.finished_ns is not None and cancelled.finished_ns - cancelled.received_ns < 400 * MS
    assert answered.outcome == "ok"
    assert cancelled.connection_id == answered.connection_id
    assert (cancelled.connection_request_index, answered.connection_request_index) == (0, 1)
    assert answered.headers["host"] == "localhost"


@needs_h2
def test_connection_closed_mid_stream_is_client_closed(tls: tuple[str, str]) -> None:
    with FakeServer(ssl_context=_server_context(tls[0])) as server:
        client = RawH2(server.port, tls[1])
        client.request(
            "/v1/chat/completions", STREAM_CHAT, {"x-fake-chunk-delay-ms": "100", "x-fake-chunks": "20"}
        )
        while not server.records(wait=0) or server.records(wait=0)[0].headers_sent_ns is None:
            client.events()
        client.close()
        record = server.last_record(wait=2.0)
    assert record.outcome == "client_closed"
    assert record.finished_ns is not None and record.finished_ns - record.received_ns < 500 * MS


@needs_h2
def test_flow_control_small_window(tls: tuple[str, str]) -> None:
    """A 4 KiB stream window: the server sends no more than the window and waits for WINDOW_UPDATE."""
    with FakeServer(ssl_context=_server_context(tls[0])) as server:
        client = RawH2(server.port, tls[1], window=4096)
        try:
            stream_id = client.request("/v1/chat/completions", CHAT, {"x-fake-chunks": "5000"})
            headers, body, frames = client.response(stream_id)  # h2 raises on a frame beyond the window
        finally:
            client.close()
        record = server.last_record()
    assert int(headers["content-length"]) == len(body) > 30_000
    assert max(frames) <= 4096 and len(frames) >= len(body) // 4096
    assert record.outcome == "ok" and record.event_ns("body")


@needs_h2
def test_disconnect_fault_resets_only_its_stream(tls: tuple[str, str]) -> None:
    with FakeServer(ssl_context=_server_context(tls[0])) as server:
        client = RawH2(server.port, tls[1])
        try:
            broken = client.request("/v1/chat/completions", STREAM_CHAT, {"x-fake-disconnect-after": "2"})
            with pytest.raises(ConnectionError, match="reset"):
                client.response(broken)
            headers, _, _ = client.response(client.request("/v1/chat/completions", CHAT, {}))
            assert headers[":status"] == "200"
        finally:
            client.close()
        first, second = server.records()
    assert (first.outcome, second.outcome) == ("disconnected", "ok")
    assert first.connection_id == second.connection_id


# -- without h2 -------------------------------------------------------------------------------------

_NO_H2_SCRIPT = """
import socket, ssl, sys
sys.modules["h2"] = None  # as if the package were not installed: "import h2" raises ImportError
from openai_latency.fake_server import FakeServer
server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
server_ctx.load_cert_chain(sys.argv[1])
client_ctx = ssl.create_default_context(cafile=sys.argv[2])
client_ctx.set_alpn_protocols(["h2", "http/1.1"])
with FakeServer(ssl_context=server_ctx) as server:
    assert not server.http2
    raw = socket.create_connection(("127.0.0.1", server.port))
    sock = client_ctx.wrap_socket(raw, server_hostname="localhost")
    print(sock.selected_alpn_protocol())
    sock.sendall(b"GET /v1/models HTTP/1.1\\r\\nhost: localhost\\r\\nconnection: close\\r\\n\\r\\n")
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    print(data.split(b"\\r\\n", 1)[0].decode())
"""


def test_without_h2_alpn_negotiates_http11(tls: tuple[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _NO_H2_SCRIPT, *tls],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["http/1.1", "HTTP/1.1 200 OK"]


@needs_h2
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_http2_disabled_serves_http11(
    instrument: Callable[..., Captured], tls: tuple[str, str], is_async: bool
) -> None:
    with FakeServer(ssl_context=_server_context(tls[0]), http2=False) as server:
        captured = instrument()
        client = _client(server.base_url, tls[1], is_async)
        await _consume(client.chat.completions.create(model="m", messages=MESSAGES), is_async, stream=False)
        wait = network_waits(captured, captured.operation())[0]
        assert attr(wait, "network.protocol.version") == "1.1"

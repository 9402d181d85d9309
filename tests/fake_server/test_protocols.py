"""The fake server's record of a request means the same on HTTP/1.1 and HTTP/2.

Both protocols build the request and sleep through one core (``fake_server/exchange.py``); here the same
scripted requests go to one TLS fake server (in its own process, for timing) once over HTTP/1.1 and
once over HTTP/2, and their records must agree: the same fields with the same values (headers but the
HTTP/1.1 hop-by-hop ones), the same events in the same order, and times that mean the same thing
(``received_ns`` once the request was complete, ``headers_sent_ns`` and every event once written),
checked against the scripted pauses and against the client's own clock.
"""

from __future__ import annotations

import importlib.util
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from openai_latency.fake_server import FakeServer, RequestRecord, SpawnedServer
from tests.support import network

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("h2") is None, reason="the h2 package is not installed: no HTTP/2 to test"
)

MS = 1_000_000
#: Upper-bound slack of timing checks: scheduling noise on a loaded 2-CPU machine (lower bounds are exact).
SLACK_MS = 20
#: How much later than the client's "got it" a server timestamp may be: the server takes it right after
#: its write returned, and the client may read the bytes first (more so when the machine is loaded).
AFTER_CLIENT_MS = SLACK_MS
#: Headers that only HTTP/1.1 has (hop-by-hop): HTTP/2 forbids them.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "upgrade"})
PROTOCOLS = {"HTTP/1.1": False, "HTTP/2": True}
CHAT: Any = {"model": "m", "messages": [{"role": "user", "content": "say three words"}]}


@dataclass(frozen=True)
class Scenario:
    method: str
    path: str
    body: Any = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    status: int = 200
    kinds: tuple[str, ...] = ("body",)
    #: Lower bounds of the scripted waits (ms): headers after the request, then each event after the last.
    wait_ms: float = 0.0
    event_ms: tuple[float, ...] = ()


STREAM_KINDS = ("role", "content", "content", "content", "finish", "done")
SCENARIOS = {
    "json after a delay": Scenario(
        "POST", "/v1/chat/completions", CHAT, [("x-fake-delay-ms", "60")], wait_ms=60, event_ms=(0,)
    ),
    "json body after the headers": Scenario(
        "POST", "/v1/chat/completions", CHAT, [("x-fake-body-delay-ms", "50")], event_ms=(50,)
    ),
    "chat stream": Scenario(
        "POST",
        "/v1/chat/completions",
        {**CHAT, "stream": True},
        [
            ("X-Fake-Delay-Ms", "40"),  # names are case-insensitive on HTTP/1.1; lower-cased on both
            ("x-fake-ttft-ms", "50"),
            ("x-fake-chunks", "3"),
            ("x-fake-chunk-delay-ms", "30"),
        ],
        kinds=STREAM_KINDS,
        wait_ms=40,
        event_ms=(0, 50, 30, 30, 0, 0),
    ),
    "stream cut by an in-stream error": Scenario(
        "POST",
        "/v1/completions",
        {"model": "m", "prompt": "a b", "stream": True},
        [("x-fake-stream-error-after", "1"), ("x-fake-chunk-delay-ms", "20")],
        kinds=("text", "error_event"),
        event_ms=(0, 20),
    ),
    "Responses stream, GET with an id": Scenario(
        "GET",
        "/v1/responses/resp_abc%31?stream=true&include=a%20b&empty=",
        kinds=(
            *(f"event:response.{k}" for k in ("created", "in_progress", "output_item.added")),
            "event:response.content_part.added",
            *(["event:response.output_text.delta"] * 2),
            *(f"event:response.{k}" for k in ("output_text.done", "content_part.done", "output_item.done")),
            "event:response.completed",
        ),
        headers=[("x-fake-chunks", "2")],
    ),
    "scripted error with retry headers": Scenario(
        "POST",
        "/v1/embeddings",
        {"model": "e", "input": "x"},
        [
            ("x-fake-error", "rate_limit_exceeded"),
            ("x-fake-retry-after-ms", "5"),
            ("x-stainless-retry-count", "2"),
        ],
        status=429,
    ),
    "bad script": Scenario("POST", "/v1/chat/completions", CHAT, [("x-fake-chunks", "lots")], status=400),
    "unknown route": Scenario("GET", "/v1/nothing/here?x=1", status=404),
    "repeated and secret headers": Scenario(
        "POST",
        "/v1/chat/completions",
        CHAT,
        [
            ("x-tag", "a"),
            ("x-tag", "b"),
            ("authorization", "Bearer sk-secret"),
            ("traceparent", "00-" + "1" * 32 + "-" + "2" * 16 + "-01"),
        ],
    ),
}


@dataclass
class Seen:
    """One request as the client saw it, and the server's record of it."""

    record: RequestRecord
    http_version: str
    sent_ns: int  # client: just before sending
    headers_ns: int  # client: the response headers are in
    done_ns: int  # client: the whole body is in
    status: int


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SpawnedServer, ssl.SSLContext]]:
    """A TLS fake server in its own process offering h2 and http/1.1 by ALPN, and a client context."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    pem = tmp_path_factory.mktemp("tls") / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    with FakeServer.spawn(certfile=str(pem)) as server:
        yield server, client_ctx


@pytest.fixture(scope="module")
def exchanges(tls_server: tuple[SpawnedServer, ssl.SSLContext]) -> dict[str, dict[str, Seen]]:
    """Every scenario over each protocol, in order on one connection per protocol."""
    server, client_ctx = tls_server
    out: dict[str, dict[str, Seen]] = {}
    for protocol, http2 in PROTOCOLS.items():
        with network.http_client(
            http2=http2, verify=client_ctx, base_url=server.base_url.removesuffix("/v1")
        ) as client:
            out[protocol] = {name: _send(server, client, scenario) for name, scenario in SCENARIOS.items()}
    return out


def _send(server: SpawnedServer, client: Any, scenario: Scenario) -> Seen:
    kwargs: dict[str, Any] = {"headers": scenario.headers}
    if scenario.body is not None:
        kwargs["json"] = scenario.body
    sent_ns = time.perf_counter_ns()
    with client.stream(scenario.method, scenario.path, **kwargs) as response:
        headers_ns = time.perf_counter_ns()
        response.read()
        done_ns = time.perf_counter_ns()
    record = server.record(response.headers["x-request-id"])
    return Seen(record, response.http_version, sent_ns, headers_ns, done_ns, response.status_code)


def _meaning(record: RequestRecord) -> dict[str, Any]:
    """What a record says that must not depend on the protocol: every field but the id, the times and
    the connection; headers without the HTTP/1.1 hop-by-hop ones."""
    data: dict[str, Any] = record.to_dict()
    for name in ("request_id", "received_ns", "headers_sent_ns", "finished_ns", "connection_id"):
        del data[name]
    data["headers"] = {k: v for k, v in record.headers.items() if k not in HOP_BY_HOP}
    data["events"] = [kind for kind, _ in record.events]
    return data


def test_both_protocols_were_used(exchanges: dict[str, dict[str, Seen]]) -> None:
    for protocol, by_name in exchanges.items():
        assert {e.http_version for e in by_name.values()} == {protocol}
        assert len({e.record.connection_id for e in by_name.values()}) == 1  # one connection each
    assert (
        exchanges["HTTP/1.1"]["bad script"].record.connection_id
        != exchanges["HTTP/2"]["bad script"].record.connection_id
    )


def test_records_have_the_same_fields_and_values(exchanges: dict[str, dict[str, Seen]]) -> None:
    h1, h2 = exchanges["HTTP/1.1"], exchanges["HTTP/2"]
    for name, scenario in SCENARIOS.items():
        assert h1[name].status == h2[name].status == h1[name].record.status == scenario.status, name
        assert _meaning(h1[name].record) == _meaning(h2[name].record), name
        assert tuple(_meaning(h1[name].record)["events"]) == scenario.kinds, name
    # the only headers HTTP/1.1 adds are hop-by-hop ones
    extra = set(h1["json after a delay"].record.headers) - set(h2["json after a delay"].record.headers)
    assert extra <= HOP_BY_HOP, extra
    assert [e.record.connection_request_index for e in h2.values()] == list(range(len(SCENARIOS)))


def test_request_building_is_the_same(exchanges: dict[str, dict[str, Seen]]) -> None:
    """The shared core: lower-cased names, repeated headers joined, script split out, secrets dropped,
    path unquoted and query parsed, retry count read, host from :authority on HTTP/2."""
    for protocol, by_name in exchanges.items():
        tagged = by_name["repeated and secret headers"].record
        assert tagged.headers["x-tag"] == "a, b", protocol
        assert "authorization" not in tagged.headers and tagged.body == CHAT, protocol
        assert tagged.headers["host"].startswith("127.0.0.1:"), protocol
        get = by_name["Responses stream, GET with an id"].record
        assert (get.path, get.query) == (
            "/v1/responses/resp_abc1",
            {"stream": "true", "include": "a b", "empty": ""},
        )
        assert by_name["chat stream"].record.headers["x-fake-delay-ms"] == "40", protocol
        assert by_name["scripted error with retry headers"].record.attempt == 2, protocol
        assert by_name["unknown route"].record.query == {"x": "1"}, protocol


def test_times_mean_the_same(exchanges: dict[str, dict[str, Seen]]) -> None:
    """On both protocols: the client sent before the server had the request, the server's scripted
    pauses are between the record's times, and each server time precedes what the client saw."""
    for protocol, by_name in exchanges.items():
        for name, scenario in SCENARIOS.items():
            where = f"{protocol} {name}"
            e = by_name[name]
            record = e.record
            assert record.headers_sent_ns is not None and record.finished_ns is not None, where
            assert e.sent_ns < record.received_ns <= record.headers_sent_ns, where
            assert record.headers_sent_ns <= e.headers_ns + AFTER_CLIENT_MS * MS, where
            wait_ms = (record.headers_sent_ns - record.received_ns) / MS
            assert scenario.wait_ms <= wait_ms <= scenario.wait_ms + SLACK_MS, (where, wait_ms)
            times = [record.headers_sent_ns, *(ns for _, ns in record.events)]
            assert times == sorted(times) and times[-1] <= record.finished_ns, where
            assert times[-1] <= e.done_ns + AFTER_CLIENT_MS * MS, where
            for i, want in enumerate(scenario.event_ms):
                got = (times[i + 1] - times[i]) / MS
                assert want <= got <= want + SLACK_MS, (where, i, got)

"""Fault matrix: every step of a call made to fail by a real server on 127.0.0.1, sync and async,
stream and non-stream.

For each fault the same call runs once without instrumentation and once with it: the caller gets the
same exception (type, message, cause type) and the same chunks before it. The operation span ends
exactly once, ERROR with ``error.type`` and ``openai_latency.error.category``; the failing attempt's
``openai.network_wait`` tells how far it got: the ``http.*`` step that failed carries ``error.type``.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import trustme
from opentelemetry.trace import StatusCode

from openai_latency.fake_server import FakeServer
from tests.support import faulty_servers, network
from tests.support.network import MESSAGES, network_waits
from tests.support.span_checks import Captured, assert_tiles, attrs

pytestmark = pytest.mark.usefixtures("detailed_spans")  # these tests read the http.* spans


@dataclass(frozen=True)
class Fault:
    name: str
    category: str | None
    """openai_latency.error.category; None: the SDK raises nothing, the call succeeds."""
    error_type: str | None
    """The operation's error.type; ``RAISED``: the qualified name of what the caller got (older SDKs
    let httpx's own exception through mid-stream, newer ones wrap it in APIConnectionError)."""
    attempt_error: tuple[str, ...] = ()
    """Suffixes one of which ends the failing network_wait's error.type; () = the attempt succeeded."""
    failed_step: str | None = None
    """The http.* sub-phase of that network_wait that failed (carries error.type)."""
    async_failed_step: str | None = None
    """Where async clients may report it instead (default: ``failed_step``)."""
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 5.0
    big_body: bool = False
    streams: tuple[bool, ...] = (False, True)


CONNECTION = "openai.APIConnectionError"
RAISED = "<the caller's exception>"
JSON_ERROR = "json.decoder.JSONDecodeError"
FAULTS = [
    Fault("refused", "connection", CONNECTION, ("ConnectError",), "http.connect"),
    Fault(
        "connect-timeout",
        "timeout",
        "openai.APITimeoutError",
        ("ConnectTimeout",),
        "http.connect",
        timeout=0.3,
    ),
    Fault("tls-bad-certificate", "connection", CONNECTION, ("ConnectError",), "http.tls"),
    Fault("tls-wrong-hostname", "connection", CONNECTION, ("ConnectError",), "http.tls"),
    Fault("tls-closed-in-handshake", "connection", CONNECTION, ("ConnectError",), "http.tls"),
    Fault(
        "reset-while-sending-body",
        "connection",
        CONNECTION,
        ("ReadError", "RemoteProtocolError"),
        "http.send",
        # asyncio buffers what the socket does not take: the reset may only show when reading
        async_failed_step="http.server_wait",
        big_body=True,
    ),
    Fault(
        "read-timeout-before-headers",
        "timeout",
        "openai.APITimeoutError",
        ("ReadTimeout",),
        "http.server_wait",
        headers={"x-fake-delay-ms": "2000"},
        timeout=0.25,
    ),
    Fault("5xx", "server", "server_error", ("server_error",), headers={"x-fake-error": "server_error"}),
    # the response came (200): the body is what fails
    Fault("invalid-json", "other", JSON_ERROR, headers={"x-fake-corrupt": "invalid-json"}, streams=(False,)),
    Fault(
        "truncated-body",
        "connection",
        CONNECTION,
        ("RemoteProtocolError",),
        headers={"x-fake-corrupt": "truncated"},
        streams=(False,),
    ),
    Fault("wrong-shape-body", None, None, headers={"x-fake-corrupt": "wrong-shape"}, streams=(False,)),
    Fault(
        "disconnect-mid-stream",
        "connection",
        RAISED,
        headers={"x-fake-disconnect-after": "2"},
        streams=(True,),
    ),
    Fault(
        "malformed-sse-line",
        "stream_error",
        JSON_ERROR,
        headers={"x-fake-malformed-after": "2"},
        streams=(True,),
    ),
    Fault("wrong-shape-chunk", None, None, headers={"x-fake-corrupt": "wrong-shape"}, streams=(True,)),
    Fault(
        "sse-error-event",
        "stream_error",
        "server_error",
        headers={"x-fake-stream-error-after": "2"},
        streams=(True,),
    ),
]
CASES = [
    pytest.param(fault, is_async, stream, id=f"{fault.name}-{'async' if is_async else 'sync'}-{kind}")
    for fault in FAULTS
    for stream, kind in ((False, "json"), (True, "stream"))
    if stream in fault.streams
    for is_async in (False, True)
]


@dataclass
class Outcome:
    exception: tuple[type[BaseException], str, type[BaseException] | None] | None
    items: list[Any]


def _norm(item: Any) -> Any:
    data = item.model_dump(warnings=False)
    data.pop("id", None)  # the fake's ids differ per request
    return data


async def _run(client: Any, is_async: bool, stream: bool, fault: Fault) -> Outcome:
    messages = [{"role": "user", "content": "x" * 12_000_000}] if fault.big_body else MESSAGES
    items: list[Any] = []
    try:
        result = client.chat.completions.create(
            model="m", messages=messages, stream=stream, extra_headers=fault.headers
        )
        if is_async:
            result = await result
        if not stream:
            items.append(_norm(result))
        elif is_async:
            async for chunk in result:
                items.append(_norm(chunk))
        else:
            for chunk in result:
                items.append(_norm(chunk))
    except Exception as exc:
        cause = type(exc.__cause__) if exc.__cause__ is not None else None
        return Outcome((type(exc), str(exc), cause), items)
    return Outcome(None, items)


@contextlib.contextmanager
def _target(
    fault: Fault, server: FakeServer, is_async: bool
) -> Iterator[tuple[str, Callable[[], Any] | None]]:
    """(base URL, a maker of the http_client to pass, or None) where the fault happens."""
    name = fault.name
    if name == "refused":
        yield f"http://127.0.0.1:{faulty_servers.closed_port()}/v1", None
    elif name == "connect-timeout":
        with faulty_servers.FullBacklog() as backlog:
            yield backlog.base_url, None
    elif name.startswith("tls-"):
        _, trusted_client = network.tls_contexts()
        http_client = lambda: network.http_client(is_async, verify=trusted_client)  # noqa: E731
        if name == "tls-closed-in-handshake":
            with faulty_servers.RawServer(faulty_servers.close_during_handshake) as raw:
                yield f"https://127.0.0.1:{raw.port}/v1", http_client
            return
        if name == "tls-bad-certificate":
            server_context, _ = network.tls_contexts()  # another CA, unknown to the client
        else:  # a certificate of the client's CA, for another host
            ca = trustme.CA()
            server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ca.issue_cert("other.test").configure_cert(server_context)
            trusted_client = ssl.create_default_context()
            ca.configure_trust(trusted_client)
        with FakeServer(ssl_context=server_context) as tls_server:
            yield tls_server.base_url, http_client
    elif name == "reset-while-sending-body":
        with faulty_servers.RawServer(faulty_servers.reset_after_headers) as raw:
            yield raw.base_url, None
    else:
        yield server.base_url, None


@pytest.fixture
def span_end_warnings(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.WARNING, logger="opentelemetry")
    yield caplog


@pytest.mark.parametrize(("fault", "is_async", "stream"), CASES)
async def test_fault(
    instrument: Any,
    server: FakeServer,
    span_end_warnings: pytest.LogCaptureFixture,
    fault: Fault,
    is_async: bool,
    stream: bool,
) -> None:
    with _target(fault, server, is_async) as (base_url, make_http_client):

        def client() -> Any:
            kwargs: dict[str, Any] = {"max_retries": 0, "timeout": fault.timeout}
            if make_http_client is not None:
                kwargs["http_client"] = make_http_client()
            return network.client(base_url, is_async, **kwargs)

        baseline = await _run(client(), is_async, stream, fault)
        captured: Captured = instrument()
        outcome = await _run(client(), is_async, stream, fault)

    assert outcome == baseline  # same exception type, message and cause type; same chunks before it
    assert (baseline.exception is None) is (fault.category is None), baseline
    op = captured.operation()  # exactly one operation span ...
    assert not [r for r in span_end_warnings.records if "ended span" in r.getMessage()]  # ... ended once
    a = attrs(op)
    if fault.category is None:
        assert op.status.status_code is StatusCode.UNSET
        assert "error.type" not in a
    else:
        assert op.status.status_code is StatusCode.ERROR
        assert baseline.exception is not None
        if fault.error_type == RAISED:
            raised = baseline.exception[0]
            assert a["error.type"] == f"{raised.__module__.split('.')[0]}.{raised.__qualname__}"
        else:
            assert a["error.type"] == fault.error_type
        assert a["openai_latency.error.category"] == fault.category
        assert [event.name for event in op.events].count("exception") == 1
    if stream and baseline.items:
        assert a["openai_latency.stream.end_state"] == ("completed" if fault.category is None else "error")
        assert a["openai_latency.stream.chunks"] == len(baseline.items)

    assert_tiles(op, captured.phases(op))  # the phases still cover the whole call
    (wait,) = network_waits(captured, op)  # max_retries=0: one attempt
    wait_attrs = attrs(wait)
    subs = network.sub_phases(captured, wait)
    failed_steps = {
        name: attrs(span)["error.type"] for name, span in subs.items() if "error.type" in attrs(span)
    }
    if not fault.attempt_error:
        assert "error.type" not in wait_attrs
        assert wait_attrs["http.response.status_code"] == 200
        assert failed_steps == {}
        assert list(subs)[-1] == "http.server_wait"  # it got its response headers
    else:
        assert str(wait_attrs["error.type"]).endswith(fault.attempt_error), wait_attrs
    if fault.failed_step is not None:
        # the first step that failed, and every step after it failed too (httpcore reads a response
        # after a failed body write: a server may answer early)
        names = list(subs)
        first = next(iter(failed_steps), None)
        allowed = {fault.failed_step, (is_async and fault.async_failed_step) or fault.failed_step}
        assert first in allowed, failed_steps
        assert names[names.index(first) :] == list(failed_steps), (names, failed_steps)
    elif fault.attempt_error:
        assert failed_steps == {}


@pytest.mark.parametrize(
    ("fault", "is_async"),
    [
        pytest.param(fault, is_async, id=f"{fault.name}-{'async' if is_async else 'sync'}")
        for fault in FAULTS
        if fault.failed_step is not None
        for is_async in (False, True)
    ],
)
async def test_failed_step_in_phases_mode(
    instrument: Any, server: FakeServer, fault: Fault, is_async: bool
) -> None:
    """``phase_spans=phases`` (the default): no http.* spans, the network_wait names the sub-phase
    that failed (``openai_latency.http.failed``) and carries the durations up to it."""
    with _target(fault, server, is_async) as (base_url, make_http_client):
        kwargs: dict[str, Any] = {"max_retries": 0, "timeout": fault.timeout}
        if make_http_client is not None:
            kwargs["http_client"] = make_http_client()
        captured: Captured = instrument(phase_spans="phases")
        outcome = await _run(network.client(base_url, is_async, **kwargs), is_async, False, fault)
    assert outcome.exception is not None
    op = captured.operation()
    (wait,) = network_waits(captured, op)
    assert captured.children(wait) == []
    wait_attrs = attrs(wait)
    allowed = {fault.failed_step, (is_async and fault.async_failed_step) or fault.failed_step}
    assert wait_attrs["openai_latency.http.failed"] in allowed, wait_attrs
    assert str(wait_attrs["error.type"]).endswith(fault.attempt_error), wait_attrs
    durations = network.sub_phase_ns(captured, wait)
    assert wait_attrs["openai_latency.http.failed"] in durations
    # they run from the send to the failure; the network_wait lasts until the SDK gives up (raises)
    assert 0 < sum(durations.values()) <= wait.end_time - wait.start_time  # type: ignore[operator]

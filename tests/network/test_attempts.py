"""Per-attempt detail: status / error.type per network_wait, the reason and delay of each backoff."""

from __future__ import annotations

import socket
from collections.abc import Callable

import openai
import pytest

from openai_latency.fake_server import FakeServer
from tests.support import network
from tests.support.network import MESSAGES, attr, network_waits
from tests.support.span_checks import Captured, attrs, duration_ns

pytestmark = pytest.mark.usefixtures("detailed_spans")  # these tests read the http.* spans


def _backoffs(captured: Captured) -> list[dict[str, object]]:
    return [attrs(s) for s in captured.phases() if s.name == "openai.retry_backoff"]


@pytest.mark.parametrize(
    ("headers", "source", "delay"),
    [
        ({"x-fake-retry-after-ms": "40"}, "retry-after-ms", 0.04),
        ({"x-fake-retry-after": "0.05"}, "retry-after", 0.05),
        ({}, "backoff", None),
    ],
    ids=["retry-after-ms", "retry-after", "backoff"],
)
def test_retried_status_attempt_and_backoff(
    instrument: Callable[..., Captured],
    server: FakeServer,
    headers: dict[str, str],
    source: str,
    delay: float | None,
) -> None:
    captured = instrument()
    client = network.client(server.base_url, max_retries=2)
    script = {"x-fake-fail-attempts": "1", "x-fake-fail-status": "429", **headers}
    client.chat.completions.create(model="m", messages=MESSAGES, extra_headers=script)
    op = captured.operation()
    assert captured.phase_names(op) == [
        "openai.request_build",
        "openai.network_wait",
        "openai.retry_backoff",
        "openai.request_build",
        "openai.network_wait",
        "openai.response_read",
    ]
    failed, ok = (attrs(w) for w in network_waits(captured, op))
    assert failed["http.response.status_code"] == 429
    assert failed["error.type"] == "rate_limit_exceeded"  # the code of the fake's 429 body
    assert failed["http.request.resend_count"] == 0
    assert ok["http.response.status_code"] == 200 and "error.type" not in ok
    assert ok["http.request.resend_count"] == 1
    (backoff,) = _backoffs(captured)
    assert backoff["openai_latency.retry.reason"] == "rate_limit_exceeded"
    assert backoff["openai_latency.retry.delay_source"] == source
    measured = backoff["openai_latency.retry.delay"]
    assert isinstance(measured, float)
    if delay is not None:
        assert measured == pytest.approx(delay)
    else:  # the SDK's jittered exponential backoff: 0.5 s * (1 - 0.25 * random)
        assert 0.375 <= measured <= 0.5
    backoff_span = next(s for s in captured.phases(op) if s.name == "openai.retry_backoff")
    assert duration_ns(backoff_span) >= measured * 1e9
    assert attr(op, "http.request.resend_count") == 1
    assert attr(op, "openai_latency.attempts") == 2


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_connection_errors_are_failed_attempts(
    instrument: Callable[..., Captured], is_async: bool
) -> None:
    captured = instrument()
    client = network.client(f"http://127.0.0.1:{_closed_port()}/v1", is_async, max_retries=1)
    with pytest.raises(openai.APIConnectionError):
        result = client.chat.completions.create(model="m", messages=MESSAGES)
        if is_async:
            await result
    op = captured.operation()
    assert captured.phase_names(op) == [
        "openai.request_build",
        "openai.network_wait",
        "openai.retry_backoff",
        "openai.request_build",
        "openai.network_wait",
    ]
    lib = network.http_lib().__name__
    for index, wait in enumerate(network_waits(captured, op)):
        assert attr(wait, "error.type") == f"{lib}.ConnectError"
        assert attr(wait, "http.request.resend_count") == index
        assert "http.response.status_code" not in attrs(wait)
        subs = network.sub_phases(captured, wait)
        assert list(subs) == ["http.pool_wait", "http.connect"]  # connect_tcp.failed ends it
    (backoff,) = _backoffs(captured)
    assert backoff["openai_latency.retry.reason"] == f"{lib}.ConnectError"
    assert backoff["openai_latency.retry.delay_source"] == "backoff"
    assert attr(op, "openai_latency.error.category") == "connection"
    assert attr(op, "openai_latency.attempts") == 2


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_timeouts_are_failed_attempts(
    instrument: Callable[..., Captured], server: FakeServer, is_async: bool
) -> None:
    captured = instrument()
    client = network.client(server.base_url, is_async, max_retries=1, timeout=0.1)
    with pytest.raises(openai.APITimeoutError):
        result = client.chat.completions.create(
            model="m", messages=MESSAGES, extra_headers={"x-fake-delay-ms": "400"}
        )
        if is_async:
            await result
    op = captured.operation()
    lib = network.http_lib().__name__
    waits = network_waits(captured, op)
    assert len(waits) == 2
    for wait in waits:
        assert attr(wait, "error.type") == f"{lib}.ReadTimeout"
        assert duration_ns(wait) >= 0.1 * 1e9
        subs = network.sub_phases(captured, wait)
        assert list(subs)[-1] == "http.server_wait"  # it was waiting for the server when it gave up
    (backoff,) = _backoffs(captured)
    assert backoff["openai_latency.retry.reason"] == f"{lib}.ReadTimeout"
    assert attr(op, "openai_latency.error.category") == "timeout"

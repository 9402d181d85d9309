"""Response headers -> attributes: request id, processing time, network overhead, rate limits."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from openai_latency.fake_server import SpawnedServer
from openai_latency.read.headers import header_attributes
from tests.support import network
from tests.support.network import MESSAGES, attr, network_waits, sub_phases
from tests.support.span_checks import Captured, duration_ns

pytestmark = pytest.mark.usefixtures("detailed_spans")  # these tests read the http.* spans

RESETS = [("6m0s", 360.0), ("1.5s", 1.5), ("120ms", 0.12), ("1h2m3.5s", 3723.5), ("2", 2.0)]


@pytest.mark.parametrize(("raw", "seconds"), RESETS, ids=[r for r, _ in RESETS])
def test_headers_to_attributes(
    instrument: Callable[..., Captured], timing_server: SpawnedServer, raw: str, seconds: float
) -> None:
    captured = instrument()
    client = network.client(timing_server.base_url)
    client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        extra_headers={
            "x-fake-delay-ms": "100",
            "x-fake-processing-ms": "42",
            "x-fake-ratelimit-limit-requests": "500",
            "x-fake-ratelimit-limit-tokens": "200000",
            "x-fake-ratelimit-remaining-requests": "499",
            "x-fake-ratelimit-remaining-tokens": "199123",
            "x-fake-ratelimit-reset-requests": raw,
            "x-fake-ratelimit-reset-tokens": "6m0s",
        },
    )
    op = captured.operation()
    request_id = attr(op, "openai_latency.request_id")
    assert isinstance(request_id, str) and request_id.startswith("req_")
    assert timing_server.record(request_id).path == "/v1/chat/completions"
    assert attr(op, "openai_latency.server.processing_time") == pytest.approx(0.042)
    server_wait = duration_ns(sub_phases(captured, network_waits(captured, op)[0])["http.server_wait"]) / 1e9
    assert attr(op, "openai_latency.network.overhead") == pytest.approx(server_wait - 0.042, abs=1e-6)
    assert attr(op, "openai_latency.ratelimit.limit_requests") == 500
    assert attr(op, "openai_latency.ratelimit.limit_tokens") == 200000
    assert attr(op, "openai_latency.ratelimit.remaining_requests") == 499
    assert attr(op, "openai_latency.ratelimit.remaining_tokens") == 199123
    assert attr(op, "openai_latency.ratelimit.reset_requests") == pytest.approx(seconds)
    assert attr(op, "openai_latency.ratelimit.reset_tokens") == pytest.approx(360.0)


def test_headers_of_the_final_attempt(
    instrument: Callable[..., Captured], timing_server: SpawnedServer
) -> None:
    captured = instrument()
    client = network.client(timing_server.base_url)
    client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        extra_headers={
            "x-fake-fail-attempts": "1",
            "x-fake-retry-after-ms": "10",
            "x-fake-processing-ms": "7",
        },
    )
    op = captured.operation()
    record = timing_server.record(attr(op, "openai_latency.request_id"))
    assert record.attempt == 1 and record.status == 200
    assert attr(op, "openai_latency.server.processing_time") == pytest.approx(0.007)


@pytest.mark.parametrize("module", ["httpx", "httpx2"])
def test_header_table_reads_httpx_headers_and_plain_mappings_alike(module: str) -> None:
    """The fast path (httpx's own lowercase header list) and the ``items()`` path give the same
    attributes; header names are case-insensitive; a value that does not parse gives no attribute.
    (Each SDK generation has one of the two HTTP clients: the other is skipped.)"""
    httpx = pytest.importorskip(module)
    sent = {
        "X-Request-ID": "req_1",
        "OpenAI-Processing-Ms": "250",
        "x-ratelimit-limit-requests": "500",
        "X-RateLimit-Remaining-Tokens": "not-a-number",
        "x-ratelimit-reset-tokens": "1m30s",
        "x-ratelimit-reset-requests": "soon",
        "x-request-id-extra": "ignored",
    }
    expected = {
        "openai_latency.request_id": "req_1",
        "openai_latency.server.processing_time": 0.25,
        "openai_latency.ratelimit.limit_requests": 500,
        "openai_latency.ratelimit.reset_tokens": 90.0,
    }
    assert header_attributes(httpx.Headers(sent)) == expected
    assert header_attributes(sent) == expected
    assert header_attributes({"x-request-id": ""}) == {}
    assert header_attributes(None) == {}

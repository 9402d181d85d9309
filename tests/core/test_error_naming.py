"""Every failed attempt named by the provider's code: retried attempts, the final one, the retry metric.

The provider's code tells "wait" (``rate_limit_exceeded``) from "pay" (``insufficient_quota``), both
HTTP 429. A retried non-stream attempt's body is already in memory (the HTTP client read it before
the SDK saw the status), so its code is read from there; a retried *stream* attempt's body is never
read (the SDK closes it unread, and so do we), so its ``error.type`` stays the status.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry.sdk.metrics.export import NumberDataPoint

from openai_latency.fake_server import FakeServer
from tests.support import network
from tests.support.network import MESSAGES, network_waits
from tests.support.otel_capture import Full
from tests.support.span_checks import attrs

CALL_STYLES = [(False, False), (False, True), (True, False), (True, True)]
STYLE_IDS = ["sync", "sync-stream", "async", "async-stream"]


async def _call(client: Any, is_async: bool, stream: bool, headers: dict[str, str]) -> None:
    result = client.chat.completions.create(
        model="m", messages=MESSAGES, stream=stream, extra_headers=headers
    )
    if is_async:
        result = await result
        if stream:
            [chunk async for chunk in result]
    elif stream:
        list(result)


def _retry_points(cap: Full) -> dict[str, int]:
    metric = cap.metrics().get("openai_latency.retries")
    out: dict[str, int] = {}
    for point in metric.data.data_points if metric else ():
        assert isinstance(point, NumberDataPoint)
        out[str(point.attributes["error.type"])] = int(point.value)
    return out


@pytest.mark.parametrize(("is_async", "stream"), CALL_STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize("code", ["rate_limit_exceeded", "insufficient_quota"])
async def test_retried_attempt_carries_the_providers_code(
    full: Callable[..., Full], server: FakeServer, is_async: bool, stream: bool, code: str
) -> None:
    cap = full()
    client = network.client(server.base_url, is_async, max_retries=1)
    script = {"x-fake-fail-attempts": "1", "x-fake-fail-error": code, "x-fake-retry-after-ms": "1"}
    await _call(client, is_async, stream, script)
    op = cap.captured.operation()
    retried, final = (attrs(w) for w in network_waits(cap.captured, op))
    expected = "429" if stream else code  # a streamed error body is left unread (module docstring)
    assert retried["http.response.status_code"] == 429
    assert retried["error.type"] == expected
    assert "error.type" not in final and final["http.response.status_code"] == 200
    (backoff,) = [attrs(s) for s in cap.captured.phases(op) if s.name == "openai.retry_backoff"]
    assert backoff["openai_latency.retry.reason"] == expected
    assert _retry_points(cap) == {expected: 1}
    assert "error.type" not in attrs(op)
    # the operation says why each retry was taken (what triage calls "rate limited")
    assert tuple(attrs(op)["openai_latency.retry.error_types"]) == (expected,)


@pytest.mark.parametrize(("is_async", "stream"), CALL_STYLES, ids=STYLE_IDS)
@pytest.mark.parametrize(
    ("script", "error_type"),
    [
        ({"x-fake-error": "insufficient_quota"}, "insufficient_quota"),
        ({"x-fake-error": "server_error"}, "server_error"),
        ({"x-fake-status": "418"}, "418"),  # an error body without a code: the status
    ],
    ids=["insufficient_quota", "server_error", "no-code"],
)
async def test_final_attempt_has_the_operations_error_type(
    full: Callable[..., Full],
    server: FakeServer,
    is_async: bool,
    stream: bool,
    script: dict[str, str],
    error_type: str,
) -> None:
    """Retries exhausted: every attempt failed the same way; the last one is named like the call."""
    cap = full()
    client = network.client(server.base_url, is_async, max_retries=1)
    with pytest.raises(openai.APIStatusError):
        await _call(client, is_async, stream, {**script, "x-fake-retry-after-ms": "1"})
    op = cap.captured.operation()
    assert attrs(op)["error.type"] == error_type
    waits = [attrs(w) for w in network_waits(cap.captured, op)]
    retried_status = str(waits[0]["http.response.status_code"])
    retried_as = retried_status if stream else error_type
    if waits[0]["http.response.status_code"] == 418:  # the SDK does not retry a 418
        assert len(waits) == 1
        retried_as = None
    else:
        assert waits[0]["error.type"] == retried_as
    assert waits[-1]["error.type"] == error_type
    assert _retry_points(cap) == ({} if retried_as is None else {retried_as: 1})

"""The httpcore ``trace`` callback: chained to the user's, the right kind per client (issue 3)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from openai_latency.fake_server import FakeServer
from tests.support import network
from tests.support.network import MESSAGES, network_waits, sub_phases
from tests.support.span_checks import Captured

EXPECTED_EVENTS = [
    "connection.connect_tcp.started",
    "connection.connect_tcp.complete",
    "http11.send_request_headers.started",
    "http11.send_request_headers.complete",
    "http11.send_request_body.started",
    "http11.send_request_body.complete",
    "http11.receive_response_headers.started",
    "http11.receive_response_headers.complete",
    "http11.receive_response_body.started",
    "http11.receive_response_body.complete",
    "http11.response_closed.started",
    "http11.response_closed.complete",
]


def _user_client(is_async: bool, events: list[str], kinds: list[bool]) -> Any:
    """An http client whose requests carry the user's own trace callback (set in build_request,
    which the SDK calls before sending), and whose transport reports what kind of callback
    reached it (coroutine function or not)."""
    lib = network.http_lib()

    def sync_trace(name: str, info: Any) -> None:
        events.append(name)

    async def async_trace(name: str, info: Any) -> None:
        events.append(name)

    user_trace = async_trace if is_async else sync_trace

    class Transport(lib.AsyncHTTPTransport if is_async else lib.HTTPTransport):  # type: ignore[misc]
        def handle_request(self, request: Any) -> Any:
            kinds.append(inspect.iscoroutinefunction(request.extensions.get("trace")))
            return super().handle_request(request)

        async def handle_async_request(self, request: Any) -> Any:
            kinds.append(inspect.iscoroutinefunction(request.extensions.get("trace")))
            return await super().handle_async_request(request)

    class Client(lib.AsyncClient if is_async else lib.Client):  # type: ignore[misc]
        def build_request(self, *args: Any, **kwargs: Any) -> Any:
            request = super().build_request(*args, **kwargs)
            request.extensions["trace"] = user_trace
            return request

    return Client(transport=Transport(), follow_redirects=True)


@pytest.mark.parametrize("phase_spans", ["detailed", "phases", "off"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_user_trace_callback_keeps_every_event(
    instrument: Callable[..., Captured], server: FakeServer, is_async: bool, phase_spans: str
) -> None:
    captured = instrument(phase_spans=phase_spans)
    events: list[str] = []
    kinds: list[bool] = []
    client = network.client(server.base_url, is_async, http_client=_user_client(is_async, events, kinds))
    result = client.chat.completions.create(model="m", messages=MESSAGES)
    if is_async:
        await result
    assert events == EXPECTED_EVENTS
    assert kinds == [is_async]  # an async client never gets a sync callback, nor the reverse
    op = captured.operation()
    assert network.attr(op, "openai_latency.connection.reused") is False  # ours saw the events too
    if phase_spans == "detailed":
        subs = sub_phases(captured, network_waits(captured, op)[0])
        assert list(subs) == ["http.pool_wait", "http.connect", "http.send", "http.server_wait"]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_callback_kind_matches_the_client_without_a_user_callback(
    instrument: Callable[..., Captured], server: FakeServer, is_async: bool
) -> None:
    instrument()
    lib = network.http_lib()
    kinds: list[bool] = []
    requests: list[Any] = []

    class Transport(lib.AsyncHTTPTransport if is_async else lib.HTTPTransport):  # type: ignore[misc]
        def handle_request(self, request: Any) -> Any:
            kinds.append(inspect.iscoroutinefunction(request.extensions.get("trace")))
            requests.append(request)
            return super().handle_request(request)

        async def handle_async_request(self, request: Any) -> Any:
            kinds.append(inspect.iscoroutinefunction(request.extensions.get("trace")))
            requests.append(request)
            return await super().handle_async_request(request)

    http = (lib.AsyncClient if is_async else lib.Client)(transport=Transport())
    client = network.client(server.base_url, is_async, http_client=http)
    for stream in (False, True):
        result = client.chat.completions.create(model="m", messages=MESSAGES, stream=stream)
        if is_async:
            result = await result
            if stream:
                async for _ in result:
                    pass
        elif stream:
            for _ in result:
                pass
    assert kinds == [is_async, is_async]
    # after the response headers ours stepped out: httpcore skips the body and close events
    assert [request.extensions.get("trace") for request in requests] == [None, None]


def test_a_failing_user_callback_fails_like_without_us(
    instrument: Callable[..., Captured], server: FakeServer
) -> None:
    """Our callback never raises; the user's own exception is theirs and passes through unchanged."""
    instrument()
    lib = network.http_lib()
    boom = RuntimeError("user trace callback")

    def user_trace(name: str, info: Any) -> None:
        raise boom

    class Client(lib.Client):  # type: ignore[misc,name-defined]
        def build_request(self, *args: Any, **kwargs: Any) -> Any:
            request = super().build_request(*args, **kwargs)
            request.extensions["trace"] = user_trace
            return request

    client = network.client(server.base_url, http_client=Client(), max_retries=0)
    with pytest.raises(Exception) as info:
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert info.value is boom or info.value.__cause__ is boom or info.value.__context__ is boom

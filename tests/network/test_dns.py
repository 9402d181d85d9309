"""OPENAI_LATENCY_TRACE_DNS=true: http.dns apart from http.connect (issue 3)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from openai_latency.fake_server import FakeServer
from tests.support import network
from tests.support.network import MESSAGES, network_waits, sub_phases
from tests.support.span_checks import (
    MS,
    Captured,
    assert_close_ns,
    assert_tiles,
    duration_ns,
    end_mono,
    start_mono,
)

pytestmark = pytest.mark.usefixtures("detailed_spans")  # these tests read the http.* spans

SLOW_S = 0.100


@pytest.fixture
def slow_resolver(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """``socket.getaddrinfo`` that takes 100 ms more (IPv4 answers only: the server listens there).

    Sync transports call it directly; asyncio runs it in an executor for anyio. Returns the
    (start, end) perf_counter_ns of each slowed lookup.
    """
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


async def _two_calls(server: FakeServer, is_async: bool) -> None:
    client = network.client(f"http://localhost:{server.port}/v1", is_async)
    for _ in range(2):
        result = client.chat.completions.create(model="m", messages=MESSAGES)
        if is_async:
            await result


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_dns_split_from_connect(
    instrument: Callable[..., Captured],
    server: FakeServer,
    slow_resolver: list[tuple[int, int]],
    monkeypatch: pytest.MonkeyPatch,
    is_async: bool,
) -> None:
    monkeypatch.setenv("OPENAI_LATENCY_TRACE_DNS", "true")
    captured = instrument()
    await _two_calls(server, is_async)
    first, second = captured.operations()
    wait = network_waits(captured, first)[0]
    subs = sub_phases(captured, wait)
    assert list(subs) == ["http.pool_wait", "http.dns", "http.connect", "http.send", "http.server_wait"]
    dns, connect = subs["http.dns"], subs["http.connect"]
    ((resolve_start, resolve_end),) = slow_resolver
    # http.dns holds the whole lookup, http.connect none of it
    assert start_mono(dns) <= resolve_start and resolve_end <= end_mono(dns) <= start_mono(connect)
    assert duration_ns(dns) >= SLOW_S * 1e9
    if is_async:  # + asyncio's hop to its resolver thread and back (a few ms on a loaded machine)
        assert duration_ns(dns) - (resolve_end - resolve_start) < 20 * MS
    else:
        assert_close_ns(duration_ns(dns), resolve_end - resolve_start, "http.dns vs the resolver's own time")
    assert duration_ns(connect) < 20 * MS, "http.connect still includes the lookup"
    assert_tiles(wait, list(subs.values()))
    # a reused connection resolves nothing
    assert "http.dns" not in sub_phases(captured, network_waits(captured, second)[0])


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_without_trace_dns_connect_includes_the_lookup(
    instrument: Callable[..., Captured],
    server: FakeServer,
    slow_resolver: list[tuple[int, int]],
    is_async: bool,
) -> None:
    captured = instrument()
    await _two_calls(server, is_async)
    subs = sub_phases(captured, network_waits(captured, captured.operations()[0])[0])
    assert "http.dns" not in subs
    assert duration_ns(subs["http.connect"]) >= SLOW_S * 1e9


def test_resolvers_wrapped_only_while_instrumented(instrument: Callable[..., Captured]) -> None:
    import anyio._core._sockets as anyio_sockets

    real_sync, real_async = socket.getaddrinfo, anyio_sockets.getaddrinfo
    instrument(trace_dns=True)
    assert socket.getaddrinfo is not real_sync and anyio_sockets.getaddrinfo is not real_async
    assert socket.getaddrinfo("127.0.0.1", 80)  # outside any SDK call: passes straight through
    instrument(trace_dns=False)  # the fixture uninstruments first
    assert socket.getaddrinfo is real_sync and anyio_sockets.getaddrinfo is real_async

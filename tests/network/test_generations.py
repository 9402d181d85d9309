"""Every SDK generation: what is hooked where, and a user-supplied legacy httpx client on openai 3."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import openai
import pytest

from openai_latency import OpenAILatencyInstrumentor, instrumentor
from openai_latency.fake_server import FakeServer
from openai_latency.hooks import legacy_send
from openai_latency.hooks.sdk_hooks import Hooks
from openai_latency.websocket import hooks as websocket_hooks
from tests.support import network
from tests.support.network import MESSAGES, OPENAI_MAJOR, network_waits, sub_phases
from tests.support.span_checks import Captured

VERSION = tuple(int(part) for part in openai.__version__.split(".")[:2])


def _absent_or_inherited(module_name: str, path: str) -> bool:
    """The WebSocket table names targets of every generation: a class this SDK lacks (or its
    module), a method it inherits from a base class that has its own entry in the table, or openai
    1.x's Realtime manager, which connects without ``_connect_ws`` (no handshake span there; the
    arrival stamps start at the first parsed message: README, "WebSocket transports")."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return True
    class_name, method = path.split(".")
    owner = getattr(module, class_name, None)
    if owner is not None and method == "_connect_ws" and openai.__version__.startswith("1."):
        return True
    return owner is None or hasattr(owner, method)


def test_every_hook_target_exists_in_this_sdk() -> None:
    """Nothing is silently skipped: each target resolves, except ``_send_request`` before 2.31,
    which the httpx ``send`` fallback replaces."""
    hooks = Hooks.__new__(Hooks)
    websocket = {(m, p) for m, p, _ in websocket_hooks.patch_table(websocket_hooks.WsHooks(None))}
    missing = []
    for module, path, _ in instrumentor._patch_table(hooks):  # type: ignore[arg-type]
        if instrumentor._resolve_owner(module, path) is None:
            if (module, path) in websocket and _absent_or_inherited(module, path):
                continue  # an SDK before that transport, or openai 3's close, wrapped on its base class
            missing.append(path)
    base = importlib.import_module("openai._base_client")
    if VERSION < (2, 31):
        assert missing == ["SyncAPIClient._send_request", "AsyncAPIClient._send_request"]
        assert legacy_send.needed(base)
    else:
        assert missing == []
        assert not legacy_send.needed(base)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_user_supplied_legacy_httpx_client(
    instrument: Callable[..., Captured], server: FakeServer, detailed_spans: None, is_async: bool
) -> None:
    httpx = pytest.importorskip("httpx")
    captured = instrument()
    http = httpx.AsyncClient() if is_async else httpx.Client()
    client = network.client(server.base_url, is_async, http_client=http, max_retries=2)
    headers = {"x-fake-fail-attempts": "1", "x-fake-retry-after-ms": "10", "x-fake-delay-ms": "20"}
    for stream in (False, True):
        result = client.chat.completions.create(
            model="m", messages=MESSAGES, stream=stream, extra_headers=headers
        )
        if is_async:
            result = await result
            if stream:
                async for _ in result:
                    pass
        elif stream:
            for _ in result:
                pass
    plain, streamed = captured.operations()
    assert captured.phase_names(streamed)[-2:] == ["openai.first_token", "openai.stream_drain"]
    for op in (plain, streamed):
        waits = network_waits(captured, op)
        assert [network.attr(w, "http.response.status_code") for w in waits] == [429, 200]
        subs = sub_phases(captured, waits[-1])
        assert list(subs)[-2:] == ["http.send", "http.server_wait"]
        assert network.attr(op, "openai_latency.attempts") == 2


def test_legacy_send_fallback_is_symmetric(instrument: Callable[..., Captured]) -> None:
    """openai < 2.31: httpx's ``send`` is wrapped while instrumented, and only then."""
    if VERSION >= (2, 31):
        pytest.skip("this SDK has _send_request; httpx's send is left alone")
    import httpx

    instrument()
    assert hasattr(httpx.Client.__dict__["send"], "__wrapped__")
    assert hasattr(httpx.AsyncClient.__dict__["send"], "__wrapped__")
    OpenAILatencyInstrumentor().uninstrument()  # the instrumentor is a singleton
    assert not hasattr(httpx.Client.__dict__["send"], "__wrapped__")
    assert not hasattr(httpx.AsyncClient.__dict__["send"], "__wrapped__")


def test_openai3_does_not_import_legacy_httpx() -> None:
    if OPENAI_MAJOR < 3 or network.legacy_mode():
        pytest.skip("openai < 3 sends with httpx itself / the legacy leg imports it on purpose")
    import subprocess
    import sys

    code = (
        "import sys, openai, openai_latency; openai_latency.OpenAILatencyInstrumentor().instrument(); "
        "print('httpx' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"

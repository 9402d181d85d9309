"""Helpers of the network tests: the HTTP library the installed SDK sends with, clients, TLS."""

from __future__ import annotations

import importlib
import os
import ssl
from types import ModuleType
from typing import Any

import openai
from opentelemetry.sdk.trace import ReadableSpan

from tests.support.span_checks import Captured, attrs

OPENAI_MAJOR = int(openai.__version__.split(".", 1)[0])
LEGACY_ENV = "OPENAI_LATENCY_TEST_LEGACY_HTTPX"
MESSAGES = [{"role": "user", "content": "hi"}]


def legacy_mode() -> bool:
    """The matrix leg that gives every client a legacy ``httpx`` client on openai 3."""
    return os.environ.get(LEGACY_ENV) == "1"


def http_lib() -> ModuleType:
    """``httpx2`` on openai 3 (unless the legacy leg runs), else ``httpx``: what the SDK sends with."""
    name = "httpx2" if OPENAI_MAJOR >= 3 and not legacy_mode() else "httpx"
    return importlib.import_module(name)


def http_client(is_async: bool = False, **kwargs: Any) -> Any:
    """A client of :func:`http_lib` with the SDK's defaults (``follow_redirects``)."""
    lib = http_lib()
    kwargs.setdefault("follow_redirects", True)
    return (lib.AsyncClient if is_async else lib.Client)(**kwargs)


def client(base_url: str, is_async: bool = False, **kwargs: Any) -> Any:
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    kwargs.setdefault("api_key", "sk-test")
    return cls(base_url=base_url, **kwargs)


def tls_contexts(
    hostnames: tuple[str, ...] = ("127.0.0.1", "localhost"),
) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context) from a throwaway CA made now with ``trustme``."""
    import trustme

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*hostnames).configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    return server_ctx, client_ctx


def network_waits(captured: Captured, op: ReadableSpan | None = None) -> list[ReadableSpan]:
    return [s for s in captured.phases(op) if s.name == "openai.network_wait"]


def sub_phases(captured: Captured, network_wait: ReadableSpan) -> dict[str, ReadableSpan]:
    children = captured.children(network_wait)
    names = [s.name for s in children]
    assert len(names) == len(set(names)), names
    return {s.name: s for s in children}


def sub_phase_ns(captured: Captured, network_wait: ReadableSpan) -> dict[str, int]:
    """The http.* sub-phase durations of a network_wait, ns by name (``http.send``...): its child
    spans with ``phase_spans=detailed``, its ``openai_latency.http.*`` attributes with ``phases``."""
    children = captured.children(network_wait)
    if children:
        return {s.name: s.end_time - s.start_time for s in children if s.end_time and s.start_time}  # type: ignore[operator]
    prefix = "openai_latency.http."
    return {
        key.removeprefix("openai_latency."): round(float(value) * 1e9)
        for key, value in attrs(network_wait).items()
        if key.startswith(prefix) and key != prefix + "failed"
    }


def attr(span: ReadableSpan, key: str) -> Any:
    return attrs(span).get(key)

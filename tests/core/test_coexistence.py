"""Next to other instrumentations: ``opentelemetry-instrumentation-httpx`` and the official
``opentelemetry-instrumentation-genai-openai``.

- httpx's HTTP client spans nest under the ``openai.network_wait`` of their attempt (openai 1.x/2.x,
  and openai 3 given a legacy ``httpx`` client: the legs that send with ``httpx``).
- With the official OpenAI instrumentation enabled too, in either order: the caller gets what it gets
  without either, both produce their spans in one trace, and no context leaks out of a call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.fake_server import FakeServer
from tests.support import network
from tests.support.network import MESSAGES
from tests.support.span_checks import attrs

OURS = "openai_latency"


def _scope(span: ReadableSpan) -> str:
    return span.instrumentation_scope.name if span.instrumentation_scope else ""


@pytest.fixture
def httpx_instrumented(tracer_provider: TracerProvider) -> Iterator[Any]:
    httpx = pytest.importorskip("httpx", reason="this leg sends with httpx2 only")
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        yield httpx
    finally:
        instrumentor.uninstrument()


def _legacy_client(httpx: Any, base_url: str, is_async: bool, **kwargs: Any) -> Any:
    """An SDK client that sends with legacy httpx (on openai < 3 it does anyway)."""
    if network.OPENAI_MAJOR >= 3:
        kwargs["http_client"] = (httpx.AsyncClient if is_async else httpx.Client)(follow_redirects=True)
    return network.client(base_url, is_async, **kwargs)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_httpx_spans_nest_under_network_wait(
    httpx_instrumented: Any,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    server: FakeServer,
    is_async: bool,
) -> None:
    ours = OpenAILatencyInstrumentor()
    ours.instrument(tracer_provider=tracer_provider)
    span_exporter.clear()
    try:
        client = _legacy_client(httpx_instrumented, server.base_url, is_async, max_retries=1)
        script = {"x-fake-fail-attempts": "1", "x-fake-retry-after-ms": "1"}  # two attempts
        call = client.chat.completions.create(model="m", messages=MESSAGES, extra_headers=script)
        if is_async:
            asyncio.run(call)
    finally:
        ours.uninstrument()
    spans = span_exporter.get_finished_spans()
    span_exporter.clear()
    by_id = {s.context.span_id: s for s in spans}
    http_spans = [s for s in spans if _scope(s).startswith("opentelemetry.instrumentation.httpx")]
    waits = [s for s in spans if s.name == "openai.network_wait"]
    assert len(waits) == 2 and len(http_spans) == 2, [(s.name, _scope(s)) for s in spans]
    parents = [by_id[s.parent.span_id] for s in http_spans if s.parent is not None]
    assert sorted(p.context.span_id for p in parents) == sorted(w.context.span_id for w in waits)
    statuses = sorted(
        attrs(s).get("http.response.status_code", attrs(s).get("http.status_code")) for s in http_spans
    )
    assert statuses == [200, 429]


# --- the official OpenAI instrumentation --------------------------------------------------------


def _norm(item: Any) -> Any:
    data = item.model_dump(warnings=False)
    data.pop("id", None)
    return data


async def _calls(server: FakeServer) -> list[Any]:
    out: list[Any] = []
    sync_client = network.client(server.base_url, max_retries=0)
    async_client = network.client(server.base_url, is_async=True, max_retries=0)
    for stream in (False, True):
        result = sync_client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=stream)
        out.append([_norm(c) for c in result] if stream else _norm(result))
        assert trace.get_current_span() is trace.INVALID_SPAN
        result = await async_client.chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=stream
        )
        out.append([_norm(c) async for c in result] if stream else _norm(result))
        assert trace.get_current_span() is trace.INVALID_SPAN
    out.append(_norm(sync_client.embeddings.create(model="text-embedding-3-small", input="hi")))
    await async_client.close()
    return out


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-first", "official-first"])
async def test_with_the_official_openai_instrumentation(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter, server: FakeServer, ours_first: bool
) -> None:
    official_module = pytest.importorskip("opentelemetry.instrumentation.genai.openai")
    baseline = await _calls(server)
    ours, official = OpenAILatencyInstrumentor(), official_module.OpenAIInstrumentor()
    order = [ours, official] if ours_first else [official, ours]
    for instrumentor in order:
        instrumentor.instrument(tracer_provider=tracer_provider, skip_dep_check=True)
    span_exporter.clear()
    try:
        got = await _calls(server)
    finally:
        for instrumentor in reversed(order):
            instrumentor.uninstrument()
    spans = span_exporter.get_finished_spans()
    span_exporter.clear()
    assert got == baseline

    by_id = {s.context.span_id: s for s in spans}
    our_ops = [s for s in spans if _scope(s) == OURS and "openai_latency.phase" not in attrs(s)]
    theirs = [s for s in spans if _scope(s) != OURS]
    assert len(our_ops) == 5 and len(theirs) == 5, [(s.name, _scope(s)) for s in spans]
    # one trace per call: the instrumentation that wrapped last is the outer one, its span the root
    for op in our_ops:
        partner = [s for s in theirs if s.context.trace_id == op.context.trace_id]
        assert len(partner) == 1
        (other,) = partner
        inner, outer = (op, other) if ours_first else (other, op)
        assert outer.parent is None and inner.parent is not None
        assert inner.parent.span_id == outer.context.span_id
        phases = [s for s in spans if s.parent is not None and s.parent.span_id == op.context.span_id]
        assert "openai.network_wait" in {p.name for p in phases}
    assert all(s.parent is None or s.parent.span_id in by_id for s in spans)  # no dangling parent

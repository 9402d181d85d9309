"""The example backend keeps FastAPI's per-message ASGI spans out of the trace.

FastAPI's instrumentation (ASGI middleware) records an ``http send`` span for every message the app
sends: a streamed ``/ask`` answer sends one per chunk. The example re-applies ``opentelemetry-instrument``'s
FastAPI instrumentation with ``exclude_spans=["receive", "send"]``; ``EXAMPLE_ASGI_MESSAGE_SPANS=true``
brings them back. Both backends run as users run them (``opentelemetry-instrument uvicorn ...``) and
export over OTLP to this test's receiver; a stream of many chunks goes through each.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

import pytest

from openai_latency.fake_server import SpawnedServer

from .conftest import BackendSpec, backend_env
from .otlp_receiver import OtlpReceiver, Span
from .processes import Backend
from .traces import Trace

CHUNKS = 12
SERVER_SPAN = "GET /ask"
CHAT, TOOL, QUERY = "chat gpt-4o-mini", "execute_tool search_documents", "SELECT documents"
# The ASGI middleware's per-message spans: "GET /ask http send", "GET /ask http receive"
ASGI_MESSAGE_SUFFIXES = (" http send", " http receive")

SPECS = {
    "default": BackendSpec("asgi-default", "http/protobuf", propagate=True),
    "message-spans": BackendSpec("asgi-message-spans", "http/protobuf", propagate=True),
}


def is_asgi_message_span(span: Span) -> bool:
    return span.name.endswith(ASGI_MESSAGE_SUFFIXES) or "asgi.event.type" in span.attributes


@pytest.fixture(scope="module")
def asgi_backends(
    receiver: OtlpReceiver, fake_llm: SpawnedServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Backend]]:
    logs = tmp_path_factory.mktemp("e2e-asgi")
    envs = {key: backend_env(spec, receiver, fake_llm) for key, spec in SPECS.items()}
    envs["message-spans"]["EXAMPLE_ASGI_MESSAGE_SPANS"] = "true"
    started: dict[str, Backend] = {}
    with ThreadPoolExecutor(max_workers=len(envs)) as pool:
        futures = {
            key: pool.submit(Backend, env, logs / f"{key}.log", startup_timeout=25.0)
            for key, env in envs.items()
        }
        errors = []
        for key, future in futures.items():
            try:
                started[key] = future.result()
            except BaseException as exc:
                errors.append(exc)
    try:
        if errors:
            raise errors[0]
        yield started
    finally:
        for backend in started.values():
            backend.stop()


def streamed_trace(backend: Backend, receiver: OtlpReceiver, service: str) -> Trace:
    """One /ask whose answer streams CHUNKS chunks, in a trace of the test's own; the whole trace
    once the server span (it ends last: every span of the request was exported before or with it)
    arrived."""
    trace_id = secrets.token_hex(16)
    fields = {"q": f"asgi {trace_id}", "model": "gpt-4o-mini", "stream": "true", "tool_ms": 1, "db_ms": 1}
    query = urlencode(fields)
    headers = {
        "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01",
        "x-fake-chunks": str(CHUNKS),
        "x-fake-chunk-delay-ms": "2",
    }
    status, body = backend.get(f"/ask?{query}", headers)
    assert status == 200, f"/ask answered {status}: {body[:300]!r}\n{backend.output()[-3000:]}"
    assert body.count(b"tok") == CHUNKS, body

    def probe() -> Trace | None:
        spans = [s for s in receiver.spans() if s.trace_id == trace_id and s.service == service]
        names = {s.name for s in spans}
        return Trace(trace_id, spans) if {SERVER_SPAN, "openai.stream_drain"} <= names else None

    try:
        return receiver.wait_for(f"trace {trace_id} from {service}", probe, 10.0)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\nbackend output:\n{backend.output()[-3000:]}") from None


def test_a_streamed_answer_makes_no_per_chunk_asgi_spans(
    asgi_backends: dict[str, Backend], receiver: OtlpReceiver
) -> None:
    trace = streamed_trace(asgi_backends["default"], receiver, SPECS["default"].service)
    server = trace.one(SERVER_SPAN, kind="SERVER")
    assert [s for s in trace.spans if is_asgi_message_span(s)] == [], trace.outline()
    # What is left: the server span, the turn's two LLM calls and their phases (and their http.*
    # sub-phases), its tool and its query
    children = sorted(trace.children(server), key=lambda s: s.start_ns)
    assert [s.name for s in children] == [CHAT, TOOL, QUERY, CHAT], trace.outline()
    for chat in (children[0], children[-1]):
        assert {s.name for s in trace.subtree(chat)} <= {
            CHAT,
            "openai.request_build",
            "openai.network_wait",
            "openai.response_read",  # the planning call is not streamed
            "openai.first_token",
            "openai.stream_drain",
            "http.pool_wait",
            "http.connect",
            "http.send",
            "http.server_wait",
        }, trace.outline()
    assert len(trace.spans) == len(trace.subtree(server)), trace.outline()
    print(f"default: {len(trace.spans)} spans for a stream of {CHUNKS} chunks")


def test_the_setting_brings_the_asgi_message_spans_back(
    asgi_backends: dict[str, Backend], receiver: OtlpReceiver
) -> None:
    """The same request with EXAMPLE_ASGI_MESSAGE_SPANS=true: one ``http send`` per chunk (and the
    response start and end), which the default's absence above would otherwise not prove."""
    trace = streamed_trace(asgi_backends["message-spans"], receiver, SPECS["message-spans"].service)
    sends = [s for s in trace.spans if s.name == f"{SERVER_SPAN} http send"]
    assert len(sends) >= CHUNKS, trace.outline()
    print(f"EXAMPLE_ASGI_MESSAGE_SPANS=true: {len(trace.spans)} spans, {len(sends)} of them http send")

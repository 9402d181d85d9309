"""End to end without Docker: the example backend under the real ``opentelemetry-instrument``.

The path of ``docker compose up`` minus the containers: the fake LLM server (subprocess), the
example FastAPI backend started as ``opentelemetry-instrument uvicorn examples.backend.app:app``
(FastAPI instrumentation + ours, loaded through the ``opentelemetry_instrumentor`` entry point) and
exporting with the SDK's own OTLP exporters, over gRPC for one backend and HTTP/protobuf for the
other, to a real OTLP receiver run by this test. Asserted on what came over the wire:

- one trace per ``/ask`` turn, rooted at the FastAPI server span, with the turn's two ``chat
  {model}`` operation spans below it (the planning call and the answer, the tool and the query
  between them) and each call's phase spans below that (``openai.network_wait`` with its
  ``http.*`` sub-phases), all under one trace id;
- the fake LLM server received a ``traceparent`` with that trace id whose parent is the call's
  ``chat ...`` span (or one of its descendants), once per attempt when the SDK retried;
- the metrics arrived too (OTLP metrics over the same protocol);
- with ``OPENAI_LATENCY_PROPAGATE=false`` the LLM server receives no trace context at all, while
  the spans are still exported (only FastAPI and openai-latency are enabled, so nothing else could
  have injected one).

The same path through the real Collector into Jaeger and Prometheus is tests/realstack (`make
stack-test`, which needs Go). This test stays for what only a receiver of its own sees: what each
OTLP protocol put on the wire and the trace context the LLM server received, and it keeps that
covered in `make test`, without Go.
"""

from __future__ import annotations

import secrets
import uuid
from urllib.parse import urlencode

import pytest

from openai_latency.fake_server import RequestRecord, SpawnedServer

from .conftest import PROTOCOLS, SPECS, BackendSpec
from .otlp_receiver import OtlpReceiver, Span
from .processes import Backend
from .traces import Trace, TraceParent

MODEL = "gpt-4o-mini"
CHAT = f"chat {MODEL}"
SERVER_SPAN = "GET /ask"
TRANSPORT = {"grpc": "grpc", "http/protobuf": "http"}
EXPORT_TIMEOUT = 10.0

TOOL, QUERY = "execute_tool search_documents", "SELECT documents"
PLAIN = ["request_build", "network_wait", "response_read"]
RETRIED = ["request_build", "network_wait", "retry_backoff", "request_build", "network_wait", "response_read"]

# (case, stream, extra request headers forwarded to the fake server (to both calls of the turn),
# expected phase sequences of the planning call and of the answer call)
CALLS: list[tuple[str, bool, dict[str, str], tuple[list[str], list[str]]]] = [
    ("stream", True, {}, (PLAIN, ["request_build", "network_wait", "first_token", "stream_drain"])),
    ("plain", False, {}, (PLAIN, PLAIN)),
    (
        "retried",
        False,
        {"x-fake-fail-attempts": "1", "x-fake-fail-status": "429", "x-fake-retry-after-ms": "20"},
        (RETRIED, RETRIED),
    ),
]


def ask(backend: Backend, question: str, stream: bool, headers: dict[str, str] | None = None) -> bytes:
    fields = {
        "q": question,
        "model": MODEL,
        "stream": "true" if stream else "false",
        "tool_ms": 5,
        "db_ms": 5,
    }
    query = urlencode(fields)
    status, body = backend.get(f"/ask?{query}", headers)
    assert status == 200, f"/ask answered HTTP {status}: {body[:500]!r}\n{backend.output()[-3000:]}"
    assert body, "/ask answered an empty body"
    return body


def records_for(fake: SpawnedServer, question: str) -> list[RequestRecord]:
    """The requests the fake LLM server received for one question (one per attempt of each call)."""

    def asked(record: RequestRecord) -> bool:
        messages = record.body.get("messages") if isinstance(record.body, dict) else None
        return any(m.get("role") == "user" and m.get("content") == question for m in messages or ())

    return sorted((r for r in fake.records() if asked(r)), key=lambda r: r.received_ns)


def received_trace(
    receiver: OtlpReceiver, backend: Backend, spec: BackendSpec, trace_id: str, last_phase: str
) -> Trace:
    """Waits until the trace is complete at the receiver: the server span (it ends last), both chat
    spans and the answer's last phase."""

    def probe() -> Trace | None:
        spans = [s for s in receiver.spans() if s.trace_id == trace_id]
        names = [s.name for s in spans]
        if {SERVER_SPAN, f"openai.{last_phase}"} <= set(names) and names.count(CHAT) == 2:
            return Trace(trace_id, spans)
        return None

    try:
        return receiver.wait_for(f"trace {trace_id} from {spec.service}", probe, EXPORT_TIMEOUT)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\nbackend output:\n{backend.output()[-3000:]}") from None


def check_trace(
    trace: Trace, spec: BackendSpec, fake: SpawnedServer, phases: tuple[list[str], list[str]]
) -> list[Span]:
    """The shape asserted for every turn; returns its two ``chat ...`` spans."""
    for span in trace.spans:
        assert span.service == spec.service, span
        assert span.transport == TRANSPORT[spec.protocol], f"{span.name} arrived over {span.transport}"

    server = trace.one(SERVER_SPAN, kind="SERVER")
    assert trace.roots() == [server], f"one root, the server span: {trace.outline()}"
    turn = sorted(trace.children(server), key=lambda s: s.start_ns)
    assert [s.name for s in turn] == [CHAT, TOOL, QUERY, CHAT], trace.outline()
    chats = [turn[0], turn[-1]]
    for chat, call_phases in zip(chats, phases, strict=True):
        check_call(trace, chat, fake, call_phases)
    return chats


def check_call(trace: Trace, chat: Span, fake: SpawnedServer, phases: list[str]) -> None:
    assert chat.kind == "CLIENT"
    assert chat.scope == "openai_latency"
    assert chat.attributes.get("gen_ai.operation.name") == "chat"
    assert chat.attributes.get("gen_ai.request.model") == MODEL
    assert chat.attributes.get("server.address") == "127.0.0.1"
    assert chat.attributes.get("server.port") == fake.port

    children = sorted(trace.children(chat), key=lambda s: s.start_ns)
    assert [s.name for s in children] == [f"openai.{p}" for p in phases], trace.outline()
    for phase, span in zip(phases, children, strict=True):
        assert span.attributes.get("openai_latency.phase") == phase, span
        assert chat.start_ns <= span.start_ns <= span.end_ns <= chat.end_ns, f"{span.name} outside {CHAT}"
    for wait in (s for s in children if s.name == "openai.network_wait"):
        subphases = [s.name for s in trace.children(wait)]
        assert subphases and all(n.startswith("http.") for n in subphases), subphases
        assert {"http.send", "http.server_wait"} <= set(subphases), subphases


def check_propagated(trace: Trace, chat: Span, records: list[RequestRecord]) -> None:
    """Every attempt carried a traceparent of this trace whose parent is the chat span or below."""
    below_chat = {s.span_id for s in trace.subtree(chat)}
    for record in records:
        assert "traceparent" in record.headers, f"no traceparent received: {sorted(record.headers)}"
        parent = TraceParent.parse(record.headers["traceparent"])
        assert parent.trace_id == trace.trace_id
        assert parent.parent_id in below_chat, (
            f"traceparent parent {parent.parent_id} is not {CHAT} or below: {trace.outline()}"
        )
        assert int(parent.flags, 16) & 1, "sampled flag not set"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_trace_exported_over_otlp_and_propagated(
    protocol: str, backends: dict[str, Backend], receiver: OtlpReceiver, fake_llm: SpawnedServer
) -> None:
    spec, backend = SPECS[protocol], backends[protocol]
    tag = uuid.uuid4().hex[:8]
    questions = {case: f"e2e {spec.key} {case} {tag}" for case, *_ in CALLS}
    for case, stream, headers, _ in CALLS:
        ask(backend, questions[case], stream, headers)

    trace_ids: set[str] = set()
    connects = 0
    for case, _stream, _headers, phases in CALLS:
        records = records_for(fake_llm, questions[case])
        attempts = [call.count("network_wait") for call in phases]
        assert len(records) == sum(attempts), f"{case}: {len(records)} requests received"
        assert "traceparent" in records[0].headers, f"{case}: no traceparent: {sorted(records[0].headers)}"
        trace_id = TraceParent.parse(records[0].headers["traceparent"]).trace_id
        trace = received_trace(receiver, backend, spec, trace_id, phases[-1][-1])
        chats = check_trace(trace, spec, fake_llm, phases)
        # the planning call's attempts first, then the answer's
        for chat, own in zip(chats, (records[: attempts[0]], records[attempts[0] :]), strict=True):
            check_propagated(trace, chat, own)
            waits = [s for s in trace.children(chat) if s.name == "openai.network_wait"]
            statuses = [w.attributes.get("http.response.status_code") for w in waits]
            assert statuses == [429] * (len(waits) - 1) + [200], f"{case}: attempt statuses {statuses}"
            connects += sum(1 for w in waits for s in trace.children(w) if s.name == "http.connect")
        trace_ids.add(trace_id)
    assert len(trace_ids) == len(CALLS), "each /ask turn is its own trace"
    # The backend shares one client: the first call opens the connection, the others reuse it.
    assert connects >= 1, "no http.connect sub-phase in any attempt"

    def metric_names() -> set[str] | None:
        names = {
            m.name
            for m in receiver.metrics()
            if m.service == spec.service and m.transport == TRANSPORT[protocol]
        }
        wanted = {"gen_ai.client.operation.duration", "openai_latency.phase.duration"}
        return names if wanted <= names else None

    receiver.wait_for(f"metrics from {spec.service}", metric_names, EXPORT_TIMEOUT)


def test_propagate_false_sends_no_trace_context(
    backends: dict[str, Backend], receiver: OtlpReceiver, fake_llm: SpawnedServer
) -> None:
    spec, backend = SPECS["no-propagate"], backends["no-propagate"]
    # The caller starts the trace: the backend continues it (FastAPI), so a trace context exists
    # in the process; with propagation off, none of it may reach the LLM server.
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    question = f"e2e {spec.key} {uuid.uuid4().hex[:8]}"
    ask(backend, question, stream=False, headers={"traceparent": f"00-{trace_id}-{caller_span}-01"})

    records = records_for(fake_llm, question)
    assert len(records) == 2  # the turn's two calls
    for record in records:
        headers = record.headers
        assert "traceparent" not in headers and "tracestate" not in headers, headers
        assert not [k for k, v in headers.items() if trace_id in v], f"trace id leaked in {headers}"

    # The instrumentation did run (so the missing header is the setting, not a missing hook).
    trace = received_trace(receiver, backend, spec, trace_id, "response_read")
    server = trace.one(SERVER_SPAN, kind="SERVER")
    assert server.parent_span_id == caller_span
    check_trace(trace, spec, fake_llm, (PLAIN, PLAIN))

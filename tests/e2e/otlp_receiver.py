"""A real OTLP receiver run inside the test: OTLP/gRPC (traces + metrics) and OTLP/HTTP (protobuf).

Both transports decode the standard ``Export*ServiceRequest`` messages of ``opentelemetry-proto``
and keep them, tagged with the transport they came in on, so a test can assert what an
application under ``opentelemetry-instrument`` really exported over the wire.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

T = TypeVar("T")

SPAN_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind)


def attributes(kvs: Iterator[KeyValue] | Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


@dataclass(frozen=True)
class Span:
    """One received span, flattened (ids as lower-case hex, like in a ``traceparent``)."""

    transport: str
    service: str
    scope: str
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    start_ns: int
    end_ns: int
    status_code: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Metric:
    transport: str
    service: str
    scope: str
    name: str


class OtlpReceiver:
    """Collects OTLP exports on a gRPC port and an HTTP port (both 127.0.0.1, free ports)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.trace_requests: list[tuple[str, trace_service_pb2.ExportTraceServiceRequest]] = []
        self.metric_requests: list[tuple[str, metrics_service_pb2.ExportMetricsServiceRequest]] = []
        self.http_errors: list[str] = []
        self._exports = 0
        self._grpc: grpc.Server | None = None
        self._http: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self.grpc_port = 0
        self.http_port = 0

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> OtlpReceiver:
        receiver = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                receiver._add_traces("grpc", request)
                return trace_service_pb2.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                receiver._add_metrics("grpc", request)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
        self.grpc_port = server.add_insecure_port("127.0.0.1:0")
        if not self.grpc_port:
            raise RuntimeError("the OTLP/gRPC receiver could not bind a port on 127.0.0.1")
        server.start()
        self._grpc = server

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._http.daemon_threads = True
        self.http_port = self._http.server_address[1]
        self._http_thread = threading.Thread(target=self._http.serve_forever, name="otlp-http", daemon=True)
        self._http_thread.start()
        return self

    def stop(self) -> None:
        if self._grpc is not None:
            self._grpc.stop(grace=None).wait(5)
            self._grpc = None
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._http_thread is not None:
            self._http_thread.join(5)
            self._http_thread = None

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def endpoint(self, protocol: str) -> str:
        """``OTEL_EXPORTER_OTLP_ENDPOINT`` for ``grpc`` or ``http/protobuf``."""
        port = self.grpc_port if protocol == "grpc" else self.http_port
        return f"http://127.0.0.1:{port}"

    # --- collecting -----------------------------------------------------------------------------

    def _add_traces(self, transport: str, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self._changed:
            self.trace_requests.append((transport, request))
            self._exports += 1
            self._changed.notify_all()

    def _add_metrics(self, transport: str, request: metrics_service_pb2.ExportMetricsServiceRequest) -> None:
        with self._changed:
            self.metric_requests.append((transport, request))
            self._exports += 1
            self._changed.notify_all()

    def trace_exports(self) -> list[trace_service_pb2.ExportTraceServiceRequest]:
        """Every trace export received so far, as it came (either transport)."""
        with self._lock:
            return [request for _, request in self.trace_requests]

    def spans(self) -> list[Span]:
        with self._lock:
            requests = list(self.trace_requests)
        out: list[Span] = []
        for transport, request in requests:
            for rs in request.resource_spans:
                service = str(attributes(rs.resource.attributes).get("service.name", ""))
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append(
                            Span(
                                transport=transport,
                                service=service,
                                scope=ss.scope.name,
                                trace_id=s.trace_id.hex(),
                                span_id=s.span_id.hex(),
                                parent_span_id=s.parent_span_id.hex(),
                                name=s.name,
                                kind=SPAN_KINDS.get(s.kind, str(s.kind)),
                                start_ns=s.start_time_unix_nano,
                                end_ns=s.end_time_unix_nano,
                                status_code=s.status.code,
                                attributes=attributes(s.attributes),
                            )
                        )
        return sorted(out, key=lambda s: s.start_ns)

    def metrics(self) -> list[Metric]:
        with self._lock:
            requests = list(self.metric_requests)
        return [
            Metric(
                transport,
                str(attributes(rm.resource.attributes).get("service.name", "")),
                sm.scope.name,
                m.name,
            )
            for transport, request in requests
            for rm in request.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        ]

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float = 10.0) -> T:
        """Block until ``probe()`` returns something truthy (re-checked on every export), or fail."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                seen = self._exports
            result = probe()
            if result:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"OTLP receiver: timed out after {timeout:.0f}s waiting for {what} "
                    f"({len(self.trace_requests)} trace exports, {len(self.metric_requests)} metric "
                    f"exports received; HTTP errors: {self.http_errors or 'none'})"
                )
            with self._changed:
                if self._exports == seen:
                    self._changed.wait(min(remaining, 0.5))


def _handler_for(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            encoding = (self.headers.get("content-encoding") or "").lower()
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            content_type = (self.headers.get("content-type") or "").split(";")[0].strip()
            if content_type != "application/x-protobuf":
                return self._fail(415, f"{self.path}: unsupported content-type {content_type!r}")
            try:
                if self.path == "/v1/traces":
                    receiver._add_traces("http", trace_service_pb2.ExportTraceServiceRequest.FromString(body))
                    reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    request = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
                    receiver._add_metrics("http", request)
                    reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
                else:
                    return self._fail(404, f"unknown path {self.path}")
            except DecodeError as exc:
                return self._fail(400, f"{self.path}: {exc}")
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def _fail(self, status: int, message: str) -> None:
            receiver.http_errors.append(message)
            data = message.encode()
            self.send_response(status)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler

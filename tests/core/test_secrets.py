"""No credential leaves the process: the bytes the real OTLP exporters send, and what the CLI prints.

Every credential a client can carry is set to a unique value (API key, organization, project, a custom
auth header, a query-string token, Azure's ``api-key``), calls of every kind run (JSON, stream,
embeddings, a failed call), with content capture off and on; the OTLP HTTP/protobuf exporters post
traces, metrics and logs to a capturing server on 127.0.0.1, and none of the values is in those bytes.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.cli import main as cli_main
from openai_latency.fake_server import FakeServer

MESSAGES = [{"role": "user", "content": "what is the weather"}]


def _secret(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"  # letters and digits: the same in any URL encoding


class _Capture(http.server.BaseHTTPRequestHandler):
    bodies: dict[str, list[bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        self.bodies.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _otlp_receiver() -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    bodies: dict[str, list[bytes]] = {}
    handler = type("Capture", (_Capture,), {"bodies": bodies})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _calls(server: FakeServer, creds: dict[str, str]) -> None:
    client = openai.OpenAI(
        base_url=server.base_url,
        api_key=creds["api_key"],
        organization=creds["organization"],
        project=creds["project"],
        default_headers={"X-Custom-Auth": creds["custom_header"]},
        default_query={"token": creds["query_token"]},
        max_retries=1,
    )
    client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    list(client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True))
    client.embeddings.create(model="text-embedding-3-small", input="hello")
    client.models.list()
    with pytest.raises(openai.RateLimitError):  # retried once, then raised: error paths export too
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=MESSAGES,
            extra_headers={"x-fake-error": "rate_limit_exceeded", "x-fake-retry-after-ms": "1"},
        )
    azure = openai.AzureOpenAI(
        azure_endpoint=server.origin, api_version="2024-10-21", api_key=creds["azure_api_key"], max_retries=0
    )
    azure.chat.completions.create(model="my-deployment", messages=MESSAGES)
    list(azure.chat.completions.create(model="my-deployment", messages=MESSAGES, stream=True))


@pytest.mark.parametrize("capture_content", ["no_content", "span_and_event"])
def test_exported_bytes_carry_no_credentials(
    server: FakeServer, tmp_path: Path, capture_content: str
) -> None:
    creds = {
        name: _secret(prefix)
        for name, prefix in (
            ("api_key", "sk-proj-"),
            ("organization", "org-"),
            ("project", "proj_"),
            ("custom_header", "custom-"),
            ("query_token", "qtoken"),
            ("azure_api_key", "azkey"),
        )
    }
    with _otlp_receiver() as (endpoint, bodies):
        none = Compression.NoCompression
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", compression=none))
        )
        meter_provider = MeterProvider(
            metric_readers=[
                PeriodicExportingMetricReader(
                    OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics", compression=none),
                    export_interval_millis=3_600_000,
                )
            ]
        )
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", compression=none))
        )
        instrumentor = OpenAILatencyInstrumentor()
        instrumentor.instrument(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=capture_content,
        )
        try:
            _calls(server, creds)
        finally:
            instrumentor.uninstrument()
            for provider in (tracer_provider, meter_provider, logger_provider):
                provider.force_flush()
                provider.shutdown()

    # the server did get what was meant to be protected: the scan below looks at the right traffic
    seen = [record.headers | record.query for record in server.records()]
    assert any(creds["organization"] in values.values() for values in seen)
    assert any(creds["query_token"] in values.values() for values in seen)

    traces, metrics = b"".join(bodies["/v1/traces"]), b"".join(bodies["/v1/metrics"])
    assert b"openai.network_wait" in traces and b"gen_ai.client.operation.duration" in metrics
    logs = b"".join(bodies.get("/v1/logs", []))
    if capture_content == "span_and_event":
        assert b"gen_ai.client.inference.operation.details" in logs or b"what is the weather" in logs
        assert b"what is the weather" in traces  # content capture really was on
    everything = traces + metrics + logs
    for name, value in creds.items():
        assert value.encode() not in everything, f"{name} was exported"

    # and what the CLI prints from these traces (report) holds none of them either
    exported = tmp_path / "traces.jsonl"
    with exported.open("w") as out:
        for body in bodies["/v1/traces"]:
            request = ExportTraceServiceRequest.FromString(body)
            out.write(json.dumps(MessageToDict(request)) + "\n")
    for args in ([str(exported)], [str(exported), "--format", "json", "--http"]):
        printed = _run_cli(["report", *args])
        assert "gpt-4o-mini" in printed  # it did read the exported calls
        for name, value in creds.items():
            assert value not in printed, f"{name} printed by report"


def _run_cli(argv: list[str]) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        assert cli_main(argv) == 0
    return buffer.getvalue()


# The demo's key (its client's, or the user's OPENAI_API_KEY) never shows in its output nor in the
# spans it writes: checked on the demo run of tests/cli/render/test_terminal.py (a demo takes ~13 s).

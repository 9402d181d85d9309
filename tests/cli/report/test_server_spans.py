"""The fake server's own ``llm_request`` span (``--export-spans``, vLLM's shape) and ``report --by trace``
joining it to the call: real SDK calls, instrumented, against the fake server in its own process; the
report's split of the call against the fake server's log (±3 ms), and what it says when the server
lost the ``traceparent``."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

from openai_latency.fake_server import FakeServer
from openai_latency.fake_server.records import RequestRecord
from tests.support.cli_runs import run_cli
from tests.support.loopback_http import LoopbackServer, send_json
from tests.support.otlp_files import write_jsonl
from tests.support.retry import retry_timing
from tests.support.span_checks import Captured

#: queue (delay-ms), prefill (ttft-ms), decode (5 chunks, 4 gaps of chunk-delay-ms)
SCRIPT = {
    "x-fake-delay-ms": "20",
    "x-fake-ttft-ms": "30",
    "x-fake-chunks": "5",
    "x-fake-chunk-delay-ms": "10",
}
TOLERANCE_S = 0.003


def _turn(
    instrument: Callable[..., Captured], provider: TracerProvider, tmp_path: Path, parent: str = "traceparent"
) -> tuple[dict[str, Any], RequestRecord, list[str], str]:
    """One turn (the app's span, one streamed call) against a spawned fake server exporting its spans
    to a file: the report's JSON, the server's record of the call, the server's span lines, the text."""
    captured = instrument()
    server_file = tmp_path / "server.jsonl"
    server_file.unlink(missing_ok=True)
    with FakeServer.spawn(export_spans=str(server_file)) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        with provider.get_tracer("app").start_as_current_span("agent turn", kind=SpanKind.SERVER):
            headers = {**SCRIPT, "x-fake-server-span-parent": parent}
            stream = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True, extra_headers=headers
            )
            for _ in stream:
                pass
        (record,) = server.records()
    # the child sends its spans as it goes; all of them once it has stopped
    lines = server_file.read_text().splitlines()
    client_file = write_jsonl(tmp_path / "client.jsonl", captured.spans())
    argv = ["report", str(client_file), str(server_file), "--by", "trace"]
    report = run_cli([*argv, "--format", "json"])
    assert report.code == 0, report.err
    text = run_cli(argv)
    assert text.code == 0, text.err
    return report.json(), record, lines, text.out


def _log_split(record: RequestRecord) -> dict[str, float]:
    assert record.headers_sent_ns and record.first_token_ns and record.last_token_ns
    return {
        "queue": (record.headers_sent_ns - record.received_ns) / 1e9,
        "prefill": (record.first_token_ns - record.headers_sent_ns) / 1e9,
        "decode": (record.last_token_ns - record.first_token_ns) / 1e9,
    }


def test_the_servers_span_splits_the_call_as_the_log_says(
    instrument: Callable[..., Captured], tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    def run() -> tuple[dict[str, Any], RequestRecord]:
        document, record, lines, text = _turn(instrument, tracer_provider, tmp_path)
        (span,) = [s for line in lines for r in json.loads(line)["resourceSpans"]
                   for ss in r["scopeSpans"] for s in ss["spans"]]  # fmt: skip
        assert span["name"] == "llm_request" and span["kind"] == 2
        keys = {attribute["key"] for attribute in span["attributes"]}
        assert {
            "gen_ai.latency.time_in_queue", "gen_ai.latency.time_to_first_token", "gen_ai.latency.e2e",
            "gen_ai.latency.time_in_model_prefill", "gen_ai.latency.time_in_model_decode",
            "gen_ai.latency.time_in_model_inference", "gen_ai.request.id",
        } <= keys  # fmt: skip
        (trace,) = document["traces"]
        (call,) = trace["calls"]
        assert call["server_status"] == "joined", call
        assert trace["detached_server_spans"] == 0
        split = call["server"]
        # the rest is the call's time the server does not account for (network and client)
        total = split["queue"] + split["prefill"] + split["decode"] + split["rest"]
        assert total == pytest.approx(call["duration"], abs=1e-6)
        # lower bounds hold at once: the scripted waits
        assert split["queue"] >= 0.020 - TOLERANCE_S and split["prefill"] >= 0.030 - TOLERANCE_S
        assert split["decode"] >= 0.040 - TOLERANCE_S and split["rest"] >= 0
        assert "server: queue" in text and "rest" in text
        return split, record

    def timing(result: tuple[dict[str, Any], RequestRecord]) -> None:
        split, record = result
        # the report against the server's own log; the script is a lower bound only (run()): a
        # loaded machine wakes the fake server's timers late, which moves its log, not our split
        for name, seconds in _log_split(record).items():
            assert split[name] == pytest.approx(seconds, abs=TOLERANCE_S), name

    retry_timing(run, timing)


@pytest.mark.parametrize(
    ("parent", "says"),
    [
        ("lost", "server span(s) (llm_request) in a trace of their own: the server did not continue"),
        ("stale", "1 server span(s) below no LLM call: the server dropped the traceparent"),
    ],
)
def test_the_report_says_when_the_join_fails(
    instrument: Callable[..., Captured],
    tracer_provider: TracerProvider,
    tmp_path: Path,
    parent: str,
    says: str,
) -> None:
    document, _, lines, text = _turn(instrument, tracer_provider, tmp_path, parent)
    assert len(lines) == 1
    app = [trace for trace in document["traces"] if trace["root"] == "agent turn"]
    (call,) = app[0]["calls"]
    assert call["server"] is None and call["server_status"] == "no_server_span"
    assert says in text, text
    assert "server's own span joined" not in text


class _Collector(LoopbackServer):
    """A stand-in of the collector's OTLP/HTTP receiver: keeps what it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.posts: list[tuple[str, str, bytes]] = []

    def handle(self, method: str, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        self.posts.append((request.path, request.headers.get("Content-Type") or "", body))
        send_json(request, 200, {})


def test_export_to_an_otlp_http_endpoint() -> None:
    """OTLP/HTTP JSON to ``/v1/traces`` of the URL given (a collector's endpoint)."""
    with _Collector() as collector, FakeServer(export_spans=f"http://127.0.0.1:{collector.port}") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        server.flush_spans()
        ((path, content_type, body),) = collector.posts
    assert path == "/v1/traces" and content_type == "application/json"
    (span,) = json.loads(body)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert span["name"] == "llm_request" and "parentSpanId" not in span  # no traceparent sent

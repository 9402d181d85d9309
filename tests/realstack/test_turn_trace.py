"""One turn end to end on the real stack: the app's spans, our calls and the inference server's own
spans in one trace in the real Jaeger, and ``report --jaeger ... --by trace`` splitting the turn and
each call by them.

The example backend's ``/ask`` under ``opentelemetry-instrument`` (FastAPI's server span, a planning
call, a tool, a SQLite query, the answer call: openai-latency's spans),
the fake LLM server exporting its own ``llm_request`` span as vLLM does (``--export-spans``, OTLP/HTTP
to the collector's receiver, service ``vllm``), collector/otelcol.yaml, Jaeger. The report's queue,
prefill and decode of each call are compared with the fake server's log (±3 ms), the tool's and the
query's time with what /ask was asked for, and an ``/ask`` whose server lost the ``traceparent``
(``server-span-parent: lost``) gets no split and a note saying why.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openai_latency.fake_server.records import RequestRecord
from tests.e2e.processes import free_port, http_get

from .apis import JaegerApi, Trace, get_json
from .components import Binaries, compose_service, start_backend, start_traces
from .procs import Stack, http_ok, wait_until

SERVICE = "example-backend"
#: queue (delay-ms), prefill (ttft-ms), decode (8 chunks, 7 gaps of chunk-delay-ms)
SCRIPT = {
    "x-fake-tool-plan": "search_documents",  # the planning call asks for the backend's tool
    "x-fake-delay-ms": "30",
    "x-fake-ttft-ms": "40",
    "x-fake-chunks": "8",
    "x-fake-chunk-delay-ms": "15",
}
TOLERANCE_S = 0.003
TOOL_MS, DB_MS = 120, 30


@dataclass
class Run:
    jaeger: JaegerApi
    fake_port: int
    joined: str  # trace id
    lost: str


def _ask(port: int, headers: dict[str, str]) -> str:
    trace_id = secrets.token_hex(16)
    fields = {"q": "turn", "model": "gpt-4o-mini", "stream": "true", "tool_ms": TOOL_MS, "db_ms": DB_MS}
    query = urllib.parse.urlencode(fields)
    headers = {**headers, "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
    status, body = http_get(port, f"/ask?{query}", headers, timeout=60)
    assert status == 200, body[:300]
    return trace_id


def _complete(trace: Trace | None, root: str, calls: int, server_spans: bool) -> bool:
    if trace is None or not trace.named(root) or len(trace.named("chat gpt-4o-mini")) < calls:
        return False
    return not server_spans or len(trace.named("llm_request")) >= calls


@pytest.fixture(scope="module")
def turned(binaries: Binaries, module_dir: Path) -> Iterator[Run]:
    with Stack(module_dir) as stack:
        jaeger, collector = start_traces(stack, binaries, module_dir / "otlp")
        port = free_port()
        command = list(compose_service("fake-llm")["command"])
        command[0] = sys.executable
        command[command.index("--host") + 1] = "127.0.0.1"
        command[command.index("--port") + 1] = str(port)
        command += ["--export-spans", f"http://127.0.0.1:{collector.otlp_http}", "--span-service", "vllm"]
        stack.start("fake-llm", command, ready=lambda: http_ok(f"http://127.0.0.1:{port}/v1/models"))
        backend = start_backend(stack, "example", collector.otlp_endpoint, f"http://127.0.0.1:{port}/v1")
        run = Run(
            JaegerApi(jaeger.url),
            port,
            _ask(backend.port, SCRIPT),
            _ask(backend.port, {**SCRIPT, "x-fake-server-span-parent": "lost"}),
        )

        def in_jaeger() -> list[str]:
            done = _complete(run.jaeger.trace(run.joined), "GET /ask", 2, True)
            done = done and _complete(run.jaeger.trace(run.lost), "GET /ask", 2, False)
            return ["both"] if done else []

        wait_until(in_jaeger, timeout=40, what="both turns' traces in Jaeger")
        yield run


def _report(jaeger_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "openai-latency"), "report", "--jaeger", jaeger_url,
         "--lookback", "1h", "--by", "trace", *extra],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result


def _records(port: int) -> list[RequestRecord]:
    data: list[dict[str, Any]] = get_json(f"http://127.0.0.1:{port}/_fake/log?wait=5")
    return [RequestRecord.from_dict(item) for item in data]


def _records_of(records: list[RequestRecord], trace_id: str) -> list[RequestRecord]:
    return [r for r in records if r.headers.get("traceparent", "").split("-")[1:2] == [trace_id]]


def test_one_trace_holds_the_app_our_calls_and_the_servers_spans(turned: Run) -> None:
    trace = turned.jaeger.trace(turned.joined)
    assert trace is not None
    servers = trace.named("llm_request")
    calls = trace.named("chat gpt-4o-mini")
    (app,) = trace.named("GET /ask")
    assert len(servers) == len(calls) == 2
    assert trace.named("execute_tool search_documents") and trace.named("SELECT documents")
    for server in servers:
        assert "gen_ai.latency.time_in_queue" in server.tags and "gen_ai.request.id" in server.tags
        assert server.tags["gen_ai.latency.time_in_queue"] >= 0.030 - TOLERANCE_S
    print(f"one trace {turned.joined}: {app.name} > 2 x {calls[0].name} > ... > {servers[0].name} (vllm)")


def test_report_by_trace_splits_the_call_as_the_fake_servers_log_says(turned: Run) -> None:
    document = json.loads(_report(turned.jaeger.url, "--service", SERVICE, "--format", "json").stdout)
    traces = {trace["trace_id"]: trace for trace in document["traces"]}
    joined = traces[turned.joined]
    assert joined["root"] == "GET /ask" and joined["llm_calls"] == 2
    path = joined["critical_path"]
    assert path["tool"] == pytest.approx(TOOL_MS / 1000, abs=TOLERANCE_S)
    assert path["other"] >= DB_MS / 1000
    records = _records_of(_records(turned.fake_port), turned.joined)
    assert len(records) == 2
    for call, record in zip(joined["calls"], sorted(records, key=lambda r: r.received_ns), strict=True):
        assert call["server_status"] == "joined", call
        split = call["server"]
        assert record.headers_sent_ns and record.events
        body_ns = record.events[-1][1]  # the planning call is not streamed: its body, all at once
        first, last = record.first_token_ns or body_ns, record.last_token_ns or body_ns
        log = {
            "queue": (record.headers_sent_ns - record.received_ns) / 1e9,
            "prefill": (first - record.headers_sent_ns) / 1e9,
            "decode": (last - first) / 1e9,
        }
        for name, seconds in log.items():
            assert split[name] == pytest.approx(seconds, abs=TOLERANCE_S), (name, split, log)
        assert split["queue"] >= 0.030 - TOLERANCE_S and split["rest"] >= 0
        print(
            f"report --jaeger --by trace, {call['name']}: "
            + ", ".join(f"{name} {split[name] * 1e3:.1f} ms (log {log[name] * 1e3:.1f})" for name in log)
            + f", rest {split['rest'] * 1e3:.1f} ms"
        )
    print(
        "the turn's path: "
        + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in path.items() if isinstance(v, float))
    )
    lost = traces[turned.lost]
    assert len(lost["calls"]) == 2
    for lost_call in lost["calls"]:
        assert lost_call["server"] is None and lost_call["server_status"] == "no_server_span"
    text = _report(turned.jaeger.url).stdout  # every service: vllm's trace of its own too
    assert "in a trace of their own: the server did not continue the caller's traceparent" in text, text

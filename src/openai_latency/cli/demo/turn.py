"""The demo's last part: one turn of a small agent, traced, and where its time went.

The turn, under the app's own root span: a planning call, two calls side by side (the shorter one
ends off the critical path), a tool, a database query, the application's own code, and the answer,
streamed. The fake server (in-process) exports its own ``llm_request`` span per call, as vLLM does,
so each call on the path is split into the server's queue, prefill and decode and the rest. The
breakdown is ``report --by trace``'s, from the two span files it leaves behind.
"""

from __future__ import annotations

import contextvars
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from ..render.turns import group_lines
from ..spans.files import read_spans
from ..spans.span import ReadStats
from ..spans.traces import assemble_traces
from ..spans.write import write_otlp_json
from ..stats.critical_path import analyze
from ..stats.turns import group_turns

ROOT = "POST /ask"
MESSAGES = [{"role": "user", "content": "Which of our documents says why the sky is blue?"}]
#: Each call's script: the server's queue (delay-ms), prefill (ttft-ms), decode (chunks x chunk-delay-ms).
PLAN = {"x-fake-delay-ms": "40", "x-fake-ttft-ms": "90", "x-fake-chunks": "6", "x-fake-chunk-delay-ms": "8"}
SHORT = {"x-fake-delay-ms": "20", "x-fake-ttft-ms": "40", "x-fake-chunks": "4", "x-fake-chunk-delay-ms": "8"}
LONG = {"x-fake-delay-ms": "20", "x-fake-ttft-ms": "70", "x-fake-chunks": "10", "x-fake-chunk-delay-ms": "8"}
ANSWER = {
    "x-fake-delay-ms": "30",
    "x-fake-ttft-ms": "120",
    "x-fake-chunks": "16",
    "x-fake-chunk-delay-ms": "10",
}
TOOL_S = 0.15
QUERY_S = 0.04
OWN_CODE_S = 0.03


def _call(client: Any, script: dict[str, str]) -> None:
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=script,
    )
    for _chunk in stream:
        pass


def _turn(client: Any, tracer: Any) -> None:
    from opentelemetry.trace import SpanKind

    with tracer.start_as_current_span(ROOT, kind=SpanKind.SERVER):
        _call(client, PLAN)
        with ThreadPoolExecutor(2) as pool:  # side by side, each in the turn's context
            calls = [pool.submit(contextvars.copy_context().run, _call, client, s) for s in (SHORT, LONG)]
            for call in calls:
                call.result()
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_documents"}
        with tracer.start_as_current_span("execute_tool search_documents", attributes=tool):
            time.sleep(TOOL_S)
        query = {"db.system.name": "postgresql", "db.operation.name": "SELECT"}
        with tracer.start_as_current_span("SELECT documents", kind=SpanKind.CLIENT, attributes=query):
            time.sleep(QUERY_S)
        time.sleep(OWN_CODE_S)  # the application's own code: no span
        _call(client, ANSWER)


def run_turn(spans: Path, out: TextIO) -> None:
    """The turn, its two span files beside the demo's ``spans`` file, then its breakdown on ``out``."""
    import openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ... import OpenAILatencyInstrumentor
    from ...fake_server import FakeServer

    stem = spans.name.removesuffix(".jsonl")
    app_file, server_file = (
        spans.with_name(f"{stem}-turn.jsonl"),
        spans.with_name(f"{stem}-turn-server.jsonl"),
    )
    for path in (app_file, server_file):
        path.unlink(missing_ok=True)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAILatencyInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeServer(export_spans=str(server_file), span_service="vllm") as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-demo-not-a-real-key", max_retries=0)
            client.models.list()  # warm up: the SDK's lazy imports and the connection
            _turn(client, provider.get_tracer("demo-agent"))
            server.flush_spans()
    finally:
        instrumentor.uninstrument()
    write_otlp_json(str(app_file), exporter.get_finished_spans())
    exporter.clear()
    provider.shutdown()
    turns = [analyze(trace) for trace in assemble_traces(read_spans([app_file, server_file], ReadStats()))]
    (group,) = group_turns([turn for turn in turns if turn.root == ROOT])  # not the warm-up's trace
    print(
        f"\nOne turn of a small agent ({ROOT}: a planning call, two calls side by side, a tool, a"
        " database query, its own code, the streamed answer), its spans and the model server's own:"
        f"\n  openai-latency report {app_file} {server_file} --by trace\n",
        file=out,
    )
    for line in group_lines(group, slow=False):
        print("  " + line, file=out)

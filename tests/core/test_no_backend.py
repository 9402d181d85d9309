"""No backend at all: ``opentelemetry-instrument`` with the ``openai_latency_file`` span exporter writes
OTLP JSON lines to a daily file, and ``openai-latency report`` reads a day of such files (plain and
gzipped, as a directory or a quoted glob). Real processes: the app under the real
``opentelemetry-instrument``, calling the fake server; the report as the command a user runs."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats
from openai_latency.fake_server import FakeServer
from tests.e2e.processes import disabled_instrumentations, tool

APP = """
import openai, os
client = openai.OpenAI(base_url=os.environ["FAKE_BASE_URL"], api_key="sk-test", max_retries=2)
for _ in range(3):
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
for _ in client.chat.completions.create(
    model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True,
    extra_headers={"x-fake-chunks": "3"},
):
    pass
print("the app's own output")
"""


def _run_app(app: Path, pattern: str, server: FakeServer) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FAKE_BASE_URL": server.base_url,
        "OTEL_TRACES_EXPORTER": "openai_latency_file",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "daily-app",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disabled_instrumentations(),
        "OPENAI_LATENCY_TRACES_FILE": pattern,
    }
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [tool("opentelemetry-instrument"), sys.executable, str(app)],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _report(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("openai-latency"), "report", *argv], capture_output=True, text=True, timeout=60, check=False
    )


def test_instrumented_app_to_daily_files_to_report(tmp_path: Path, server: FakeServer) -> None:
    app = tmp_path / "app.py"
    app.write_text(APP)
    folder = tmp_path / "otlp"
    pattern = str(folder / "traces-%Y-%m-%d.jsonl")
    for _ in range(2):  # two runs of the app on one day append to the same file
        done = _run_app(app, pattern, server)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "the app's own output"  # the spans went to the file, not stdout
    today = folder / time.strftime("traces-%Y-%m-%d.jsonl")
    assert [p.name for p in folder.iterdir()] == [today.name]
    lines = today.read_text().splitlines()
    assert lines and all(json.loads(line)["resourceSpans"] for line in lines)
    spans = list(read_spans([today], ReadStats()))
    assert {span.service for span in spans} == {"daily-app"}
    operations = [span for span in spans if "openai_latency.phase" not in span.attributes]
    assert len(operations) == 8 and len(spans) > len(operations)
    # a stream's TTFT is withheld when its first token waited on a busy client (``first_token_waiting``,
    # seen with the machine's cores taken by other processes): report counts the TTFTs the spans hold
    streams = [span for span in operations if span.attributes.get("gen_ai.request.model") == "gpt-4o"]
    timed = sum("openai_latency.time_to_first_token" in span.attributes for span in streams)
    assert len(streams) == 2 and timed >= 1

    # yesterday's file, gzipped by a rotation: a day (or several) of files, read together
    with today.open("rb") as source, gzip.open(folder / "traces-yesterday.jsonl.gz", "wb") as target:
        shutil.copyfileobj(source, target)
    for argv in ([str(folder)], [str(folder / "traces-*.jsonl*")]):
        done = _report(*argv, "--format", "json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert len(report["input"]["files"]) == 2 and report["input"]["operation_spans"] == 16
        groups = {group["key"]["model"]: group for group in report["groups"]}
        assert groups["gpt-4o-mini"]["calls"] == 12 and groups["gpt-4o"]["calls"] == 4
        assert groups["gpt-4o"]["time_to_first_token"]["n"] == 2 * timed  # today's file and its copy
    done = _report(str(folder), "--by", "service")
    assert done.returncode == 0 and "== daily-app: 16 calls, no errors" in done.stdout


def test_exporter_never_raises_and_encodes_what_report_reads(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    from openai_latency.file_exporter import FileSpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("op") as span:
        span.set_attributes({"f": float("nan"), "i": 2**40, "b": True, "s": "x", "a": ("p", "q"), "d": 0.5})
        span.set_status(Status(StatusCode.ERROR, "boom"))
        span.add_event("e", {"k": 1})
    spans = memory.get_finished_spans()
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert FileSpanExporter(blocked / "sub" / "t.jsonl").export(spans) is SpanExportResult.FAILURE
    good = FileSpanExporter(tmp_path / "ok.jsonl")
    assert good.export(spans) is SpanExportResult.SUCCESS and good.export([]) is SpanExportResult.SUCCESS
    (read,) = read_spans([tmp_path / "ok.jsonl"], ReadStats())
    assert (
        read.status_error and read.name == "op" and read.trace_id == format(spans[0].context.trace_id, "032x")
    )
    nan = read.attributes.pop("f")
    assert nan != nan
    assert read.attributes == {"i": 2**40, "b": True, "s": "x", "a": ["p", "q"], "d": 0.5}
    assert (read.start_ns, read.end_ns) == (spans[0].start_time, spans[0].end_time)

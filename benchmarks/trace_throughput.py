"""How fast ``openai-latency report --by trace`` reads OTLP JSON into turns, and the memory it holds
(issue 32: at least 100,000 spans/s on a 1 M-span input, memory bounded by the open traces).

1. A template of real turns: an app's root span (``agent turn``, SERVER) around the real ``openai``
   SDK with the instrumentor against the embedded fake server (a streamed call, a non-stream call),
   an ``execute_tool`` span and a DB-like span, 40 turns; every few turns a retried call (429 then
   200) or two calls side by side (threads). Encoded with the OTLP encoder and written as the
   collector's file exporter writes them (protobuf JSON, hex ids, integer enums, ``--batch`` spans
   per line).
2. The template repeated with new trace ids and shifted timestamps up to ``--spans`` (default
   1,000,000): the file's traces come one after another, as an exporter writes them.
3. Each run is a fresh process: ``report --by trace --format json`` on the file, timed in wall and CPU
   time, with its peak RSS (``VmHWM``) and the most spans the trace assembly held at once
   (``input.max_open_spans``). The median of ``--runs`` runs is reported (msgspec reader when
   installed, as the ``cli`` extra gives).

    python benchmarks/trace_throughput.py [--spans 1000000] [--runs 3] [--file /tmp/turns.jsonl]

Not a test: it prints numbers, it never fails on them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.otlp_files import collector_json

WORKER = r"""
import json, sys, time
from openai_latency.cli.report import command as report
from openai_latency.cli.spans.files import JSON_PARSER

def peak_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

if sys.argv[2] == "import-only":
    print(json.dumps({"maxrss_kb": peak_kb()}))
    raise SystemExit(0)
out = open(sys.argv[3], "w")  # a file, as a user's redirection: the output is not held in memory
t0, c0 = time.perf_counter(), time.process_time()
code = report.main([sys.argv[1], "--by", "trace", "--format", "json"], out=out)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
out.close()
peak = peak_kb()  # before the output is read back below
with open(sys.argv[3]) as handle:
    data = json.load(handle)
print(json.dumps({
    "code": code, "wall": wall, "cpu": cpu, "spans": data["input"]["spans"],
    "traces": data["input"]["traces"], "max_open_spans": data["input"]["max_open_spans"],
    "late_spans": data["input"]["late_spans"], "maxrss_kb": peak, "parser": JSON_PARSER,
}))
"""


def _template_spans(turns: int) -> list[Any]:
    import openai
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from openai_latency import OpenAILatencyInstrumentor
    from openai_latency.fake_server import FakeServer

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench-agent")
    messages: Any = [{"role": "user", "content": "hello there"}]
    instrumentor = OpenAILatencyInstrumentor()
    instrumentor.instrument(tracer_provider=provider, meter_provider=MeterProvider())
    try:
        with FakeServer() as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=2)

            def stream() -> None:
                for _ in client.chat.completions.create(
                    model="gpt-4o", messages=messages, stream=True, stream_options={"include_usage": True},
                    extra_headers={"x-fake-chunks": "8", "x-fake-ttft-ms": "3"},
                ):  # fmt: skip
                    pass

            for turn in range(turns):
                with tracer.start_as_current_span("agent turn", kind=SpanKind.SERVER):
                    stream()
                    with tracer.start_as_current_span(
                        "execute_tool search", attributes={"gen_ai.operation.name": "execute_tool"}
                    ):
                        time.sleep(0.002)
                    with tracer.start_as_current_span(
                        "SELECT orders", attributes={"db.system": "postgresql"}
                    ):
                        time.sleep(0.001)
                    headers = {"x-fake-delay-ms": "2"}
                    if turn % 5 == 1:
                        headers = {"x-fake-fail-attempts": "1", "x-fake-retry-after-ms": "5"}
                    if turn % 5 == 2:  # two calls side by side
                        from opentelemetry import context

                        current = context.get_current()
                        side = threading.Thread(target=lambda c=current: (context.attach(c), stream()))
                        side.start()
                    client.chat.completions.create(
                        model="gpt-4o-mini", messages=messages, extra_headers=headers
                    )
                    if turn % 5 == 2:
                        side.join()
    finally:
        instrumentor.uninstrument()
    return sorted(exporter.get_finished_spans(), key=lambda s: s.end_time or 0)


_TRACE_ID = re.compile(r'"traceId": ?"([0-9a-f]{32})"')
_TIME = re.compile(r'"(start|end)TimeUnixNano": ?"(\d+)"')


def make_file(path: Path, spans_wanted: int, batch: int) -> tuple[int, int]:
    """Writes the file; returns (spans, traces)."""
    spans = _template_spans(40)
    traces = len({s.context.trace_id for s in spans})
    lines = [
        json.dumps(collector_json(spans[i : i + batch]), separators=(",", ":"))
        for i in range(0, len(spans), batch)
    ]
    first = min(s.start_time or 0 for s in spans)
    last = max(s.end_time or 0 for s in spans)
    step = last - first + 1_000_000
    copies = -(-spans_wanted // len(spans))
    with path.open("w") as handle:
        for copy in range(copies):
            suffix, shift = f"{copy:08x}", copy * step
            for line in lines:
                line = _TRACE_ID.sub(lambda m, s=suffix: f'"traceId":"{m.group(1)[:24]}{s}"', line)  # type: ignore[misc]
                line = _TIME.sub(
                    lambda m, d=shift: f'"{m.group(1)}TimeUnixNano":"{int(m.group(2)) + d}"',  # type: ignore[misc]
                    line,
                )
                handle.write(line + "\n")
    return copies * len(spans), copies * traces


def _run(path: Path, import_only: bool = False) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", WORKER, str(path), "import-only" if import_only else "run",
         str(path.with_suffix(".out.json"))],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=512, help="spans per line (an export batch)")
    parser.add_argument("--file", type=Path, help="reuse or write the generated file here")
    args = parser.parse_args()
    path = args.file or Path(tempfile.gettempdir()) / f"openai-latency-turns-{args.spans}.jsonl"
    if not path.exists():
        t0 = time.perf_counter()
        spans, traces = make_file(path, args.spans, args.batch)
        print(f"wrote {path}: {spans:,} spans, {traces:,} traces, {path.stat().st_size / 1e6:,.0f} MB"
              f" in {time.perf_counter() - t0:.0f} s")  # fmt: skip
    else:
        print(f"reusing {path} ({path.stat().st_size / 1e6:,.0f} MB)")
    base_kb = _run(path, import_only=True)["maxrss_kb"]
    print(f"python {platform.python_version()}, {platform.machine()};"
          f" peak RSS after imports {base_kb / 1024:.0f} MiB")  # fmt: skip
    runs = [_run(path) for _ in range(args.runs)]
    with contextlib.suppress(OSError):
        print(f"load average after the runs: {Path('/proc/loadavg').read_text().split()[:3]}")
    spans, traces = runs[0]["spans"], runs[0]["traces"]
    wall = statistics.median(r["wall"] for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs)
    rss = statistics.median(r["maxrss_kb"] for r in runs)
    print(
        f"{runs[0]['parser']}: {spans:,} spans, {traces:,} traces, median of {args.runs}: wall {wall:.2f} s"
        f" = {spans / wall:,.0f} spans/s, CPU {cpu:.2f} s = {spans / cpu:,.0f} spans/s; peak RSS"
        f" {rss / 1024:.0f} MiB ({(rss - base_kb) / 1024:.0f} MiB over the import baseline);"
        f" at most {runs[0]['max_open_spans']:,} spans held at once; late spans {runs[0]['late_spans']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast ``openai-latency report`` reads OTLP JSON, and how much memory it holds (issue 14, item 3).

1. A template of real spans: the real ``openai`` SDK with the instrumentor (default ``phase_spans``
   and ``detailed``) against the embedded fake server: non-stream and streamed chat calls, a retried
   call (429 then 200), a 401, embeddings. They are encoded with the OTLP encoder and written as the
   collector's file exporter writes them (protobuf JSON, hex ids, integer enums, export batches of
   ``--batch`` spans per line).
2. The template is repeated with a new trace id per copy (and shifted timestamps) until the file holds
   ``--spans`` spans (default 1,000,000).
3. Each run is a fresh process: ``report --format json`` on the file, timed in wall and CPU time, with
   its peak RSS (``VmHWM``); spans/s = spans / time. The median of ``--runs`` runs is reported for
   each reader: the standard library's ``json``, ``orjson`` and ``msgspec`` (the ``cli`` extra),
   those that are installed. The baseline
   RSS of a process that only imported the report modules is subtracted to give the state per call.

    python benchmarks/report_throughput.py [--spans 1000000] [--runs 5] [--file /tmp/spans.jsonl]

Not a test: it prints numbers, it never fails on them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.otlp_files import collector_json

WORKER = r"""
import json, sys, time
{setup}
from openai_latency.cli.report import command as report
from openai_latency.cli.spans.files import JSON_PARSER

def peak_kb():  # VmHWM: this process's peak RSS (ru_maxrss may still hold the parent's from before exec)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

if sys.argv[2] == "import-only":
    print(json.dumps({{"maxrss_kb": peak_kb()}}))
    raise SystemExit(0)
import io
out = io.StringIO()
t0, c0 = time.perf_counter(), time.process_time()
code = report.main([sys.argv[1], "--format", "json"], out=out)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
data = json.loads(out.getvalue())
print(json.dumps({{
    "code": code, "wall": wall, "cpu": cpu, "spans": data["input"]["spans"],
    "calls": data["input"]["operation_spans"],
    "maxrss_kb": peak_kb(),
    "parser": JSON_PARSER,
}}))
"""
#: what each measured parser hides from the reader (it picks the fastest one it can import)
PARSERS = {
    "json": "sys.modules['msgspec'] = sys.modules['orjson'] = None",
    "orjson": "sys.modules['msgspec'] = None",
    "msgspec": "",
}


def _template_spans() -> list[Any]:
    """Real spans of ~100 calls: both span modes, streams, a retry, an error, embeddings."""
    import openai
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from openai_latency import OpenAILatencyInstrumentor
    from openai_latency.fake_server import FakeServer

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-app"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    messages: Any = [{"role": "user", "content": "hello there"}]
    with FakeServer() as server:
        for mode in ("phases", "detailed"):
            instrumentor = OpenAILatencyInstrumentor()
            instrumentor.instrument(
                tracer_provider=provider, meter_provider=MeterProvider(), phase_spans=mode
            )
            try:
                client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=2)
                for i in range(20):
                    client.chat.completions.create(
                        model="gpt-4o-mini", messages=messages, temperature=0.2, max_tokens=64,
                        extra_headers={"x-fake-delay-ms": str(1 + i % 5)},
                    )  # fmt: skip
                for _ in range(20):
                    stream = client.chat.completions.create(
                        model="gpt-4o", messages=messages, stream=True,
                        stream_options={"include_usage": True},
                        extra_headers={"x-fake-chunks": "8", "x-fake-ttft-ms": "3"},
                    )  # fmt: skip
                    for _ in stream:
                        pass
                client.chat.completions.create(
                    model="gpt-4o-mini", messages=messages,
                    extra_headers={"x-fake-fail-attempts": "1", "x-fake-retry-after-ms": "5"},
                )  # fmt: skip
                with contextlib.suppress(openai.AuthenticationError):
                    client.chat.completions.create(
                        model="gpt-4o-mini", messages=messages,
                        extra_headers={"x-fake-error": "invalid_api_key"},
                    )  # fmt: skip
                for _ in range(5):
                    client.embeddings.create(model="text-embedding-3-small", input="hello")
            finally:
                instrumentor.uninstrument()
    return sorted(exporter.get_finished_spans(), key=lambda s: s.end_time or 0)


_TRACE_ID = re.compile(r'"traceId": ?"([0-9a-f]{32})"')
_TIME = re.compile(r'"(start|end)TimeUnixNano": ?"(\d+)"')


def make_file(path: Path, spans_wanted: int, batch: int) -> tuple[int, int]:
    """Writes the file; returns (spans, calls)."""
    spans = _template_spans()
    lines = [
        json.dumps(collector_json(spans[i : i + batch]), separators=(",", ":"))
        for i in range(0, len(spans), batch)
    ]
    calls = sum(1 for s in spans if "openai_latency.phase" not in (s.attributes or {}))
    first = min(s.start_time or 0 for s in spans)
    last = max(s.end_time or 0 for s in spans)
    step = last - first + 1_000_000
    copies = -(-spans_wanted // len(spans))
    with path.open("w") as handle:
        for copy in range(copies):
            suffix = f"{copy:08x}"
            shift = copy * step
            for line in lines:
                line = _TRACE_ID.sub(lambda m, s=suffix: f'"traceId":"{m.group(1)[:24]}{s}"', line)  # type: ignore[misc]
                line = _TIME.sub(
                    lambda m, d=shift: f'"{m.group(1)}TimeUnixNano":"{int(m.group(2)) + d}"',  # type: ignore[misc]
                    line,
                )
                handle.write(line + "\n")
    return copies * len(spans), copies * calls


def _run(path: Path, parser: str, import_only: bool = False) -> dict[str, Any]:
    code = WORKER.format(setup=PARSERS[parser])
    result = subprocess.run(
        [sys.executable, "-c", code, str(path), "import-only" if import_only else "run"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=512, help="spans per line (an export batch)")
    parser.add_argument("--file", type=Path, help="reuse or write the generated file here")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument(
        "--parsers", default=",".join(PARSERS), help=f"comma-separated: {', '.join(PARSERS)} (default: all)"
    )
    args = parser.parse_args()

    path = args.file or Path(tempfile.gettempdir()) / f"openai-latency-report-{args.spans}.jsonl"
    if not path.exists():
        t0 = time.perf_counter()
        spans, calls = make_file(path, args.spans, args.batch)
        print(f"wrote {path}: {spans:,} spans, {calls:,} calls, {path.stat().st_size / 1e6:,.0f} MB"
              f" in {time.perf_counter() - t0:.0f} s")  # fmt: skip
    else:
        print(f"reusing {path} ({path.stat().st_size / 1e6:,.0f} MB)")
    wanted = [name.strip() for name in args.parsers.split(",") if name.strip()]
    parsers = [name for name in wanted if name == "json" or importlib.util.find_spec(name) is not None]
    base_kb = _run(path, "json", import_only=True)["maxrss_kb"]
    print(f"python {platform.python_version()}, {platform.machine()};"
          f" peak RSS after imports {base_kb / 1024:.0f} MiB")  # fmt: skip
    results = {}
    for parser_name in parsers:
        runs = [_run(path, parser_name) for _ in range(args.runs)]
        spans, calls = runs[0]["spans"], runs[0]["calls"]
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        rss = statistics.median(r["maxrss_kb"] for r in runs)
        name = runs[0]["parser"]
        per_call = (rss - base_kb) * 1024 / calls
        results[name] = {
            "spans": spans, "calls": calls, "runs": args.runs,
            "wall_s": wall, "cpu_s": cpu, "spans_per_s_wall": spans / wall, "spans_per_s_cpu": spans / cpu,
            "peak_rss_mib": rss / 1024, "state_bytes_per_call": per_call,
        }  # fmt: skip
        print(
            f"{name:>7}: {spans:,} spans ({calls:,} calls), median of {args.runs}: wall {wall:.2f} s"
            f" = {spans / wall:,.0f} spans/s, CPU {cpu:.2f} s = {spans / cpu:,.0f} spans/s;"
            f" peak RSS {rss / 1024:.0f} MiB ({per_call:,.0f} B per call over the import baseline)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``openai-latency demo``: the whole story in half a minute, on fake servers on 127.0.0.1.

No API key, no network, no Docker. Three local OpenAI-compatible endpoints with different latency
profiles (one slow to the first token, one with a slow network and an occasional 429, one reasoning
model that thinks before it answers), a few failures (a 401, a client timeout), benchmarked side by
side with ``openai-latency bench``: the
table, the triage, a waterfall of the slowest call, and the OTLP JSON file it wrote, with the
commands that reread it or send the same spans to Jaeger (a collector configuration written next to
the file replays it with the contrib collector's ``otlpjsonfile`` receiver). ``--trees`` adds four
single calls drawn as span trees.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from ..args import EXIT_FAILED, EXIT_OK, Parser
from ..render.waterfall import waterfall_lines
from ..spans.collect import collect_calls
from ..spans.files import read_spans
from ..spans.span import ReadStats

#: ``demo --help``'s description: the docstring's first paragraph, without reST markup.
DESCRIPTION = (
    "The whole story in half a minute, on fake servers on 127.0.0.1: no API key, no network, no Docker."
    " Two local OpenAI-compatible endpoints (one slow to the first token, one with a slow network and an"
    " occasional 429), a few failures, benchmarked side by side with openai-latency bench: the verdict,"
    " the table, the triage, a waterfall of the slowest call, and the OTLP JSON file it wrote."
)
MODEL = "gpt-4o-mini"
#: The endpoints: name -> fake server script (server-wide defaults; see ``fake-server --help``).
PROFILES: dict[str, dict[str, object]] = {
    # a model server that is close by but slow to start generating (queueing, long prefill)
    "slow-first-token": {
        "delay-ms": 30, "ttft-ms": 260, "chunks": 16, "chunk-delay-ms": 12, "jitter-ms": 4, "seed": 1,
        "every": "11:error=invalid_api_key",
    },
    # a fast model behind a slow network path, rate limited now and then, one request that hangs
    "slow-network": {
        "delay-ms": 190, "ttft-ms": 40, "chunks": 16, "chunk-delay-ms": 12, "jitter-ms": 4, "seed": 2,
        "every": "5:fail-attempts=1,13:delay-ms=3000", "retry-after-ms": 250,
    },
    # a reasoning model (DeepSeek-R1 style): it streams 24 reasoning tokens before the answer
    "reasoning-model": {
        "delay-ms": 40, "ttft-ms": 60, "reasoning-tokens": 24, "reasoning-delay-ms": 10, "chunks": 12,
        "chunk-delay-ms": 12, "jitter-ms": 3, "seed": 3,
    },
}  # fmt: skip
REQUESTS = 26
TIMEOUT_S = 1.0
#: The collector that replays the file: the contrib distribution (it has the otlpjsonfile receiver),
#: the release docker-compose.yml pins.
COLLECTOR_IMAGE = "otel/opentelemetry-collector-contrib:0.143.0"
#: Where the replay sends the spans: the stack's collector (docs/STACK.md), which passes them to Jaeger.
STACK_OTLP = "localhost:4317"


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = Parser(prog="openai-latency demo", description=DESCRIPTION, out=out, err=err)
    parser.add_argument("--trees", action="store_true", help="also draw four single calls as span trees")
    parser.add_argument(
        "--out", metavar="FILE", help="where to write the spans (default: a new temporary file)"
    )
    parser.add_argument("--html", metavar="FILE", help="also write the bench's charts as one offline page")
    opts = parser.parse_args(argv)
    try:
        import openai  # noqa: F401
    except ImportError:
        print("openai-latency demo: needs the cli extra: pip install 'openai-latency[cli]'", file=err)
        return EXIT_FAILED
    from ...fake_server import FakeServer
    from ..bench.command import main as bench

    spans = opts.out or _new_file()
    started = time.monotonic()
    with (
        FakeServer.spawn(PROFILES["slow-first-token"]) as first,
        FakeServer.spawn(PROFILES["slow-network"]) as net,
        FakeServer.spawn(PROFILES["reasoning-model"]) as thinker,
    ):
        print(
            "openai-latency demo: three local OpenAI-compatible endpoints (fake servers on 127.0.0.1),\n"
            f"  slow-first-token  {first.base_url}  ~30 ms to headers, ~260 ms to the first token,"
            " a 401 now and then\n"
            f"  slow-network      {net.base_url}  ~190 ms to headers, a 429 every 5th request,"
            " one that hangs\n"
            f"  reasoning-model   {thinker.base_url}  thinks ~240 ms (24 reasoning tokens) before it"
            " answers\n"
            f"benchmarked side by side: {REQUESTS} streamed requests each, 4 in flight, client timeout"
            f" {TIMEOUT_S:g} s, interleaved.\n",
            file=out,
            flush=True,
        )
        argv_bench = [
            "--target", f"slow-first-token={first.base_url}", "--target", f"slow-network={net.base_url}",
            "--target", f"reasoning-model={thinker.base_url}",
            "--model", MODEL, "-n", str(REQUESTS), "-c", "4", "--warmup", "1", "--timeout", str(TIMEOUT_S),
            "--max-retries", "1", "--slo", "ttft=400ms,e2e=1s", "--out", spans, "--no-progress",
        ]  # fmt: skip
        if opts.html:
            argv_bench += ["--html", opts.html]
        os.environ.setdefault("OPENAI_API_KEY", "sk-demo-not-a-real-key")
        code = bench(argv_bench, out, err)
    if code != EXIT_OK:
        return code
    _waterfall(spans, out)
    print(
        f"\nEvery span is in {spans} (OTLP JSON lines). Look at them now, no Docker needed:\n"
        f"  openai-latency report {spans}                 # p50/p95/p99 per phase, triage\n"
        f"  openai-latency report {spans} --waterfall 5   # the five slowest calls, phase by phase\n"
        "Your own app's spans, printed as they end (the [otlp] extra brings opentelemetry-instrument):\n"
        "  OTEL_TRACES_EXPORTER=console OTEL_METRICS_EXPORTER=none opentelemetry-instrument python app.py\n",
        file=out,
    )
    _jaeger_hint(Path(spans).resolve(), out)
    if opts.trees:
        from .trees import run_trees

        print(file=out)
        run_trees(out)
    print(f"\n(demo took {time.monotonic() - started:.1f} s)", file=out)
    return EXIT_OK


def _new_file() -> str:
    folder = Path(tempfile.gettempdir()) / "openai-latency-demo"
    folder.mkdir(exist_ok=True)
    return str(folder / f"spans-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl")


def replay_config(spans: Path) -> str:
    """A collector configuration that reads ``spans`` once, from the start, and sends it on by OTLP."""
    return (
        "# Replays one OTLP JSON lines file (written by openai-latency) to an OTLP endpoint.\n"
        "receivers:\n"
        "  otlpjsonfile:\n"
        f"    include: [{json.dumps(str(spans))}]\n"
        "    start_at: beginning  # the default, end, would skip what the file already holds\n"
        "    max_log_size: 64MiB  # one line holds up to 512 spans (~450 kB); the default is 1 MiB\n"
        "exporters:\n"
        "  otlp:\n"
        f"    endpoint: {STACK_OTLP}\n"
        "    tls:\n"
        "      insecure: true\n"
        "service:\n"
        "  pipelines:\n"
        "    traces:\n"
        "      receivers: [otlpjsonfile]\n"
        "      exporters: [otlp]\n"
    )


def _jaeger_hint(spans: Path, out: TextIO) -> None:
    config = spans.with_name(spans.name.removesuffix(".jsonl") + ".otelcol.yaml")
    try:
        config.write_text(replay_config(spans), encoding="utf-8")
    except OSError as exc:
        print(f"(could not write {config}: {exc.strerror or exc})", file=out)
        return
    folder = spans.parent
    print(
        "With Docker: send the same spans to Jaeger. Start the stack (docker compose up in a clone, see"
        " docs/STACK.md;"
        f" its collector takes OTLP on {STACK_OTLP} and passes traces on to Jaeger), then replay the file"
        f" with the contrib collector's otlpjsonfile receiver, configured in {config}:\n"
        f"  docker run --rm --network host -v {folder}:{folder}:ro {COLLECTOR_IMAGE} --config {config}\n"
        "open http://localhost:16686 (service openai-latency-bench) and stop the replay (Ctrl-C) once the"
        " traces are there. Your own app sends its spans to the same collector directly:\n"
        "  OTEL_SERVICE_NAME=my-app opentelemetry-instrument python app.py",
        file=out,
    )


def _waterfall(path: str, out: TextIO) -> None:
    calls = collect_calls(read_spans([path], ReadStats())).calls
    print("\nThe slowest call, phase by phase (openai-latency report --waterfall 1):\n", file=out)
    for line in waterfall_lines(calls, 1):
        print("  " + line, file=out)

"""``openai-latency demo --trees``: four real SDK calls against the embedded fake server, as span trees.

No API key, no network, no Docker: the fake OpenAI-compatible server runs in-process on 127.0.0.1
and scripts the latency of every call (``x-fake-*`` headers), so the trees show the phases for real.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from ..render.span_tree import render
from ..render.text import format_duration
from ..spans import names

MESSAGES = [{"role": "user", "content": "Why is my LLM call slow?"}]


@dataclass(frozen=True)
class Scenario:
    title: str
    explanation: str
    #: Makes the call; returns a note to print under the tree, if any.
    run: Callable[[Any], str | None]


def _streamed(client: Any) -> str | None:
    script = {
        "x-fake-delay-ms": "150",
        "x-fake-ttft-ms": "120",
        "x-fake-chunks": "12",
        "x-fake-chunk-delay-ms": "25",
    }
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, extra_headers=script
    )
    for _chunk in stream:
        pass
    return None


def _retried(client: Any) -> str | None:
    script = {
        "x-fake-fail-attempts": "1",
        "x-fake-fail-status": "429",
        "x-fake-retry-after-ms": "250",
        "x-fake-delay-ms": "80",
    }
    client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, extra_headers=script)
    return None


def _slow_consumer(client: Any) -> str | None:
    script = {"x-fake-ttft-ms": "60", "x-fake-chunks": "8", "x-fake-chunk-delay-ms": "60"}
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, extra_headers=script
    )
    for _chunk in stream:
        time.sleep(0.04)  # the application's own work between chunks
    return None


def _failed(client: Any) -> str | None:
    try:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, extra_headers={"x-fake-error": "context_length_exceeded"}
        )
    except Exception as exc:  # the demo shows the error span; the SDK's exception is expected
        return f"   (the SDK raised {type(exc).__name__}, as it would without instrumentation)"
    return None


SCENARIOS = (
    Scenario(
        "1. A streamed chat call",
        "150 ms before headers (network_wait), 120 ms to the first token, 12 tokens at 25 ms (stream_drain).",
        _streamed,
    ),
    Scenario(
        "2. A call that hit a 429 once",
        "The first attempt is rate limited; the SDK waits the server's retry-after-ms (250 ms) and retries.",
        _retried,
    ),
    Scenario(
        "3. A stream whose caller is slow",
        "The server sends a token every 60 ms; the application spends 40 ms on each chunk. That work"
        " overlaps the server's and is consumer time, not server time: time_per_output_token stays 60 ms.",
        _slow_consumer,
    ),
    Scenario(
        "4. A failed call",
        "400 context_length_exceeded: error.type and error.category say why.",
        _failed,
    ),
)


def run_trees(out: TextIO) -> int:
    """Each scenario's spans as a tree, with the one-line verdict (the largest phase)."""
    import openai
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ... import OpenAILatencyInstrumentor
    from ...fake_server import FakeServer

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAILatencyInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeServer() as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="sk-demo-not-a-real-key", max_retries=2)
            client.models.list()  # warm up: the SDK's lazy imports and the connection
            print(
                f"Span trees: openai {openai.__version__} against the fake server at {server.base_url}",
                file=out,
            )
            for scenario in SCENARIOS:
                exporter.clear()
                print(f"\n{scenario.title}\n   {scenario.explanation}\n", file=out)
                note = scenario.run(client)
                if note:
                    print(note, file=out)
                spans = exporter.get_finished_spans()
                for line in render(list(spans)):
                    print("   " + line, file=out)
                _print_verdict(spans, out)
    finally:
        instrumentor.uninstrument()
    return 0


def _print_verdict(spans: Any, out: TextIO) -> None:
    for span in spans:
        attributes = span.attributes or {}
        phase = attributes.get(names.DOMINANT_PHASE)
        if phase is None:
            continue
        total = (span.end_time - span.start_time) / 1e9
        share = attributes.get(f"{names.PHASE_PREFIX}{phase}", 0.0)
        total_text, share_text = format_duration(total), format_duration(share)
        print(f"\n   -> {total_text} in all; the largest phase is {phase} ({share_text})", file=out)

"""A voice agent's Realtime sessions, each one trace, exported over OTLP: what docs/STACK.md's voice
searches run on (tests/realstack/test_voice_search.py).

``python -m tests.realstack.voice_session --otlp http://127.0.0.1:4317 --base-url http://127.0.0.1:8080/v1``
runs them against a fake server (the compose stack's fake-llm serves ``/v1/realtime``) and prints
``{session name: trace id}`` as JSON. Each session is a ``voice session`` span (the application's
own, current while it sends and receives), its turns ``realtime gpt-realtime`` spans under it:

- ``quick``: three turns the client starts (``response.create``), each well under a second;
- ``slow-network``: three turns, the second waits 1.5 s for ``response.created`` (the server queued it);
- ``slow-first-audio``: three turns, the second waits 1.5 s more for its first audio delta;
- ``server-vad``: two user turns ended by server VAD (``speech_stopped`` starts the model's turn);
- ``barge-in``: the user talks over the model: the client cancels after three audio deltas.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import openai
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from openai_latency import OpenAILatencyInstrumentor

SERVICE = "voice-agent"
MODEL = "gpt-realtime"
TURN = f"realtime {MODEL}"
SLOW_MS = 1500
FAST = {"x-fake-delay-ms": "30", "x-fake-ttft-ms": "30", "x-fake-chunks": "5", "x-fake-chunk-delay-ms": "40"}
VAD = {
    "type": "session.update",
    "session": {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad"}}}},
}
APPEND = {"type": "input_audio_buffer.append", "audio": "AAAA"}


def _until_done(connection: Any, cancel_after: int | None = None) -> None:
    audio = 0
    for event in connection:
        if event.type == "response.output_audio.delta":
            audio += 1
            if audio == cancel_after:
                connection.send({"type": "response.cancel"})
        if event.type == "response.done":
            return


def _turn(connection: Any, **script: str) -> None:
    """One turn the client starts, scripted through the response's metadata."""
    connection.send({"type": "response.create", "response": {"metadata": script}})
    _until_done(connection)


def quick(connection: Any) -> None:
    for _ in range(3):
        _turn(connection)


def slow_network(connection: Any) -> None:
    _turn(connection)
    _turn(connection, **{"x-fake-delay-ms": str(SLOW_MS)})
    _turn(connection)


def slow_first_audio(connection: Any) -> None:
    _turn(connection)
    _turn(connection, **{"x-fake-ttft-ms": str(SLOW_MS)})
    _turn(connection)


def server_vad(connection: Any) -> None:
    connection.send(VAD)
    for _ in range(2):
        for _ in range(3):
            connection.send(APPEND)  # the user speaks; the server's VAD ends the turn
        _until_done(connection)


def barge_in(connection: Any) -> None:
    connection.send({"type": "response.create", "response": {"metadata": {"x-fake-chunks": "30"}}})
    _until_done(connection, cancel_after=3)


SESSIONS: dict[str, tuple[Callable[[Any], None], dict[str, str]]] = {
    "quick": (quick, FAST),
    "slow-network": (slow_network, FAST),
    "slow-first-audio": (slow_first_audio, FAST),
    "server-vad": (server_vad, {**FAST, "x-fake-vad-speech-ms": "100"}),
    "barge-in": (barge_in, FAST),
}


def run(client: openai.OpenAI, tracer: Tracer) -> dict[str, str]:
    trace_ids = {}
    for name, (session, script) in SESSIONS.items():
        with (
            tracer.start_as_current_span("voice session", attributes={"session": name}) as span,
            client.realtime.connect(model=MODEL, extra_headers=script) as connection,
        ):
            session(connection)
        trace_ids[name] = format(span.get_span_context().trace_id, "032x")
    return trace_ids


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otlp", required=True, help="OTLP/gRPC endpoint, e.g. http://127.0.0.1:4317")
    parser.add_argument("--base-url", required=True, help="the fake server's /v1 URL")
    args = parser.parse_args(argv)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=args.otlp, insecure=True)))
    meters = MeterProvider()
    OpenAILatencyInstrumentor().instrument(tracer_provider=provider, meter_provider=meters)
    client = openai.OpenAI(
        base_url=args.base_url,
        websocket_base_url=args.base_url.replace("http://", "ws://", 1),
        api_key="sk-voice-session-test",
    )
    trace_ids = run(client, provider.get_tracer("voice-agent"))
    provider.shutdown()  # exports what is left
    meters.shutdown()
    print(json.dumps(trace_ids))


if __name__ == "__main__":
    main()

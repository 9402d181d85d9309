"""Time of the per-chunk loop alone: the SDK's stream generator wrapped by ``traced_stream``.

The budget (docs/ARCHITECTURE.md) allows 0.6 µs per chunk: a clock read, a type check, a few number
updates. This feeds one real ``ChatCompletionChunk`` (with content, or with ``reasoning_content``
as DeepSeek and SGLang send it: ``--kind reasoning``) through a plain generator, bare and wrapped,
and reports the difference per chunk. No HTTP and no SSE parsing, so nothing but our
loop is measured (the end-of-stream work, spans and metric points, is per stream: see
instructions.py).

    python benchmarks/chunk_loop.py [--chunks 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from openai_latency.call.operation import Operation
from openai_latency.clock import clock
from openai_latency.config import load_settings
from openai_latency.hooks.streams import traced_stream
from openai_latency.model import OperationKind, Telemetry

CHAT = OperationKind("chat", "chat_completions", "chat")


DELTAS = {
    "answer": {"content": "hi"},
    "reasoning": {"reasoning_content": "hmm"},  # an extra field, as DeepSeek/SGLang send it
}


def _chunk(kind: str) -> Any:
    """A chunk as the SDK builds it from the wire: ``construct``ed, extras kept, no validation."""
    from openai.types.chat import ChatCompletionChunk

    return ChatCompletionChunk.construct(
        **{
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": DELTAS[kind], "finish_reason": None}],
        }
    )


def _source(item: Any, count: int) -> Iterator[Any]:
    for _ in range(count):
        yield item


def _drain(iterator: Iterator[Any]) -> int:
    start = time.perf_counter_ns()
    for _ in iterator:
        pass
    return time.perf_counter_ns() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--kind", choices=sorted(DELTAS), default="answer", help="the chunks' channel")
    args = parser.parse_args()
    telemetry = Telemetry(TracerProvider().get_tracer("bench"), None, load_settings({}))
    item = _chunk(args.kind)
    added: list[float] = []
    for _ in range(args.repeat):
        bare = _drain(_source(item, args.chunks))
        op = Operation(telemetry, CHAT, "chat bench", {}, clock())
        op.timeline.streaming = True
        wrapped = _drain(traced_stream(_source(item, args.chunks), op))
        added.append((wrapped - bare) / args.chunks / 1000)
    added.sort()
    median = added[len(added) // 2]
    per_chunk = f"{median:.2f} µs per {args.kind} chunk"
    print(f"traced_stream adds {per_chunk} (median of {args.repeat}; budget 0.6 µs)")


if __name__ == "__main__":
    main()

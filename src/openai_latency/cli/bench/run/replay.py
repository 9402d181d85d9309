"""``bench --replay FILE``: yesterday's traffic against today's endpoint.

The file is OTLP JSON (what the collector's file exporter or ``openai_latency_file`` writes, or a
previous ``bench --out``). Each operation span of a chat, Responses or completions call is one
request to replay: its start time (the arrivals keep their spacing, divided by ``--replay-speed``),
its input and output token counts (``gen_ai.usage.input_tokens`` / ``output_tokens``) and its
stream flag (``gen_ai.request.stream``). No message content is needed, nor read: the prompts are
synthetic, of the recorded input length (a filler word repeated, calibrated per target on its
tokenizer: :mod:`.calibrate`; plain words, as ``--prompt-tokens``, until then), and each request
asks for exactly the recorded output tokens (``max_tokens`` with the ignore-EOS hint).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ...args import UsageError
from ...spans import names
from ...spans.files import read_spans
from ...spans.span import InputError, ReadStats
from ..workload import Conversation
from .loops import cancel_all

#: The operations a replay sends (others, such as embeddings, are left out and counted).
REPLAYED = frozenset({"chat", "text_completion"})  # Responses calls are "chat" operations


@dataclass(frozen=True)
class Recorded:
    """One recorded call: seconds after the first one, token counts, stream flag."""

    offset: float
    input_tokens: int | None
    output_tokens: int | None
    stream: bool


def read(path: str) -> tuple[list[Recorded], int]:
    """The calls of an OTLP JSON file in start order, and how many operation spans were left out."""
    calls: list[tuple[int, int | None, int | None, bool]] = []
    skipped = 0
    try:
        for span in read_spans([path], ReadStats()):
            attributes = span.attributes
            if names.PHASE in attributes or names.OPERATION_NAME not in attributes:
                continue
            if attributes[names.OPERATION_NAME] not in REPLAYED:
                skipped += 1
                continue
            output = _count(attributes.get(names.OUTPUT_TOKENS))
            if output is None:
                output = _count(attributes.get(names.BENCH_OUTPUT_CHUNKS))
            stream = attributes.get(names.REQUEST_STREAM) is True
            calls.append((span.start_ns, _count(attributes.get(names.INPUT_TOKENS)), output, stream))
    except InputError as exc:
        raise UsageError(f"--replay: {exc}") from None
    if not calls:
        raise UsageError(f"--replay: {path} has no chat, Responses or completions call spans")
    calls.sort(key=lambda call: call[0])
    first = calls[0][0]
    return [Recorded((start - first) / 1e9, i, o, s) for start, i, o, s in calls], skipped


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def conversations(
    calls: Sequence[Recorded], prompt: Callable[[int], str], default_prompt: str
) -> tuple[Conversation, ...]:
    """One conversation per recorded call: a synthetic prompt of about its input tokens (made exact per
    target by :func:`.calibrate.replayed`), its output tokens and stream flag."""
    result = []
    for call in calls:
        text = prompt(call.input_tokens) if call.input_tokens else default_prompt
        result.append(
            Conversation(
                ({"role": "user", "content": text},),
                max_tokens=call.output_tokens,
                stream=call.stream,
                input_tokens=call.input_tokens or None,
            )
        )
    return tuple(result)


async def replay_loop(
    offsets: Sequence[float],
    targets: int,
    speed: float,
    send: Callable[[int, int], Awaitable[None]],
    part: int = 0,
    parts: int = 1,
    origin: float | None = None,
) -> int:
    """Every recorded arrival (``send(target, item)``), ``offset / speed`` seconds after ``origin``
    (``time.monotonic()``; default now), to each target (one task per request, nothing capped: the
    recorded load, whatever the server does with it). In a ``--workers`` run this process is worker
    ``part`` of ``parts``: it sends the arrivals ``part``, ``part + parts``, ... (the workers take
    turns, from the origin they share). Returns the arrivals the client sent more than 10 ms late."""
    tasks: set[asyncio.Task[None]] = set()
    start = time.monotonic() if origin is None else origin
    late = 0
    try:
        for item in range(part, len(offsets), parts):
            offset = offsets[item]
            due = start + offset / speed
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            elif wait < -0.010:
                late += 1
            for index in range(targets):
                task = asyncio.ensure_future(send(index, item))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        await cancel_all(tasks)
    return late

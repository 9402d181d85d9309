"""Our own work per WebSocket event (issue 31's budget: at most 0.6 µs, and at most 5 % of the SDK's
own receive + parse per event).

The real SDK connection (``ResponsesConnection``, sync) reads from a stand-in websockets connection
whose ``recv`` hands the frame to its own ``process_event`` first, as websockets' reader does, then
returns the same ``response.output_text.delta`` bytes every time: no socket, no thread, so what is
measured is the SDK's ``recv`` (``recv_bytes`` + ``json.loads`` + its model build) and, instrumented,
our stamp in ``process_event``, the watcher of the connection's ``recv``, the ``parse_event`` path
(from the first turn on, the connection's own ``parse_event``) and the turn's
bookkeeping (``streams._on_chunk`` by arrival). A turn is open the whole time (one ``response.create``
and a ``response.created`` before the measured events); the end of a turn (its spans and metric
points) is per turn, not per event, and is not in these figures.

- wall time: ``--rounds`` rounds, each a batch of ``--events`` bare then instrumented (instrument()
  and uninstrument() between the two, same process), in alternating order; the median over rounds
  of (instrumented - bare) / events, and the bare batch's per-event time (the SDK's own);
- ``--instructions``: callgrind's instruction counts of the two modes at two batch sizes, so the
  start-up cancels out: (count(big) - count(small)) / (big - small) events, per mode;
- ``--cached-parse``: the SDK's model build replaced by the event it built for
  the same bytes before, so the SDK's part is ~21 K instructions instead of ~775 K and our part, the
  same code, stands out of less noise (ten times the events in the same time).

- ``--plain``: chunk_loop-style (``chunk_loop.py`` wraps a plain generator, not the SDK's stream):
  the parse cached as above, and the SDK connection's ``recv`` replaced by its core,
  ``parse_event(ws.recv(None, False))`` (the SDK's own ``recv_bytes`` imports, logs and records
  progress per message: ~19 K instructions of its code around ours). Our code is the same; what
  changes is how much of the SDK's code runs in the loop beside it, which sets how many
  instructions per ns the interpreter gets through (the SDK's code evicts ours from the caches).

- ``--asyncio``: the SDK's ``AsyncResponsesConnection`` over an asyncio stand-in (``recv(decode)``
  a coroutine, as websockets' asyncio connection's): our ``recv`` watcher is then a coroutine too.

- ``--against-sse``: ours per event and ``chunk_loop.py``'s SSE loop per chunk, interleaved in the
  same rounds, and their ratio (the VM's speed moves both alike).

- ``--parts``: wall time of the full path and of the path without our stamp, without our ``recv``
  watcher, without both (the ``parse_event`` path only), and without the hand-over's clock read
  (``int``, a C call that returns 0, in its place: what ``handover_delay.*`` costs per event), each
  against the bare SDK.

    python benchmarks/ws_event_loop.py [--events 20000] [--rounds 15] [--instructions] [--parts]
        [--cached-parse] [--plain] [--asyncio] [--against-sse]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

DELTA = json.dumps(
    {
        "type": "response.output_text.delta",
        "sequence_number": 7,
        "item_id": "msg_0123456789abcdef",
        "output_index": 0,
        "content_index": 0,
        "delta": " tok7",
        "logprobs": [],
    },
    separators=(",", ":"),
).encode()
CREATED = json.dumps(
    {
        "type": "response.created",
        "sequence_number": 0,
        "response": {"id": "resp_bench", "status": "in_progress"},
    }
).encode()
_COLLECTED = re.compile(rb"Collected : (\d+)")


class StandIn:
    """What the SDK uses of a websockets sync connection: ``recv``, ``send``, ``close``; ``recv`` runs
    ``process_event`` on the frame first, as websockets' reader thread does before queueing it."""

    def __init__(self) -> None:
        from websockets.frames import Frame, Opcode

        self.data = DELTA
        self.frame = Frame(Opcode.TEXT, DELTA)
        self.created_frame = Frame(Opcode.TEXT, CREATED)
        self.next_is_created = False

    def process_event(self, event: Any) -> None:
        pass  # websockets: into the receive queue

    def recv(self, timeout: float | None = None, decode: bool | None = None) -> bytes:
        if self.next_is_created:
            self.next_is_created = False
            self.process_event(self.created_frame)
            return CREATED
        self.process_event(self.frame)
        return self.data

    def send(self, data: Any) -> None:
        pass

    def close(self, code: int = 1000, reason: str = "") -> None:
        pass


PLAIN = False
"""``--plain``: connections of :func:`_plain_class` (set by :func:`main` or ``--child``)."""
ASYNC = False
"""``--asyncio``: the SDK's ``AsyncResponsesConnection`` over :class:`AsyncStandIn`."""


class AsyncStandIn(StandIn):
    """What the SDK uses of a websockets asyncio connection (``recv(decode)``, as websockets' own)."""

    async def recv(self, decode: bool | None = None) -> bytes:  # type: ignore[override]
        return StandIn.recv(self, None, decode)

    async def send(self, data: Any) -> None:  # type: ignore[override]
        pass


@functools.cache
def _plain_class(asynchronous: bool) -> Any:
    from openai.resources.responses.responses import AsyncResponsesConnection, ResponsesConnection

    class _PlainConnection(ResponsesConnection):
        """The SDK's connection with ``recv`` cut to its core: ``parse_event(recv_bytes())`` where
        ``recv_bytes`` is the websockets connection's ``recv`` alone."""

        def recv(self) -> Any:
            return self.parse_event(self._connection.recv(None, False))

    class _AsyncPlainConnection(AsyncResponsesConnection):
        async def recv(self) -> Any:
            return self.parse_event(await self._connection.recv(False))

    return _AsyncPlainConnection if asynchronous else _PlainConnection


def _connection(instrumented: bool) -> Any:
    from openai.resources.responses.responses import AsyncResponsesConnection, ResponsesConnection

    from openai_latency.websocket import arrivals

    ws = AsyncStandIn() if ASYNC else StandIn()
    sdk = AsyncResponsesConnection if ASYNC else ResponsesConnection
    connection = (_plain_class(ASYNC) if PLAIN else sdk)(ws)  # type: ignore[arg-type]
    if instrumented:
        arrivals.install(ws)  # what the handshake wrapper does
        _await(connection.send({"type": "response.create", "model": "gpt-4o-mini", "input": "hi"}))
        ws.next_is_created = True
        _await(connection.recv())
    return connection


@functools.cache
def _loop() -> asyncio.AbstractEventLoop:
    return asyncio.new_event_loop()


def _await(result: Any) -> Any:
    """What a call of the SDK connection returned: awaited on the benchmark's loop with ``--asyncio``."""
    return _loop().run_until_complete(result) if ASYNC else result


def batch(connection: Any, events: int) -> int:
    if ASYNC:
        return int(_await(_async_batch(connection, events)))
    recv = connection.recv
    start = time.perf_counter_ns()
    for _ in range(events):
        recv()
    return time.perf_counter_ns() - start


async def _async_batch(connection: Any, events: int) -> int:
    recv = connection.recv
    start = time.perf_counter_ns()
    for _ in range(events):
        await recv()
    return time.perf_counter_ns() - start


PARTS = ("full", "no stamp", "no watcher", "parse path only", "no hand-over clock")


def _part_connection(part: str) -> Any:
    """An instrumented connection without our stamp (websockets' own ``process_event``, bound on the
    instance as ours is) and/or without our ``recv`` watcher, for :func:`parts`."""
    connection = _connection(True)
    ws = connection._connection
    if part in ("no stamp", "parse path only"):
        ws.__dict__["process_event"] = type(ws).process_event.__get__(ws)
    if part in ("no watcher", "parse path only"):
        ws.__dict__.pop("recv", None)
    return connection


@contextlib.contextmanager
def _handover_clock(read: bool) -> Iterator[None]:
    """The fused path's hand-over clock read as it is (``read``), or ``int`` in its place."""
    from openai_latency.websocket import responses

    clock = responses.clock
    if not read:
        responses.clock = int  # type: ignore[assignment]
    try:
        yield
    finally:
        responses.clock = clock


def _rounds(modes: tuple[str, ...], events: int, rounds: int) -> dict[str, list[float]]:
    """ns per event of each mode (``bare``: the SDK alone; any other: instrumented, its connection
    from :func:`_part_connection`), every mode in every round, in reversed order every other round."""
    from openai_latency import OpenAILatencyInstrumentor

    provider = TracerProvider()
    instrumentor = OpenAILatencyInstrumentor()
    for _ in range(2):  # warm: model builds, caches
        batch(_connection(False), 2000)
    gc.collect()
    gc.freeze()
    per_event: dict[str, list[float]] = {mode: [] for mode in modes}
    for index in range(rounds):
        for mode in modes if index % 2 == 0 else tuple(reversed(modes)):
            if mode.startswith("sse"):
                per_event[mode].append(_sse_batch(mode == "sse ours", events) / events)
                continue
            if mode != "bare":
                instrumentor.instrument(tracer_provider=provider)
            connection = _connection(False) if mode == "bare" else _part_connection(mode)
            with _handover_clock(mode != "no hand-over clock"):
                batch(connection, 200)
                per_event[mode].append(batch(connection, events) / events)
            if mode != "bare":
                instrumentor.uninstrument()
    return per_event


def _sse_batch(wrapped: bool, chunks: int) -> int:
    """``chunk_loop.py``'s measurement: a plain generator of one real chat chunk, bare or through
    our SSE loop (``traced_stream``), ns for ``chunks`` chunks."""
    import chunk_loop

    from openai_latency.call.operation import Operation
    from openai_latency.clock import clock
    from openai_latency.config import load_settings
    from openai_latency.model import Telemetry

    item = chunk_loop._chunk("answer")
    if not wrapped:
        return chunk_loop._drain(chunk_loop._source(item, chunks))
    telemetry = Telemetry(TracerProvider().get_tracer("bench"), None, load_settings({}))
    op = Operation(telemetry, chunk_loop.CHAT, "chat bench", {}, clock())
    op.timeline.streaming = True
    return chunk_loop._drain(chunk_loop.traced_stream(chunk_loop._source(item, chunks), op))


def against_sse(events: int, rounds: int) -> None:
    """Ours per WebSocket event and ours per SSE chunk (``chunk_loop.py``) in the same rounds: the VM's
    speed, which moves by up to 2x between hours, moves both alike, and their ratio stays."""
    times = _rounds(("bare", "full", "sse bare", "sse ours"), events, rounds)
    ws = [full - bare for full, bare in zip(times["full"], times["bare"], strict=True)]
    sse = [ours - bare for ours, bare in zip(times["sse ours"], times["sse bare"], strict=True)]
    ratios = sorted(w / s for w, s in zip(ws, sse, strict=True))
    print(f"wall time, median of {rounds} interleaved rounds of {events} events and {events} SSE chunks:")
    print(f"  ours per WebSocket event: {statistics.median(ws) / 1000:.3f} µs")
    print(f"  ours per SSE chunk:       {statistics.median(sse) / 1000:.3f} µs (chunk_loop.py)")
    low, high = ratios[0], ratios[-1]
    print(f"  ratio, per round: median {statistics.median(ratios):.2f}, from {low:.2f} to {high:.2f}")


def wall(events: int, rounds: int) -> None:
    times = _rounds(("bare", "full"), events, rounds)
    bare_ns = times["bare"]
    ours_ns = [full - bare for full, bare in zip(times["full"], bare_ns, strict=True)]
    bare, ours = statistics.median(bare_ns), statistics.median(ours_ns)
    print(f"wall time, median of {rounds} rounds of {events} events:")
    print(f"  the SDK's own recv + parse per event: {bare / 1000:.2f} µs")
    print(f"  ours per event:                       {ours / 1000:.3f} µs ({ours / bare:.1%} of the SDK's)")
    print(f"  ours per event, each round (µs): {', '.join(f'{x / 1000:.3f}' for x in ours_ns)}")


def parts(events: int, rounds: int) -> None:
    """Wall time of each part of ours: the full path and the path without one or two of its hooks,
    each against the bare SDK of the same round."""
    times = _rounds(("bare", *PARTS), events, rounds)
    print(f"wall time added per event, median of {rounds} rounds of {events} events:")
    for part in PARTS:
        added = statistics.median([x - bare for x, bare in zip(times[part], times["bare"], strict=True)])
        print(f"  {part:16} {added / 1000:.3f} µs")


def _cache_parse() -> None:
    """The SDK's ``parse_event`` returns the event it built for the same bytes before (before
    ``instrument()``: our wrapper, and the connection's own ``parse_event``, call this one)."""
    from openai.resources.responses.responses import AsyncResponsesConnection, ResponsesConnection

    built: dict[Any, Any] = {}
    for sdk in (ResponsesConnection, AsyncResponsesConnection):
        sdk.parse_event = _cached(sdk.parse_event, built)  # type: ignore[method-assign]


def _cached(build: Any, built: dict[Any, Any]) -> Any:
    def parse_event(self: Any, data: Any) -> Any:
        event = built.get(data)
        if event is None:
            event = built[data] = build(self, data)
        return event

    return parse_event


def _run_mode(mode: str, events: int, cached_parse: bool) -> None:
    """One process under callgrind: warm, then ``events`` events of ``mode``."""
    from openai_latency import OpenAILatencyInstrumentor

    if cached_parse:
        _cache_parse()

    instrumented = mode == "ours"
    if instrumented:
        OpenAILatencyInstrumentor().instrument(tracer_provider=TracerProvider())
    connection = _connection(instrumented)
    batch(connection, 500)
    gc.collect()
    gc.freeze()
    batch(connection, events)


def count(mode: str, events: int, cached_parse: bool) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
        mode,
        "--events",
        str(events),
        *(["--cached-parse"] if cached_parse else []),
        *(["--plain"] if PLAIN else []),
        *(["--asyncio"] if ASYNC else []),
    ]
    result = subprocess.run(command, capture_output=True, check=True, env={"PYTHONHASHSEED": "0", **_env()})
    found = _COLLECTED.search(result.stderr)
    if found is None:
        raise SystemExit(result.stderr.decode(errors="replace")[-2000:])
    return int(found.group(1))


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def instructions(small: int, big: int, cached_parse: bool) -> None:
    per = {}
    for mode in ("bare", "ours"):
        low, high = count(mode, small, cached_parse), count(mode, big, cached_parse)
        per[mode] = (high - low) / (big - small)
    print(f"instructions per event (callgrind, ({big} - {small} events)):")
    sdk = "recv core + cached parse" if PLAIN else "recv + cached parse" if cached_parse else "recv + parse"
    print(f"  the SDK's own {sdk}: {per['bare']:.0f}")
    ours = per["ours"] - per["bare"]
    print(f"  ours: {ours:.0f} ({ours / per['bare']:.1%} of the SDK's)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--instructions", action="store_true", help="callgrind counts instead of wall time")
    parser.add_argument("--cached-parse", action="store_true", help="the SDK's model build cached")
    parser.add_argument(
        "--plain", action="store_true", help="chunk_loop-style: the SDK's recv cut to its core"
    )
    parser.add_argument(
        "--against-sse", action="store_true", help="interleaved with chunk_loop.py's SSE loop"
    )
    parser.add_argument("--asyncio", action="store_true", help="the SDK's asyncio connection")
    parser.add_argument(
        "--parts", action="store_true", help="wall time without the stamp, the watcher, the hand-over clock"
    )
    parser.add_argument("--child", choices=("bare", "ours"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    global PLAIN, ASYNC
    PLAIN, ASYNC = args.plain, args.asyncio
    args.cached_parse = args.cached_parse or args.plain
    if args.child:
        _run_mode(args.child, args.events, args.cached_parse)
    elif args.instructions:
        instructions(1000, 1000 + args.events // (1 if args.cached_parse else 4), args.cached_parse)
    else:
        if args.cached_parse:
            _cache_parse()
        (against_sse if args.against_sse else parts if args.parts else wall)(args.events, args.rounds)


if __name__ == "__main__":
    main()

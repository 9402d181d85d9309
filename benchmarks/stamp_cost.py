"""What a stamp written in C would save per WebSocket event (issue 31's 0.6 µs line).

``stamp_cost.c`` is the arrival stamp of ``websocket/arrivals.py`` as a C callable (an experiment,
not part of the package). This builds it with the running interpreter's headers (``cc``), checks that
it stamps what the Python stamp stamps, then times both:

- per call: websockets' reader calling the connection's ``process_event`` (the stand-in's own, a
  no-op, as in ``ws_event_loop.py``), our Python stamp in front of it (``arrivals.install``), and the
  C stamp in front of it, in interleaved rounds, the median ns per call;
- per event: ``ws_event_loop.py --plain --against-sse``'s measurement with a third mode, the full path
  with the C stamp in place of ours, in the same interleaved rounds.

    python benchmarks/stamp_cost.py [--events 100000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sysconfig
import tempfile
import time
from collections import deque
from pathlib import Path
from types import ModuleType
from typing import Any

import ws_event_loop

SOURCE = Path(__file__).with_name("stamp_cost.c")


def build(directory: str) -> ModuleType:
    target = Path(directory) / f"stamp_cost_c{sysconfig.get_config_var('EXT_SUFFIX')}"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        ["cc", "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", str(target)], check=True
    )
    spec = importlib.util.spec_from_file_location("stamp_cost_c", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def c_stamp(compiled: ModuleType, stamps: deque[tuple[int, int]], original: Any) -> Any:
    from websockets.frames import Opcode

    return compiled.Stamp(stamps.append, original, Opcode.TEXT, Opcode.BINARY, Opcode.CONT)


def check(compiled: ModuleType) -> None:
    """The C stamp stamps what the Python stamp stamps: sizes of whole messages, never a control frame."""
    from websockets.frames import Frame, Opcode

    from openai_latency.websocket import arrivals

    frames = [
        Frame(Opcode.TEXT, b"abc"),
        Frame(Opcode.PING, b"x"),
        Frame(Opcode.TEXT, b"ab", fin=False),
        Frame(Opcode.CONT, b"abcd"),
        Frame(Opcode.BINARY, b"z" * 300),
    ]
    ws = ws_event_loop.StandIn()
    ours = arrivals.install(ws)
    assert ours is not None
    theirs: deque[tuple[int, int]] = deque()
    stamp = c_stamp(compiled, theirs, ws_event_loop.StandIn.process_event.__get__(ws))
    for frame in frames:
        ws.process_event(frame)
        stamp(frame)
    assert [size for _, size in ours] == [size for _, size in theirs] == [3, 6, 300], (ours, theirs)


def per_call(compiled: ModuleType, calls: int, rounds: int) -> None:
    from websockets.frames import Frame, Opcode

    from openai_latency.websocket import arrivals

    frame = Frame(Opcode.TEXT, ws_event_loop.DELTA)
    ws = ws_event_loop.StandIn()
    original = ws.process_event
    stamps = arrivals.install(ws)
    assert stamps is not None
    callers = {"websockets' own": original, "Python stamp": ws.process_event}
    callers["C stamp"] = c_stamp(compiled, stamps, original)
    times: dict[str, list[float]] = {name: [] for name in callers}
    for index in range(rounds):
        for name in callers if index % 2 == 0 else reversed(callers):
            call = callers[name]
            start = time.perf_counter_ns()
            for _ in range(calls):
                call(frame)
            times[name].append((time.perf_counter_ns() - start) / calls)
            stamps.clear()
    print(f"per call, median of {rounds} interleaved rounds of {calls}:")
    for name, values in times.items():
        print(f"  {name:16} {statistics.median(values):6.1f} ns")


def per_event(compiled: ModuleType, events: int, rounds: int) -> None:
    from openai_latency.websocket.arrivals import ATTRIBUTE

    part_connection = ws_event_loop._part_connection

    def connection(part: str) -> Any:
        if part != "C stamp":
            return part_connection(part)
        made = part_connection("full")
        ws = made._connection
        ws.__dict__["process_event"] = c_stamp(
            compiled, ws.__dict__[ATTRIBUTE], type(ws).process_event.__get__(ws)
        )
        return made

    ws_event_loop._part_connection = connection
    modes = ("bare", "full", "C stamp", "sse bare", "sse ours")
    times = ws_event_loop._rounds(modes, events, rounds)
    added = {
        mode: [x - bare for x, bare in zip(times[mode], times["bare"], strict=True)]
        for mode in ("full", "C stamp")
    }
    sse = [ours - bare for ours, bare in zip(times["sse ours"], times["sse bare"], strict=True)]
    print(f"per event (--plain), median of {rounds} interleaved rounds of {events}:")
    print(f"  ours, Python stamp:  {statistics.median(added['full']) / 1000:.3f} µs")
    print(f"  ours, C stamp:       {statistics.median(added['C stamp']) / 1000:.3f} µs")
    print(f"  the SSE loop:        {statistics.median(sse) / 1000:.3f} µs per chunk (chunk_loop.py)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        compiled = build(directory)
        check(compiled)
        per_call(compiled, args.events * 3, args.rounds)
        ws_event_loop.PLAIN = True
        ws_event_loop._cache_parse()
        per_event(compiled, args.events, args.rounds)


if __name__ == "__main__":
    main()

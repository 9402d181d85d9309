"""Running ``openai-latency`` as a user does (a subprocess) and reading what the fake servers saw."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openai_latency.fake_server import FakeServer, SpawnedServer
from openai_latency.fake_server.records import RequestRecord

COMMAND = str(Path(sys.executable).with_name("openai-latency"))


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.out)
        return data


def run_cli(args: Sequence[str], timeout: float = 120, env: dict[str, str] | None = None) -> Result:
    environment = {**os.environ, "OPENAI_API_KEY": "sk-test-bench", "NO_COLOR": "1", **(env or {})}
    done = subprocess.run(
        [COMMAND, *args], capture_output=True, text=True, timeout=timeout, env=environment, check=False
    )
    return Result(done.returncode, done.stdout, done.stderr)


def servers(stack: ExitStack, *defaults: dict[str, object]) -> list[SpawnedServer]:
    """One fake server subprocess per script (off the bench client's CPU)."""
    return [stack.enter_context(FakeServer.spawn(d)) for d in defaults]


def chat_records(server: SpawnedServer) -> list[RequestRecord]:
    return [r for r in server.records(wait=5.0) if r.path.endswith("/chat/completions")]


def by_target(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["key"]["target"]: entry for entry in report["results"]}


def percentiles(values: Sequence[float]) -> tuple[float, float, float]:
    """p50/p95/p99 by linear interpolation between closest ranks, written out independently."""
    ordered = sorted(values)

    def at(q: float) -> float:
        h = (len(ordered) - 1) * q
        low = int(h)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (h - low) * (ordered[high] - ordered[low])

    return at(0.5), at(0.95), at(0.99)


def max_in_flight(records: Sequence[RequestRecord]) -> int:
    """Most requests the server held at once (arrival to the end of its answer)."""
    events = []
    for record in records:
        assert record.finished_ns is not None
        events += [(record.received_ns, 1), (record.finished_ns, -1)]
    level = peak = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        level += step
        peak = max(peak, level)
    return peak

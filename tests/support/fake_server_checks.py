"""What the fake server's own tests share: script headers, a raw HTTP request, gaps between logged
times, scenarios run side by side, and :class:`Lateness`, the split of a scripted delay's check into
its lower bound (deterministic: the server never writes early) and its upper bound (timing)."""

from __future__ import annotations

import http.client
import itertools
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from openai_latency.fake_server import FakeServer

MS = 1_000_000
#: Upper-bound slack of timing checks: scheduling noise on a loaded 2-CPU machine (lower bounds are exact).
SLACK_MS = 20
SRC = str(Path(__file__).resolve().parents[2] / "src")
MESSAGES: Any = [{"role": "user", "content": "say something nice"}]


def fake(**script: object) -> dict[str, str]:
    """``extra_headers`` for a script: fake(delay_ms=100) -> {"x-fake-delay-ms": "100"}."""
    return {f"x-fake-{key.replace('_', '-')}": str(value) for key, value in script.items()}


def raw(
    server: FakeServer, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        payload = json.dumps(body) if body is not None else None
        conn.request(method, path, payload, {"content-type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response, response.read()
    finally:
        conn.close()


def gaps_ms(times: list[int]) -> list[float]:
    return [(b - a) / MS for a, b in itertools.pairwise(times)]


def run_concurrently(*scenarios: Callable[[], object]) -> None:
    with ThreadPoolExecutor(len(scenarios)) as pool:
        for future in [pool.submit(s) for s in scenarios]:
            future.result()


class Lateness:
    """A scenario's scripted times, checked in two halves: :meth:`at_least` asserts the lower bound at
    once (the server sleeps at least what was scripted: a miss is a bug) and keeps how late the time
    came; :meth:`check` is the timing half, for :func:`tests.support.retry.retry_timing`."""

    def __init__(self) -> None:
        #: (what, ms past the scripted time, the slack it may take)
        self.late: list[tuple[str, float, float]] = []

    def at_least(
        self, value_ms: float, scripted_ms: float, what: str, below: float = 0.0, slack: float = SLACK_MS
    ) -> None:
        """``value_ms`` is no less than ``scripted_ms`` (minus ``below``), and at most ``slack`` more."""
        assert value_ms >= scripted_ms - below, f"{what}: {value_ms:.2f} ms, scripted {scripted_ms} ms"
        self.late.append((what, value_ms - scripted_ms, slack))

    def paced(self, gaps: list[float], pace_ms: float, what: str, mean_slack: float) -> None:
        """Every gap at least the pace, none far above it, and on average within ``mean_slack`` of it."""
        assert gaps, what
        for gap in gaps:
            self.at_least(gap, pace_ms, what)
        self.late.append((f"{what}, mean", sum(gaps) / len(gaps) - pace_ms, mean_slack))

    def check(self) -> None:
        misses = [(what, round(late, 2), slack) for what, late, slack in self.late if late > slack]
        assert not misses, misses

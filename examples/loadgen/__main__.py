"""Small load generator for the example backend: a weighted mix of LLM call scenarios.

    python -m examples.loadgen --target http://127.0.0.1:8080 --rps 2 --duration 60

Each request is one turn of the backend's ``/ask`` (a planning call, a tool, a query, the answer
call) with ``x-fake-*`` headers that the backend forwards to both LLM calls of the fake LLM server,
so the dashboards show fast and slow models, slow first tokens, long streams, retried 429s and
failures side by side. Every request also sends ``x-fake-tool-plan: search_documents``: the
planning call answers with a call of the backend's tool, as a model would. The loop is bounded: it stops after
``--duration`` seconds or ``--max-requests`` requests, whichever comes first. Standard library
only.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Scenario:
    name: str
    weight: int
    model: str
    stream: bool
    headers: dict[str, str] = field(default_factory=dict)


# Header names and meanings: see the fake server (openai_latency.fake_server).
#: Sent with every scenario: the turn's first call asks for the tool, the second answers.
TURN_HEADERS = {"x-fake-tool-plan": "search_documents"}
SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "fast-stream",
        14,
        "gpt-4o-mini",
        True,
        # the fake server also sends llama.cpp-shaped timings (the dashboard's client vs server panel)
        {
            "x-fake-ttft-ms": "120",
            "x-fake-chunks": "30",
            "x-fake-chunk-delay-ms": "15",
            "x-fake-server-timings": "llama",
        },
    ),
    Scenario("fast-json", 20, "gpt-4o-mini", False, {"x-fake-delay-ms": "250"}),
    Scenario(
        "big-model-stream",
        15,
        "gpt-4o",
        True,
        {"x-fake-ttft-ms": "600", "x-fake-chunks": "60", "x-fake-chunk-delay-ms": "30"},
    ),
    Scenario(
        "slow-first-token",
        8,
        "gpt-4o",
        True,
        {"x-fake-ttft-ms": "2500", "x-fake-chunks": "20", "x-fake-chunk-delay-ms": "20"},
    ),
    Scenario(
        "reasoning-json",
        7,
        "o3-mini",
        False,
        {"x-fake-delay-ms": "1800", "x-fake-reasoning-tokens": "200", "x-fake-reasoning-mode": "hidden"},
    ),
    Scenario(
        "reasoning-stream",
        16,
        "deepseek-reasoner",
        True,
        {
            "x-fake-ttft-ms": "150",
            "x-fake-reasoning-tokens": "40",
            "x-fake-reasoning-delay-ms": "15",
            "x-fake-chunks": "20",
            "x-fake-chunk-delay-ms": "20",
        },
    ),
    Scenario(
        "retried-429",
        10,
        "gpt-4o-mini",
        True,
        {
            "x-fake-fail-attempts": "1",
            "x-fake-fail-status": "429",
            "x-fake-retry-after-ms": "200",
            "x-fake-ttft-ms": "150",
            "x-fake-chunks": "20",
            "x-fake-chunk-delay-ms": "15",
        },
    ),
    Scenario("server-error", 5, "gpt-4o", False, {"x-fake-error": "server_error"}),
    Scenario("unknown-model", 5, "gpt-does-not-exist", False, {"x-fake-error": "model_not_found"}),
)


def pick(rng: random.Random) -> Scenario:
    return rng.choices(SCENARIOS, weights=[s.weight for s in SCENARIOS], k=1)[0]


def call(target: str, scenario: Scenario, timeout: float) -> str:
    query = urllib.parse.urlencode(
        {"q": f"loadgen {scenario.name}", "model": scenario.model, "stream": str(scenario.stream).lower()}
    )
    headers = {**TURN_HEADERS, **scenario.headers}
    req = urllib.request.Request(f"{target.rstrip('/')}/ask?{query}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read()
            return str(resp.status)
    except urllib.error.HTTPError as exc:
        return str(exc.code)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        return type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", default="http://127.0.0.1:8080", help="base URL of the example backend")
    parser.add_argument("--rps", type=float, default=2.0, help="requests started per second")
    parser.add_argument("--duration", type=float, default=60.0, help="stop after this many seconds")
    parser.add_argument("--max-requests", type=int, default=10_000, help="stop after this many requests")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight at most")
    parser.add_argument("--timeout", type=float, default=60.0, help="per-request timeout, seconds")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    if args.rps <= 0 or args.duration <= 0 or args.max_requests <= 0 or args.concurrency <= 0:
        parser.error("--rps, --duration, --max-requests and --concurrency must be positive")

    rng = random.Random(args.seed)
    results: Counter[tuple[str, str]] = Counter()
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(args.concurrency)

    def run(scenario: Scenario) -> None:
        try:
            outcome = call(args.target, scenario, args.timeout)
            with lock:
                results[(scenario.name, outcome)] += 1
        finally:
            slots.release()

    interval = 1.0 / args.rps
    deadline = time.monotonic() + args.duration
    sent = 0
    print(f"loadgen: {args.rps} rps to {args.target} for {args.duration:.0f} s", flush=True)
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        next_at = time.monotonic()
        while sent < args.max_requests and time.monotonic() < deadline:
            slots.acquire()
            pool.submit(run, pick(rng))
            sent += 1
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))
            if sent % 100 == 0:
                with lock:
                    print(f"loadgen: {sent} sent, {sum(results.values())} done", flush=True)
    for (name, outcome), count in sorted(results.items()):
        print(f"{name:20s} {outcome:>16s} {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

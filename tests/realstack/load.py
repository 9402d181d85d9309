"""Load for the real stack: the load generator's own scenarios, each a fixed number of times.

Each request is one ``/ask`` turn of the example backend: two LLM calls (the planning call and the
answer) when it answered 200, the planning call alone when that failed."""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from examples.loadgen.__main__ import SCENARIOS, Scenario, call


def scripted(target: str, per_scenario: int, concurrency: int = 8) -> Counter[tuple[str, str]]:
    """Every scenario of examples.loadgen ``per_scenario`` times; (scenario, HTTP status) counts."""
    jobs = [s for s in SCENARIOS for _ in range(per_scenario)]
    return run(target, jobs, concurrency)


def run(target: str, jobs: list[Scenario], concurrency: int = 8) -> Counter[tuple[str, str]]:
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        outcomes = list(pool.map(lambda s: (s.name, call(target, s, 60.0)), jobs))
    return Counter(outcomes)


def llm_calls(outcomes: Counter[tuple[str, str]]) -> int:
    """The LLM calls behind these (scenario, HTTP status) counts of ``/ask`` turns."""
    return sum(count * (2 if status == "200" else 1) for (_, status), count in outcomes.items())


def scenario(name: str, model: str, stream: bool, **headers: str) -> Scenario:
    return Scenario(name, 1, model, stream, {f"x-fake-{k.replace('_', '-')}": v for k, v in headers.items()})


_SUMMARY = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)$")


def loadgen_summary(output: str) -> Counter[tuple[str, str]]:
    """The load generator's closing table: scenario, outcome, count per line."""
    counts: Counter[tuple[str, str]] = Counter()
    for line in output.splitlines():
        match = _SUMMARY.match(line.strip())
        if match:
            counts[(match.group(1), match.group(2))] += int(match.group(3))
    return counts

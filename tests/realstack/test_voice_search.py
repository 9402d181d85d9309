"""The searches docs/STACK.md documents for a voice session's slow turns ("Finding the slow turns of a
voice session"), run on the pinned Jaeger through the project's collector config.

tests/realstack/voice_session.py runs five Realtime sessions against the fake server (started with
the compose fake-llm command), each session its own trace, exported over OTLP to the collector
(collector/otelcol.yaml) and on to Jaeger (deploy/jaeger/config.yaml). As in test_jaeger_search.py,
each search goes through Jaeger's HTTP API (what the UI's search form sends), must find exactly the
sessions it should, and its text must appear in docs/STACK.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .apis import JaegerApi, Trace, get_json
from .components import Binaries, start_fake_llm, start_traces
from .procs import ROOT, Stack, wait_until
from .test_jaeger_search import STACK_DOC, Search, found
from .voice_session import MODEL, SERVICE, SESSIONS, SLOW_MS, TURN

TURNS = {"quick": 3, "slow-network": 3, "slow-first-audio": 3, "server-vad": 2, "barge-in": 1}
ALL = frozenset(SESSIONS)

SEARCHES = (
    Search("every voice turn", ALL, {"openai_latency.transport": "websocket"}, operation=TURN),
    # slow turns: the turn's own span, by name and duration (without the name, the session's span
    # matches: it lasts the whole conversation)
    Search("slow turns", found("slow-network", "slow-first-audio"), operation=TURN, min_duration="1s"),
    # why slow: the phase that took the most of the turn
    Search(
        "slow turns, the server slow to start",
        found("slow-network"),
        {"openai_latency.dominant_phase": "network_wait"},
        operation=TURN,
        min_duration="1s",
    ),
    Search(
        "slow turns, slow to the first audio",
        found("slow-first-audio"),
        {"openai_latency.dominant_phase": "first_token"},
        operation=TURN,
        min_duration="1s",
    ),
    Search(
        "turns server VAD started",
        found("server-vad"),
        {"openai_latency.realtime.trigger": "speech_stopped"},
        operation=TURN,
    ),
    Search("barge-ins", found("barge-in"), {"openai_latency.stream.end_state": "cancelled"}),
)


@dataclass
class Sessions:
    jaeger: JaegerApi
    trace_ids: dict[str, str]  # session name -> trace id

    def search(self, search: Search) -> frozenset[str]:
        params = {"service": SERVICE, "lookback": "1h", "limit": "1000"}
        if search.tags:
            params["tags"] = json.dumps(search.tags)
        if search.operation:
            params["operation"] = search.operation
        if search.min_duration:
            params["minDuration"] = search.min_duration
        body = get_json(f"{self.jaeger.url}/api/traces?{urllib.parse.urlencode(params)}", timeout=30)
        assert not body.get("errors"), body["errors"]
        by_id = {tid: name for name, tid in self.trace_ids.items()}
        traces = body["data"] or []
        return frozenset(by_id.get(str(t["traceID"]).zfill(32), f"other {t['traceID']}") for t in traces)

    def trace(self, name: str) -> Trace:
        trace = self.jaeger.trace(self.trace_ids[name])
        assert trace is not None, name
        return trace


@pytest.fixture(scope="module")
def sessions(binaries: Binaries, module_dir: Path) -> Iterator[Sessions]:
    with Stack(module_dir) as stack:
        jaeger, collector = start_traces(stack, binaries, module_dir / "otlp")
        _, base_url = start_fake_llm(stack, "fake-llm")
        otlp = collector.otlp_endpoint
        argv = ["-m", "tests.realstack.voice_session", "--otlp", otlp, "--base-url", base_url]
        result = subprocess.run(
            [sys.executable, *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        run = Sessions(JaegerApi(jaeger.url), json.loads(result.stdout.splitlines()[-1]))

        def all_in_jaeger() -> list[str]:
            for name, turns in TURNS.items():
                trace = run.jaeger.trace(run.trace_ids[name])
                if trace is None or not trace.named("voice session") or len(trace.named(TURN)) < turns:
                    return []
            return ["all"]

        wait_until(all_in_jaeger, timeout=40, what="every voice session's trace in Jaeger")
        yield run


def test_each_session_is_one_trace_of_its_turns(sessions: Sessions) -> None:
    for name, turns in TURNS.items():
        trace = sessions.trace(name)
        [session] = trace.named("voice session")
        assert trace.root == session, name
        spans = trace.named(TURN)
        assert len(spans) == turns, name
        for turn in spans:
            assert turn.parent_id == session.span_id
            assert turn.tags["gen_ai.request.model"] == MODEL
            assert turn.tags["openai_latency.time_to_first_audio"] > 0
        print(f"  {name:18} {turns} turns under its voice session span")


def test_documented_voice_searches_find_exactly_the_expected_sessions(sessions: Sessions) -> None:
    doc = STACK_DOC.read_text()
    wrong = []
    for search in SEARCHES:
        for text in filter(None, (search.typed, search.operation, search.min_duration)):
            assert text in doc, f"docs/STACK.md does not show the search {text!r} ({search.what})"
        got = sessions.search(search)
        label = f"{search.typed} operation={search.operation} minDuration={search.min_duration}"
        print(f"  {label:100} -> {sorted(got)}")
        if got != search.expected:
            wrong.append(f"{search.what}: {label}: found {sorted(got)}, expected {sorted(search.expected)}")
    assert not wrong, "\n".join(wrong)


def test_the_slow_turn_in_its_session_and_its_numbers(sessions: Sessions) -> None:
    """Inside a found session, the slow turn is the one over a second, and its attributes say where
    the time went: the server's wait to response.created, or the wait to the first audio."""
    for name, phase in (("slow-network", "network_wait"), ("slow-first-audio", "first_token")):
        trace = sessions.trace(name)
        slow = [t for t in trace.named(TURN) if t.tags["openai_latency.dominant_phase"] == phase]
        assert len(slow) == 1, (name, [t.tags["openai_latency.dominant_phase"] for t in trace.named(TURN)])
        [turn] = slow
        [phase_span] = [s for s in trace.children(turn) if s.name == f"openai.{phase}"]
        assert phase_span is not None
        ttfa = turn.tags["openai_latency.time_to_first_audio"]
        assert ttfa >= SLOW_MS / 1000, (name, ttfa)
        print(f"  {name}: the slow turn's time_to_first_audio {ttfa:.3f} s, dominant phase {phase}")

"""The example backend's ``/ask`` is one small agent turn: its trace's exact span tree, and where
``openai-latency report --by trace`` puts each span's time.

The backend as users run it (``opentelemetry-instrument uvicorn examples.backend.app:app``: FastAPI's
instrumentation and ours, the default phase spans), exporting over OTLP/HTTP to this test's
receiver; the fake LLM server plays a model that calls the backend's tool (``x-fake-tool-plan:
search_documents``). What the backend exported is written as the collector's file exporter writes
it, and the report reads that file: the tool's time is ``tool``, the query's ``other``, the two
calls' ``llm``, the rest the app's own (``self``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from openai_latency.fake_server import RequestRecord, SpawnedServer
from tests.support.cli_runs import run_cli
from tests.support.otlp_files import request_json

from .conftest import BackendSpec, backend_env
from .otlp_receiver import OtlpReceiver, Span
from .processes import Backend
from .traces import Trace

SPEC = BackendSpec("turn", "http/protobuf", propagate=True)
SERVER, CHAT = "GET /ask", "chat gpt-4o-mini"
TOOL, QUERY = "execute_tool search_documents", "SELECT documents"
TOOL_MS, DB_MS = 60, 25
#: Scripted delays sleep at least as long; the loop's clock may wake them this much early.
EARLY_S = 0.002
PLAN_PHASES = ("openai.request_build", "openai.network_wait", "openai.response_read")
ANSWER_PHASES = ("openai.request_build", "openai.network_wait", "openai.first_token", "openai.stream_drain")
#: (name, kind, children): the whole tree of the turn's trace, children in start order
TREE = (
    SERVER,
    "SERVER",
    (
        (CHAT, "CLIENT", tuple((phase, "INTERNAL", ()) for phase in PLAN_PHASES)),
        (TOOL, "INTERNAL", ()),
        (QUERY, "CLIENT", ()),
        (CHAT, "CLIENT", tuple((phase, "INTERNAL", ()) for phase in ANSWER_PHASES)),
    ),
)


@pytest.fixture(scope="module")
def turn(
    receiver: OtlpReceiver, fake_llm: SpawnedServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Trace]:
    """One streamed /ask turn in a trace of the test's own, once its server span (it ends last)
    arrived."""
    env = backend_env(SPEC, receiver, fake_llm)
    env["OPENAI_LATENCY_PHASE_SPANS"] = "phases"  # the default: no http.* spans below the phases
    with Backend(env, tmp_path_factory.mktemp("e2e-turn") / "backend.log", startup_timeout=25.0) as backend:
        trace_id = secrets.token_hex(16)
        query = urlencode(
            {"q": "turn", "model": "gpt-4o-mini", "stream": "true", "tool_ms": TOOL_MS, "db_ms": DB_MS}
        )
        headers = {
            "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01",
            "x-fake-tool-plan": "search_documents",
        }
        status, body = backend.get(f"/ask?{query}", headers)
        assert status == 200, f"/ask answered {status}: {body[:300]!r}\n{backend.output()[-3000:]}"
        assert body.count(b"tok") == 4, body  # the fake_llm fixture's chunks

        def probe() -> Trace | None:
            spans = [s for s in receiver.spans() if s.trace_id == trace_id]
            return Trace(trace_id, spans) if any(s.name == SERVER for s in spans) else None

        try:
            yield receiver.wait_for(f"trace {trace_id}", probe, 10.0)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\nbackend output:\n{backend.output()[-3000:]}") from None


def tree(trace: Trace, span: Span) -> tuple[Any, ...]:
    children = sorted(trace.children(span), key=lambda s: s.start_ns)
    return (span.name, span.kind, tuple(tree(trace, child) for child in children))


def seconds(span: Span) -> float:
    return (span.end_ns - span.start_ns) / 1e9


def records_of(fake: SpawnedServer, trace_id: str) -> list[RequestRecord]:
    return sorted(
        (r for r in fake.records() if trace_id in r.headers.get("traceparent", "")),
        key=lambda r: r.received_ns,
    )


def test_the_turn_is_one_trace_of_exactly_this_tree(turn: Trace, fake_llm: SpawnedServer) -> None:
    (root,) = turn.roots()
    assert tree(turn, root) == TREE, turn.outline()
    assert len(turn.spans) == 1 + 2 + len(PLAN_PHASES) + 2 + len(ANSWER_PHASES), turn.outline()

    plan, tool, query, answer = sorted(turn.children(root), key=lambda s: s.start_ns)
    # the planning call asked for the tool; its call id is the one the answer call sent back
    assert plan.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert answer.attributes["gen_ai.request.stream"] is True
    planned, answered = records_of(fake_llm, turn.trace_id)
    assert [t["function"]["name"] for t in planned.body["tools"]] == ["search_documents"]
    asked, result = answered.body["messages"][-2:]
    assert result["role"] == "tool" and json.loads(result["content"])["documents"]
    assert asked["tool_calls"][0]["id"] == result["tool_call_id"]
    assert tool.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_documents",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": result["tool_call_id"],
    }
    assert query.attributes["db.system.name"] == "sqlite"
    assert query.attributes["db.operation.name"] == "SELECT"
    assert query.attributes["db.collection.name"] == "documents"
    assert query.attributes["db.query.text"].startswith("SELECT title FROM documents WHERE id IN (")
    # the spans hold the tool's and the query's scripted time
    assert seconds(tool) >= TOOL_MS / 1000 - EARLY_S
    assert seconds(query) >= DB_MS / 1000 - EARLY_S
    print("\n" + turn.outline())


def test_report_by_trace_puts_the_tool_the_query_and_the_calls_in_their_categories(
    turn: Trace, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(request_json(r)) + "\n" for r in receiver.trace_exports()))
    result = run_cli(["report", str(path), "--by", "trace", "--format", "json"])
    assert result.code == 0, result.err
    (got,) = [t for t in result.json()["traces"] if t["trace_id"] == turn.trace_id]
    assert got["root"] == SERVER and got["llm_calls"] == 2 and got["llm_calls_off_path"] == 0

    # the path, in order: the app's own time between the spans, each span under its category
    spans = [(s["name"], s["category"]) for s in got["path"] if s["category"] != "self"]
    assert spans == [(CHAT, "llm"), (TOOL, "tool"), (QUERY, "other"), (CHAT, "llm")], got["path"]
    assert {s["name"] for s in got["path"] if s["category"] == "self"} == {SERVER}, got["path"]

    # each category's time is its spans' (the report reads nanoseconds: exact to rounding)
    root = turn.one(SERVER)
    plan, tool, query, answer = sorted(turn.children(root), key=lambda s: s.start_ns)
    path = got["critical_path"]
    assert path["llm"] == pytest.approx(seconds(plan) + seconds(answer), abs=1e-6)
    assert path["tool"] == pytest.approx(seconds(tool), abs=1e-6)
    assert path["other"] == pytest.approx(seconds(query), abs=1e-6)
    assert got["duration"] == pytest.approx(seconds(root), abs=1e-6)
    own = seconds(root) - seconds(plan) - seconds(tool) - seconds(query) - seconds(answer)
    assert path["self"] == pytest.approx(own, abs=1e-6)
    assert set(path["llm_phases"]) == {p.removeprefix("openai.") for p in {*PLAN_PHASES, *ANSWER_PHASES}}
    print(", ".join(f"{k} {path[k] * 1e3:.1f} ms" for k in ("llm", "tool", "other", "self")))

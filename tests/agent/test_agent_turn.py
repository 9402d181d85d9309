"""A real agent: the OpenAI Agents SDK (``openai-agents``) with OpenLLMetry's instrumentation of it,
two tools with scripted sleeps, against the fake server (its own process) exporting its own spans
(examples/agent/). Needs the ``agent`` extra (``make agent-test``); skipped without it.

The agent framework's spans and openai-latency's land in one trace, and ``report --by trace`` splits
the turn as it ran: the tools' time as they slept, each call's server queue, prefill and decode as
the fake server's log and script say (±6 ms)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("opentelemetry.instrumentation.openai_agents")

from examples.agent import turn

from openai_latency.cli.spans.write import write_otlp_json
from openai_latency.fake_server import FakeServer
from openai_latency.fake_server.records import RequestRecord
from tests.support.cli_runs import run_cli
from tests.support.retry import retry_timing

TOLERANCE_S = 0.006
AGENTS_SCOPE = "opentelemetry.instrumentation.openai_agents"


def _run(tmp_path: Path) -> tuple[dict[str, Any], list[RequestRecord]]:
    server_file = tmp_path / "server.jsonl"
    server_file.unlink(missing_ok=True)
    with FakeServer.spawn(export_spans=str(server_file)) as server:
        answer, spans = turn.traced_turn(server.base_url)
        records = server.records()
    assert answer == "tok0 tok1 tok2 tok3"
    # one trace: the app's root, the agent framework's spans and ours
    assert len({span.context.trace_id for span in spans if span.context}) == 1
    scopes = {span.instrumentation_scope.name for span in spans if span.instrumentation_scope}
    assert AGENTS_SCOPE in scopes and "openai_latency" in scopes, scopes
    tools = [span for span in spans if (span.attributes or {}).get("gen_ai.operation.name") == "execute_tool"]
    assert sorted(str((span.attributes or {})["gen_ai.tool.name"]) for span in tools) == ["fetch", "search"]
    app_file = tmp_path / "app.jsonl"
    app_file.unlink(missing_ok=True)
    write_otlp_json(str(app_file), spans)
    result = run_cli(["report", str(app_file), str(server_file), "--by", "trace", "--format", "json"])
    assert result.code == 0, result.err
    document: dict[str, Any] = result.json()
    (trace,) = document["traces"]
    assert trace["root"] == "agent turn" and trace["llm_calls"] == 3, json.dumps(trace)[:2000]
    assert all(call["on_path"] and call["server_status"] == "joined" for call in trace["calls"])
    path = trace["critical_path"]
    assert sum(path[name] for name in ("llm", "tool", "other", "self")) == pytest.approx(trace["duration"])
    assert path["tool"] >= sum(turn.TOOL_SECONDS.values())
    assert len(records) == 3
    return trace, records


def test_an_agent_turn_is_one_trace_split_as_it_ran(tmp_path: Path) -> None:
    def timing(result: tuple[dict[str, Any], list[RequestRecord]]) -> None:
        trace, records = result
        path = trace["critical_path"]
        assert path["tool"] == pytest.approx(sum(turn.TOOL_SECONDS.values()), abs=TOLERANCE_S)
        for call, record in zip(trace["calls"], records, strict=True):
            assert record.headers_sent_ns and record.first_token_ns and record.last_token_ns
            split = call["server"]
            log = {
                "queue": (record.headers_sent_ns - record.received_ns) / 1e9,
                "prefill": (record.first_token_ns - record.headers_sent_ns) / 1e9,
                "decode": (record.last_token_ns - record.first_token_ns) / 1e9,
            }
            scripted = {"queue": 0.020, "prefill": 0.040, "decode": 0.030}
            for name, seconds in log.items():
                assert split[name] == pytest.approx(seconds, abs=TOLERANCE_S), (name, split, log)
                assert split[name] == pytest.approx(scripted[name], abs=TOLERANCE_S), (name, split)

    retry_timing(lambda: _run(tmp_path), timing)

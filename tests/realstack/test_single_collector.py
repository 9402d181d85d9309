"""The single-collector stack (docker-compose.yml) for real: collector/otelcol.yaml, Jaeger v2,
Prometheus with deploy/prometheus/prometheus.yml, the example backend under opentelemetry-instrument.

Load: every scenario of examples.loadgen 3 times (the turns the trace assertions look at), then the
load generator itself for a while (what keeps the dashboard's rates above zero). Each request is one
``/ask`` turn: a planning call, a tool, a query and the answer call; a failed planning call ends it.
Assertions through Jaeger's query API, Prometheus's HTTP API, the collector's own metrics endpoint
and `openai-latency report` on the file exporter's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from . import load
from .apis import JaegerApi, PanelQuery, PrometheusApi, Span, Trace, dashboard_queries
from .components import (
    Backend,
    Binaries,
    Collector,
    restart_collector,
    start_backend,
    start_fake_llm,
    start_loadgen,
    start_prometheus,
    start_traces,
)
from .procs import ROOT, Stack, wait_until

SERVICE = "example-backend"
TOOL, QUERY = "execute_tool search_documents", "SELECT documents"  # the turn's spans between its calls
# `make stack-test STACK_TEST_COLLECTOR_CONFIG=path` runs this module with another collector config
# (e.g. a broken copy, to see the failure the collector reports).
CONFIG = Path(os.environ.get("STACK_TEST_COLLECTOR_CONFIG") or ROOT / "collector" / "otelcol.yaml")
PER_SCENARIO = 3
LOADGEN_SECONDS = 35
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "openai-latency.json"
# Collector metrics docs/STACK.md names (the collector's documented names, no _total suffix).
DOCUMENTED_COLLECTOR_METRICS = (
    "otelcol_receiver_accepted_spans",
    "otelcol_receiver_refused_spans",
    "otelcol_exporter_sent_spans",
    "otelcol_exporter_send_failed_spans",
    "otelcol_exporter_queue_size",
)


@dataclass
class Run:
    stack: Stack
    collector: Collector
    backend: Backend
    jaeger: JaegerApi
    prometheus: PrometheusApi
    binaries: Binaries
    started_at: float
    turns_sent: int = 0
    calls_sent: int = 0  # LLM calls: two per turn that answered 200, one per failed turn
    traces: list[Trace] = field(default_factory=list)
    # Dashboard query -> the first non-empty finite result seen while the load ran.
    panel_data: dict[PanelQuery, list[tuple[dict[str, str], float]]] = field(default_factory=dict)


def chat_traces(traces: list[Trace]) -> list[Trace]:
    return [t for t in traces if t.operations]


def operations(traces: list[Trace]) -> list[Span]:
    return [op for t in traces for op in t.operations]


def turn_calls(trace: Trace) -> int:
    """The LLM calls a turn makes: the planning call and the answer, or a failed planning call."""
    return 1 if trace.operations[0].is_error else 2


def poll_dashboard(prom: PrometheusApi, queries: list[PanelQuery], run: Run, until: float) -> None:
    while time.time() < until and len(run.panel_data) < len(queries):
        for q in queries:
            if q not in run.panel_data:
                values = prom.values(q.expr)
                if values:
                    run.panel_data[q] = values
        time.sleep(3)


@pytest.fixture(scope="module")
def single(binaries: Binaries, module_dir: Path) -> Iterator[Run]:
    with Stack(module_dir) as stack:
        jaeger, collector = start_traces(stack, binaries, module_dir / "otlp", CONFIG)
        prom = start_prometheus(
            stack,
            "prometheus",
            binaries.prometheus,
            ROOT / "deploy" / "prometheus" / "prometheus.yml",
            {
                "otel-collector": [f"127.0.0.1:{collector.prometheus}"],
                "otel-collector-internal": [f"127.0.0.1:{collector.telemetry}"],
                "prometheus": ["$SELF"],
            },
            module_dir / "prometheus",
        )
        _, llm_url = start_fake_llm(stack, "fake-llm")
        backend = start_backend(stack, "example", collector.otlp_endpoint, llm_url)
        run = Run(
            stack, collector, backend, JaegerApi(jaeger.url), PrometheusApi(prom.url), binaries, time.time()
        )

        scripted = load.scripted(backend.url, PER_SCENARIO)
        loadgen = start_loadgen(stack, "loadgen", backend.url, rps=3, duration=LOADGEN_SECONDS, seed=7)
        queries = dashboard_queries(json.loads(DASHBOARD.read_text()))
        poll_dashboard(run.prometheus, queries, run, until=time.time() + LOADGEN_SECONDS + 30)
        loadgen.wait(120)
        generated = load.loadgen_summary(loadgen.output())
        run.turns_sent = sum(scripted.values()) + sum(generated.values())
        run.calls_sent = load.llm_calls(scripted) + load.llm_calls(generated)
        (module_dir / "load.json").write_text(
            json.dumps(
                {
                    "scripted": [[*k, v] for k, v in scripted.items()],
                    "loadgen": [[*k, v] for k, v in generated.items()],
                }
            )
        )

        def all_calls_in_jaeger() -> bool:
            run.traces = chat_traces(run.jaeger.traces(SERVICE, "GET /ask"))
            return len(run.traces) >= run.turns_sent and len(operations(run.traces)) >= run.calls_sent

        wait_until(
            all_calls_in_jaeger, timeout=40, what=f"{run.turns_sent} turns, {run.calls_sent} calls in Jaeger"
        )
        yield run


PHASES = {
    "openai.request_build",
    "openai.network_wait",
    "openai.retry_backoff",
    "openai.first_token",
    "openai.reasoning",
    "openai.stream_drain",
    "openai.response_read",
}


def report_json(*args: Path | str) -> dict[str, Any]:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "openai-latency"), "report", "--format", "json", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def spread(values: list[int]) -> str:
    """'7' or '7-12 (median 9)'."""
    ordered = sorted(values)
    low, high, median = ordered[0], ordered[-1], ordered[len(ordered) // 2]
    return str(low) if low == high else f"{low}-{high} (median {median})"


def test_every_turn_is_one_trace_in_jaeger(single: Run) -> None:
    assert SERVICE in single.jaeger.services()
    assert len(single.traces) == single.turns_sent
    assert len(operations(single.traces)) == single.calls_sent
    assert all(len(t.operations) == turn_calls(t) for t in single.traces)
    print(
        f"jaeger: {len(single.traces)} traces for {single.turns_sent} turns of {single.calls_sent} calls, "
        f"{sum(len(t.spans) for t in single.traces)} spans; spans per trace "
        f"{spread([len(t.spans) for t in single.traces])}: "
        + ", ".join(
            f"{n} spans x{c}" for n, c in sorted(Counter(len(t.spans) for t in single.traces).items())
        )
    )


def test_server_span_operation_span_and_phases_form_one_trace(single: Run) -> None:
    shapes: Counter[str] = Counter()
    for trace in single.traces:
        root = trace.root
        assert root is not None and root.name == "GET /ask", trace.trace_id
        assert root.tags["span.kind"] == "server"
        turn = [s.name for s in sorted(trace.children(root), key=lambda s: s.start_us)]
        model = trace.operations[0].tags["gen_ai.request.model"]
        chat = f"chat {model}"
        assert turn == ([chat, TOOL, QUERY, chat] if turn_calls(trace) == 2 else [chat]), turn
        for op in trace.operations:
            shapes[check_operation(trace, root, op)] += 1
    print(f"call shapes: {dict(shapes)}")
    assert shapes["stream"] and shapes["plain"] and shapes["error"]


def check_operation(trace: Trace, root: Span, op: Span) -> str:
    """One LLM call of a turn: its attributes and phases; its shape (stream, plain or error)."""
    assert op.parent_id == root.span_id, "chat span is not a child of the FastAPI server span"
    model = op.tags["gen_ai.request.model"]
    assert op.name == f"chat {model}"
    assert op.tags["gen_ai.operation.name"] == "chat"
    assert op.tags["gen_ai.provider.name"] == "openai"
    assert op.tags["server.address"] == "127.0.0.1"
    phases = trace.children(op)
    assert phases and {s.name for s in phases} <= PHASES, {s.name for s in phases}
    assert all(s.tags["openai_latency.phase"] == s.name.split(".", 1)[1] for s in phases)
    for wait in (s for s in phases if s.name == "openai.network_wait"):
        for sub in trace.children(wait):
            assert sub.name.startswith("http."), sub.name
    assert all(s.trace_id == trace.trace_id for s in trace.spans)
    if op.is_error:
        return "error"
    assert op.tags["openai_latency.dominant_phase"]
    if op.tags["gen_ai.request.stream"]:
        assert {"openai.first_token", "openai.stream_drain"} <= {s.name for s in phases}
        assert op.tags["openai_latency.time_to_first_token"] > 0
        assert op.tags["gen_ai.usage.output_tokens"] > 0
        return "stream"
    assert "openai.response_read" in {s.name for s in phases}
    return "plain"


def test_retried_call_shows_attempts_and_backoff(single: Run) -> None:
    """The retried-429 scenario: each call of the turn gets a 429, then its retry succeeds."""
    retried = [
        (trace, op)
        for trace in single.traces
        for op in trace.operations
        if any(w.tags.get("http.response.status_code") == 429 for w in waits_of(trace, op))
    ]
    assert len(retried) >= 2 * PER_SCENARIO
    for trace, op in retried:
        waits = waits_of(trace, op)
        backoffs = [s for s in trace.children(op) if s.name == "openai.retry_backoff"]
        assert op.tags["http.request.resend_count"] == len(waits) - 1 >= 1
        assert len(backoffs) == len(waits) - 1
        statuses = sorted(int(w.tags["http.response.status_code"]) for w in waits)
        assert statuses == [200, 429], statuses
        assert not op.is_error
    print(f"retried (429 then 200): {len(retried)} calls in {len({t.trace_id for t, _ in retried})} traces")


def waits_of(trace: Trace, op: Span) -> list[Span]:
    return [s for s in trace.children(op) if s.name == "openai.network_wait"]


def test_failed_calls_have_error_status_and_type(single: Run) -> None:
    ops = operations(single.traces)
    failed = [op for op in ops if "error.type" in op.tags]
    by_type = Counter(op.tags["error.type"] for op in failed)
    assert all(op.is_error for op in failed)
    assert by_type["model_not_found"] >= PER_SCENARIO
    assert sum(by_type.values()) >= 2 * PER_SCENARIO
    ok = [op for op in ops if "error.type" not in op.tags]
    assert not any(op.is_error for op in ok)
    print(f"failed calls by error.type: {dict(by_type)}")


def test_every_dashboard_query_returns_data(single: Run) -> None:
    queries = dashboard_queries(json.loads(DASHBOARD.read_text()))
    missing = [f"{q.panel}: {q.expr}" for q in queries if q not in single.panel_data]
    print(f"dashboard queries with data: {len(queries) - len(missing)} of {len(queries)}")
    assert not missing, "\n".join(missing)


def test_exemplars_link_to_traces_in_jaeger(single: Run) -> None:
    queries = [q for q in dashboard_queries(json.loads(DASHBOARD.read_text())) if q.exemplar]
    assert queries
    trace_ids: set[str] = set()
    without: list[str] = []
    for q in queries:
        found = {
            ex["labels"]["trace_id"]
            for series in single.prometheus.exemplars(q.expr, single.started_at, time.time())
            for ex in series["exemplars"]
            if "trace_id" in ex["labels"]
        }
        if not found:
            without.append(q.panel)
        trace_ids |= found
    assert not without, f"panels with exemplars enabled but none in Prometheus: {without}"
    missing = [tid for tid in sorted(trace_ids) if single.jaeger.trace(tid) is None]
    print(f"exemplar trace ids: {len(trace_ids)}, found in Jaeger: {len(trace_ids) - len(missing)}")
    assert not missing


def test_report_of_the_file_exporter_counts_what_jaeger_holds(single: Run) -> None:
    report = report_json(single.collector.out_dir / "traces.jsonl")
    jaeger_ops = operations(single.traces)
    assert report["input"]["operation_spans"] == len(jaeger_ops) == single.calls_sent
    per_model = Counter(op.tags["gen_ai.request.model"] for op in jaeger_ops)
    assert {g["key"]["model"]: g["calls"] for g in report["groups"]} == dict(per_model)
    errors = Counter(op.tags["error.type"] for op in jaeger_ops if "error.type" in op.tags)
    report_errors: Counter[str] = Counter()
    for g in report["groups"]:
        report_errors.update(g["errors"]["by_type"])
    assert report_errors == errors
    print(
        f"report: {report['input']['operation_spans']} calls, Jaeger: {len(jaeger_ops)};"
        f" per model {dict(per_model)}"
    )
    # report --jaeger on the real Jaeger: the same groups, calls, errors and percentiles (Jaeger keeps
    # microseconds, the file nanoseconds: durations agree to a microsecond)
    from_jaeger = report_json("--jaeger", single.jaeger.url, "--service", SERVICE, "--lookback", "1h")
    assert [g["key"] for g in from_jaeger["groups"]] == [g["key"] for g in report["groups"]]
    for got, want in zip(from_jaeger["groups"], report["groups"], strict=True):
        assert got["calls"] == want["calls"] and got["errors"] == want["errors"]
        for name in ("p50", "p95", "p99"):
            assert got["duration"][name] == pytest.approx(want["duration"][name], abs=2e-6)
        assert set(got["phases"]) == set(want["phases"])
        for phase, dist in want["phases"].items():
            assert got["phases"][phase]["p50"] == pytest.approx(dist["p50"], abs=2e-6), phase
    print(f"report --jaeger: {sum(g['calls'] for g in from_jaeger['groups'])} calls, same groups as the file")


def test_collector_own_metrics_keep_the_documented_names(single: Run) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{single.collector.telemetry}/metrics", timeout=10) as r:
        text = r.read().decode()
    names = {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if line and line[0] != "#"}
    for name in DOCUMENTED_COLLECTOR_METRICS:
        assert name in names, (
            f"{name} not exposed; exposed: {sorted(n for n in names if n.startswith('otelcol_'))}"
        )
    assert not any(n.endswith("_total") for n in names if n.startswith("otelcol_"))
    assert single.prometheus.values('sum(otelcol_receiver_accepted_spans{job="otel-collector-internal"})')


def test_alert_rules_evaluate_on_the_real_data(single: Run) -> None:
    groups = single.prometheus.rules()
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == 12
    unhealthy = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not unhealthy
    assert single.prometheus.values("openai_latency:calls:rate5m")
    assert single.prometheus.values("openai_latency:operation_duration_seconds:p95_5m")
    # Every call to the unknown model fails: the error-rate alert is pending (for: 5m) for it.
    alerts = single.prometheus.alerts()
    matching = [
        a
        for a in alerts
        if a["labels"]["alertname"] == "LLMErrorRateHigh"
        and a["labels"].get("gen_ai_request_model") == "gpt-does-not-exist"
    ]
    assert matching and matching[0]["state"] in ("pending", "firing"), alerts
    states = [(a["labels"]["alertname"], a["labels"].get("gen_ai_request_model"), a["state"]) for a in alerts]
    print(f"rules: {len(rules)} ok; alerts: {states}")


def test_file_exporter_appends_across_a_collector_restart(single: Run) -> None:
    """Last in this module: restarts the collector on the same ports and sends two more turns."""
    path = single.collector.out_dir / "traces.jsonl"
    single.collector.service.stop()
    before = path.read_bytes()
    assert before
    restarted = restart_collector(single.stack, single.collector, "collector-restarted")
    outcome = load.run(single.backend.url, [load.scenario("after-restart", "gpt-4o-mini", False)] * 2)
    assert outcome == Counter({("after-restart", "200"): 2})
    wait_until(
        lambda: report_json(path)["input"]["operation_spans"] == single.calls_sent + load.llm_calls(outcome),
        timeout=30,
        what="the two turns' calls after the restart in the file",
    )
    assert path.read_bytes().startswith(before), "the restart truncated the file"
    restarted.service.stop()

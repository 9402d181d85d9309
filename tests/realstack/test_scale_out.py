"""The scale-out topology of deploy/compose.scale-out.yml for real: the app sends to an AGENT
(collector/agent.yaml) whose loadbalancing exporter routes by trace id to TWO GATEWAYS
(collector/gateway.yaml) that compute spanmetrics and write every span to their files, then
tail-sample into Jaeger; Prometheus scrapes both gateways (deploy/prometheus/prometheus.scale-out.yml).

On loopback both gateways listen on 127.0.0.1 with different ports, which the agent's DNS resolver
cannot express (one name, one port): the agent is started with its resolver replaced by the static
one listing the two gateways (`--set`), the only change to the shipped config. The routing (by
trace id, over the same consistent-hash ring) is the exporter's own either way.

Ground truth is the gateways' files (every span, before sampling); what was kept is what Jaeger
holds. The gateways run with a decision_wait of 20 s instead of the config's 60 s (`--set`): the
longest trace here lasts ~9 s, and the policies, the part under test, are the shipped ones; the
shorter wait takes ~40 s off `make stack-test`.

The sampling decisions are checked three ways: Jaeger holds exactly the traces that the gateway's
policies select when applied here to the spans of the files (the four OTTL conditions re-stated in
Python, and the probabilistic baseline recomputed from each trace id: FNV-1a over the policy's
hash salt and the id's 16 bytes, kept when at most 10 % of 2^64, as the tail_sampling processor's
probabilistic.go does); the gateways' own decision counters (per policy, scraped from their
telemetry endpoints) match those same counts; and the fast successful traces kept lie within
binomial bounds that exclude zero.
"""

from __future__ import annotations

import json
import math
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from . import load, otlpfile
from .apis import NOT_CALLS, JaegerApi, PrometheusApi, Trace
from .components import (
    Binaries,
    Collector,
    start_backend,
    start_collector,
    start_fake_llm,
    start_jaeger,
    start_prometheus,
)
from .procs import ROOT, Stack, wait_until
from .test_single_collector import SERVICE, report_json, spread

# 300 fast turns (each an /ask of the example backend: two LLM calls, a tool and a query; a failed
# planning call ends the turn): at the 10 % baseline, 30 kept on average, and the
# 4.5-standard-deviation band [7, 53] excludes 0 (with 150 it was [-1.5, 31.5]: sampling nothing at
# all would have passed). The scripts go to both calls of a turn.
N_FAST = 300
GATEWAY_CONFIG: dict[str, Any] = yaml.safe_load((ROOT / "collector" / "gateway.yaml").read_text())
TAIL_SAMPLING: dict[str, Any] = GATEWAY_CONFIG["processors"]["tail_sampling"]
POLICIES = [p["name"] for p in TAIL_SAMPLING["policies"]]
_BASELINE = next(p for p in TAIL_SAMPLING["policies"] if p["name"] == "baseline")["probabilistic"]
BASELINE = float(_BASELINE["sampling_percentage"]) / 100
# tail_sampling's probabilistic.go: defaultHashSalt when hash_salt is not set
HASH_SALT = _BASELINE.get("hash_salt") or "default-hash-seed"
SLOW_S = 8.0  # gateway.yaml: slow-llm-operation
TTFT_S = 2.0  # gateway.yaml: slow-first-token
DECISION_WAIT_S = 20
"""The gateways' decision_wait here (the config ships 60 s, for streams of tens of seconds)."""

JOBS = (
    [load.scenario("slow", "o3-mini", False, delay_ms="8500")] * 2
    + [load.scenario("slow-first-token", "gpt-4o", True, ttft_ms="2300", chunks="5")] * 3
    + [load.scenario("failed", "gpt-does-not-exist", False, error="model_not_found")] * 4
    + [
        load.scenario(
            "retried", "gpt-4o-mini", False, fail_attempts="1", fail_status="429", retry_after_ms="100"
        )
    ]
    * 4
    + [load.scenario("fast", "gpt-4o-mini", False, delay_ms="5")] * N_FAST
)
#: The LLM calls of the JOBS' turns: the failed ones end at their planning call.
CALLS = sum(1 if job.name == "failed" else 2 for job in JOBS)


_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3
_U64 = 2**64 - 1


def fnv1a_64(data: bytes) -> int:
    h = _FNV64_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV64_PRIME) & _U64
    return h


# calculateThreshold: MaxUint64 * ratio (the ratio as the float64 Go computes, 10.0/100)
BASELINE_THRESHOLD = int(Fraction(_U64) * Fraction(BASELINE))


def baseline_samples(trace_id: str) -> bool:
    """The probabilistic policy's decision for this trace id (hex, as in the OTLP JSON files)."""
    return fnv1a_64(HASH_SALT.encode() + bytes.fromhex(trace_id)) <= BASELINE_THRESHOLD


def matching_policies(trace_id: str, spans: list[otlpfile.FileSpan]) -> set[str]:
    """The policies of gateway.yaml that sample this trace, evaluated here on its spans: the OTTL
    span conditions (any span of the trace matching) and the baseline."""
    matched = set()
    for s in spans:
        a = s.attributes
        op = "gen_ai.operation.name" in a
        if op and s.status_code == otlpfile.STATUS_ERROR:
            matched.add("failed-llm-calls")
        if op and s.duration_ns > SLOW_S * 1e9:
            matched.add("slow-llm-operation")
        if (
            a.get("openai_latency.time_to_first_token") is not None
            and a["openai_latency.time_to_first_token"] > TTFT_S
        ):
            matched.add("slow-first-token")
        if op and a.get("http.request.resend_count") is not None and a["http.request.resend_count"] > 0:
            matched.add("retried-llm-calls")
    if baseline_samples(trace_id):
        matched.add("baseline")
    return matched


@dataclass
class ScaleOut:
    gateways: list[Collector]
    agent: Collector
    jaeger: JaegerApi
    prometheus: PrometheusApi
    outcomes: Counter[tuple[str, str]]
    started_at: float
    files: dict[str, list[otlpfile.FileSpan]] = field(default_factory=dict)  # trace id -> spans
    kept: dict[str, Trace] = field(default_factory=dict)  # trace id -> what Jaeger holds (GET /ask)
    kept_all: set[str] = field(default_factory=set)  # every trace id of the service Jaeger holds
    # (policy, decision) -> traces, summed over both gateways, from their own counters
    decisions: dict[tuple[str, str], int] = field(default_factory=dict)

    def ask_traces(self) -> dict[str, list[otlpfile.FileSpan]]:
        return {
            tid: spans
            for tid, spans in self.files.items()
            if any(s.name == "GET /ask" for s in spans)
            and any("gen_ai.operation.name" in s.attributes for s in spans)
        }


def kind(spans: list[otlpfile.FileSpan]) -> str:
    """Why tail sampling must keep the trace ('fast': only by the 10 % baseline)."""
    ops = [s for s in spans if s.attributes.get("gen_ai.operation.name") not in NOT_CALLS]
    assert len(ops) in (1, 2), [s.name for s in ops]  # a turn's calls
    if any(op.status_code == otlpfile.STATUS_ERROR for op in ops):
        return "failed"
    if any(op.duration_ns > SLOW_S * 1e9 for op in ops):
        return "slow"
    if any(op.attributes.get("openai_latency.time_to_first_token", 0) > TTFT_S for op in ops):
        return "slow-first-token"
    if any(op.attributes.get("http.request.resend_count", 0) > 0 for op in ops):
        return "retried"
    return "fast"


def collector_metric(collector: Collector, name: str) -> float:
    """Sum of one metric on a collector's own telemetry endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{collector.telemetry}/metrics", timeout=10) as r:
        lines = r.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.split("{", 1)[0].split(" ")[0] == name)


def policy_decisions(gateways: list[Collector]) -> dict[tuple[str, str], int]:
    """(policy, decision) -> traces, summed over the gateways (read from them, not from a scrape)."""
    out: Counter[tuple[str, str]] = Counter()
    name = "otelcol_processor_tail_sampling_count_traces_sampled"
    for gateway in gateways:
        with urllib.request.urlopen(f"http://127.0.0.1:{gateway.telemetry}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + "{"):
                    labels = dict(
                        item.split("=", 1) for item in line[len(name) + 1 : line.index("}")].split(",")
                    )
                    key = (labels["policy"].strip('"'), labels["decision"].strip('"'))
                    out[key] += int(float(line.rsplit(" ", 1)[1]))
    return dict(sorted(out.items()))


def undecided(gateway: Collector) -> float:
    received = collector_metric(gateway, "otelcol_processor_tail_sampling_new_trace_id_received")
    decided = collector_metric(gateway, "otelcol_processor_tail_sampling_global_count_traces_sampled")
    return received - decided


@pytest.fixture(scope="module")
def scale_out(binaries: Binaries, module_dir: Path) -> Iterator[ScaleOut]:
    out = module_dir / "otlp"
    with Stack(module_dir) as stack:
        jaeger = start_jaeger(stack, "jaeger", binaries.jaeger)
        gateways = [
            start_collector(
                stack,
                name,
                binaries.otelcol,
                ROOT / "collector" / "gateway.yaml",
                out,
                jaeger.otlp_target,
                extra_env={"HOSTNAME": name},
                sets=(f"processors::tail_sampling::decision_wait={DECISION_WAIT_S}s",),
            )
            for name in ("gateway-1", "gateway-2")
        ]
        hostnames = ",".join(f"127.0.0.1:{g.otlp_grpc}" for g in gateways)
        agent = start_collector(
            stack,
            "agent",
            binaries.otelcol,
            ROOT / "collector" / "agent.yaml",
            module_dir / "agent-out",
            extra_env={"OTEL_GATEWAY_HOST": "127.0.0.1", "OTEL_GATEWAY_PORT": str(gateways[0].otlp_grpc)},
            sets=(
                "exporters::loadbalancing::resolver::dns=null",
                f"exporters::loadbalancing::resolver::static::hostnames=[{hostnames}]",
            ),
        )
        prom = start_prometheus(
            stack,
            "prometheus",
            binaries.prometheus,
            ROOT / "deploy" / "prometheus" / "prometheus.scale-out.yml",
            {
                "otel-gateway": [f"127.0.0.1:{g.prometheus}" for g in gateways],
                "otel-collector-internal": [f"127.0.0.1:{c.telemetry}" for c in (*gateways, agent)],
                "prometheus": ["$SELF"],
            },
            module_dir / "prometheus",
        )
        _, llm_url = start_fake_llm(stack, "fake-llm")
        # Our spans of a call all end when it ends; the ASGI per-chunk spans end while the answer
        # streams, so some traces leave the app (and reach a gateway) in several batches, the case
        # test_kept_traces_are_complete needs (the example leaves them out by default).
        backend = start_backend(
            stack, "example", agent.otlp_endpoint, llm_url, extra_env={"EXAMPLE_ASGI_MESSAGE_SPANS": "true"}
        )
        started = time.time()
        outcomes = load.run(backend.url, list(JOBS), concurrency=10)
        (module_dir / "load.json").write_text(json.dumps([[*k, v] for k, v in outcomes.items()]))
        run = ScaleOut(gateways, agent, JaegerApi(jaeger.url), PrometheusApi(prom.url), outcomes, started)

        def everything_in_the_files() -> bool:
            run.files = otlpfile.by_trace(otlpfile.read(sorted(out.glob("traces-*.jsonl"))))
            return len(run.ask_traces()) >= len(JOBS)

        wait_until(everything_in_the_files, timeout=30, what=f"{len(JOBS)} traces in the gateways' files")
        # Tail sampling decides decision_wait after a trace's first span; then batch (1 s) -> Jaeger.
        time.sleep(max(0.0, started + DECISION_WAIT_S - time.time()))
        wait_until(
            lambda: all(undecided(g) == 0 for g in gateways),
            timeout=120,
            interval=2,
            what="every trace decided by both gateways' tail sampling",
        )
        decided_after = time.time() - started
        everything_in_the_files()  # read again: whatever came in until the last decision

        def jaeger_settled() -> bool:
            before = len(run.kept)
            run.kept = {t.trace_id: t for t in run.jaeger.traces(SERVICE, "GET /ask")}
            return before == len(run.kept) > 0

        wait_until(jaeger_settled, timeout=40, interval=3, what="Jaeger's trace count settles")
        run.kept_all = {t.trace_id for t in run.jaeger.traces(SERVICE)}
        run.decisions = policy_decisions(gateways)
        (module_dir / "decisions.json").write_text(
            json.dumps([[*k, v] for k, v in run.decisions.items()], indent=1)
        )
        print(
            f"tail sampling: all decided {decided_after:.0f}s, Jaeger settled {time.time() - started:.0f}s"
            f" after the load started; decisions {run.decisions}"
        )
        yield run


def test_every_turn_reached_exactly_one_gateway(scale_out: ScaleOut) -> None:
    assert scale_out.outcomes[("fast", "200")] == N_FAST
    traces = scale_out.ask_traces()
    assert len(traces) == len(JOBS)
    per_gateway: Counter[str] = Counter()
    for tid, spans in traces.items():
        files = {s.file for s in spans}
        assert len(files) == 1, f"trace {tid} was split over {files}"
        per_gateway[files.pop()] += 1
    print(f"traces per gateway: {dict(per_gateway)}")
    assert len(per_gateway) == 2 and min(per_gateway.values()) >= len(JOBS) // 5


def test_kept_traces_are_complete(scale_out: ScaleOut) -> None:
    files = scale_out.ask_traces()
    assert scale_out.kept
    several_batches = 0
    for tid, trace in scale_out.kept.items():
        assert tid in files, f"Jaeger holds {tid}, which no gateway received"
        expected = {s.span_id for s in files[tid]}
        assert {s.span_id for s in trace.spans} == expected, f"trace {tid} is incomplete in Jaeger"
        several_batches += len({s.line for s in files[tid]}) > 1
    spans = sum(len(t.spans) for t in scale_out.kept.values())
    per_kind: dict[str, list[int]] = {}
    for tid, trace in scale_out.kept.items():
        per_kind.setdefault(kind(files[tid]), []).append(len(trace.spans))
    print(
        f"kept: {len(scale_out.kept)} traces, {spans} spans, all complete;"
        f" {several_batches} of them arrived in several batches; spans per trace: "
        + ", ".join(f"{k} {spread(v)}" for k, v in sorted(per_kind.items()))
    )
    assert several_batches > 0


def test_failed_slow_and_retried_traces_are_all_kept(scale_out: ScaleOut) -> None:
    kinds = {tid: kind(spans) for tid, spans in scale_out.ask_traces().items()}
    sent = Counter(kinds.values())
    assert sent == Counter({"fast": N_FAST, "slow": 2, "slow-first-token": 3, "failed": 4, "retried": 4})
    must = [tid for tid, k in kinds.items() if k != "fast"]
    dropped = [(tid, kinds[tid]) for tid in must if tid not in scale_out.kept]
    print(f"must keep: {len(must)} ({dict(sent - Counter({'fast': N_FAST}))}), dropped: {dropped}")
    assert not dropped


def test_jaeger_holds_exactly_the_traces_the_policies_select(scale_out: ScaleOut) -> None:
    """Every trace the gateways received (the files), the policies applied here: Jaeger holds those
    and no others, the fast successful ones among them chosen by the baseline's hash alone."""
    selected = {tid for tid, spans in scale_out.files.items() if matching_policies(tid, spans)}
    assert scale_out.kept_all == selected, (
        f"in Jaeger but not selected: {sorted(scale_out.kept_all - selected)}; "
        f"selected but not in Jaeger: {sorted(selected - scale_out.kept_all)}"
    )
    print(
        f"all traces the gateways received: {len(scale_out.files)}, selected by the policies here:"
        f" {len(selected)}, in Jaeger: {len(scale_out.kept_all)} (the same trace ids)"
    )


def test_fast_traces_are_sampled_at_the_baseline_rate(scale_out: ScaleOut) -> None:
    fast = [tid for tid, spans in scale_out.ask_traces().items() if kind(spans) == "fast"]
    assert len(fast) == N_FAST
    kept = {tid for tid in fast if tid in scale_out.kept}
    by_hash = {tid for tid in fast if baseline_samples(tid)}
    print(
        f"fast successful traces: {len(fast)}, kept {len(kept)} ({len(kept) / len(fast):.1%};"
        f" expected {BASELINE:.0%}); the baseline's hash selects {len(by_hash)} of them"
    )
    # Exactly the ones the probabilistic policy's hash selects: not one more, not one less.
    assert kept == by_hash
    # Trace ids are random: kept ~ Binomial(n, 0.10). 4.5 standard deviations: a false failure about
    # once in 150 000 runs; with n = 300 the lower bound is 7, so "sampling stopped" fails here too.
    mean = len(fast) * BASELINE
    sd = math.sqrt(len(fast) * BASELINE * (1 - BASELINE))
    assert mean - 4.5 * sd > 0
    assert mean - 4.5 * sd <= len(kept) <= mean + 4.5 * sd


def test_gateways_decision_counters_agree(scale_out: ScaleOut) -> None:
    """The gateways' own count of traces per policy and decision (otelcol_processor_tail_sampling_
    count_traces_sampled, summed over both) equals what the policies select here from the files."""
    decided = len(scale_out.files)
    matched: Counter[str] = Counter()
    for tid, spans in scale_out.files.items():
        matched.update(matching_policies(tid, spans))
    got = scale_out.decisions
    # the `decision` label of the 0.143.0 processor (processor.go: decisionToAttributes)
    sampled, not_sampled = "sampled", "not_sampled"
    assert {d for _, d in got} <= {sampled, not_sampled}, got
    for policy in POLICIES:
        assert got.get((policy, sampled), 0) == matched[policy], (policy, got)
        assert got.get((policy, not_sampled), 0) == decided - matched[policy], (policy, got)
    fast_kept = sum(
        tid in scale_out.kept for tid, spans in scale_out.ask_traces().items() if kind(spans) == "fast"
    )
    assert 0 < fast_kept <= got[("baseline", sampled)]
    print(
        f"decision counters of both gateways ({decided} traces each policy): "
        + ", ".join(f"{p} {got.get((p, sampled), 0)}" for p in POLICIES)
        + f" sampled; fast successful traces kept {fast_kept} of {N_FAST}"
    )


def test_report_reads_every_call_from_the_gateway_files(scale_out: ScaleOut) -> None:
    paths = sorted(scale_out.gateways[0].out_dir.glob("traces-*.jsonl"))
    report = report_json(*paths)
    # All calls, not only the sampled ones: the files are written before tail sampling.
    assert report["input"]["operation_spans"] == CALLS
    print(
        f"report on {len(paths)} gateway files: {CALLS} calls of {len(JOBS)} turns;"
        f" Jaeger keeps {len(scale_out.kept)} turns"
    )


def test_both_gateways_spanmetrics_stay_apart_and_add_up(scale_out: ScaleOut) -> None:
    prom = scale_out.prometheus
    expr = 'traces_span_metrics_calls_total{job="otel-gateway", span_name=~"chat .+"}'

    def both_gateways_complete() -> bool:
        total = sum(v for _, v in prom.values(f"sum({expr})"))
        return total == CALLS

    wait_until(both_gateways_complete, timeout=45, interval=3, what="spanmetrics of both gateways scraped")
    instances = {m["instance"] for m, _ in prom.values(f"sum by (instance) ({expr})")}
    assert instances == {f"127.0.0.1:{g.prometheus}" for g in scale_out.gateways}
    # The same series labels from both gateways: without honor_labels they stay two series.
    per_series = prom.values(f"count by (span_name, status_code, exported_instance) ({expr})")
    assert any(v == 2 for _, v in per_series), per_series
    print(f"spanmetrics: chat calls summed over {len(instances)} gateway instances = {CALLS}")


def test_gateways_expose_no_exemplars(scale_out: ScaleOut) -> None:
    """Exemplars are taken before sampling: the gateway config turns them off (see its header)."""
    prom = scale_out.prometheus
    for metric in (
        "traces_span_metrics_duration_seconds_bucket",
        "gen_ai_client_operation_duration_seconds_bucket",
    ):
        assert prom.values(f"count({metric})"), metric
        assert prom.exemplars(metric, scale_out.started_at, time.time()) == []

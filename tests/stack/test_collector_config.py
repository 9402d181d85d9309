"""Collector configs: every pipeline references defined components that exist in otelcol-contrib.

Structural checks without a collector binary (they run in `make test`, which needs no Go), against
collector/contrib-components.yaml. The real check is `otelcol validate` with the collector built
from source by `make stack-test` (tests/realstack/test_collector_validate.py).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import ROOT, as_deployed, load_yaml

CONFIGS = ["otelcol.yaml", "gateway.yaml", "agent.yaml"]
KINDS = ("receivers", "processors", "exporters", "connectors", "extensions")
SIGNALS = ("traces", "metrics", "logs")
# Connector type -> (signal it consumes as an exporter, signal it emits as a receiver); None = same.
CONNECTOR_SIGNALS: dict[str, tuple[str, str] | None] = {
    "spanmetrics": ("traces", "metrics"),
    "forward": None,
}


def contrib() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(ROOT / "collector" / "contrib-components.yaml")
    return data


def config(name: str) -> dict[str, Any]:
    """The config with the values the compose stack gives it (``${env:...:-default}`` -> default)."""
    data: dict[str, Any] = as_deployed(load_yaml(ROOT / "collector" / name))
    return data


def ctype(component_id: str) -> str:
    """`otlp/jaeger` -> `otlp` (type/name syntax of component ids)."""
    return component_id.split("/", 1)[0]


def pipeline_signal(pipeline_id: str) -> str:
    return ctype(pipeline_id)


@pytest.mark.parametrize("name", CONFIGS)
def test_every_referenced_component_is_defined_and_exists_in_contrib(name: str) -> None:
    cfg, known = config(name), contrib()
    service = cfg["service"]
    problems: list[str] = []
    for ext in service.get("extensions", []):
        if ext not in (cfg.get("extensions") or {}):
            problems.append(f"service.extensions: {ext} is not defined under extensions")
    pipelines: dict[str, dict[str, list[str]]] = service["pipelines"]
    assert pipelines, "no pipelines"
    for pid, pipe in pipelines.items():
        assert pipeline_signal(pid) in SIGNALS, f"pipeline {pid}: unknown signal"
        assert pipe.get("receivers") and pipe.get("exporters"), (
            f"pipeline {pid} needs receivers and exporters"
        )
        for role in ("receivers", "processors", "exporters"):
            for comp in pipe.get(role, []):
                # A connector is referenced as a receiver or an exporter of pipelines.
                sections = [role] + (["connectors"] if role != "processors" else [])
                if not any(comp in (cfg.get(s) or {}) for s in sections):
                    problems.append(f"pipeline {pid}: {role[:-1]} {comp} is not defined")
    for kind in KINDS:
        for comp in cfg.get(kind) or {}:
            if ctype(comp) not in known[kind]:
                problems.append(
                    f"{kind}.{comp}: type {ctype(comp)!r} is not a {kind[:-1]} of otelcol-contrib"
                )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", CONFIGS)
def test_every_defined_component_is_used(name: str) -> None:
    cfg = config(name)
    service = cfg["service"]
    used = set(service.get("extensions", []))
    for pipe in service["pipelines"].values():
        for role in ("receivers", "processors", "exporters"):
            used.update(pipe.get(role, []))
    unused = [f"{kind}.{c}" for kind in KINDS for c in (cfg.get(kind) or {}) if c not in used]
    assert not unused, f"defined but not in any pipeline: {unused}"


@pytest.mark.parametrize("name", CONFIGS)
def test_connectors_join_pipelines_of_the_right_signals(name: str) -> None:
    cfg = config(name)
    pipelines: dict[str, dict[str, list[str]]] = cfg["service"]["pipelines"]
    for conn in cfg.get("connectors") or {}:
        as_exporter = {
            pipeline_signal(p) for p, pipe in pipelines.items() if conn in pipe.get("exporters", [])
        }
        as_receiver = {
            pipeline_signal(p) for p, pipe in pipelines.items() if conn in pipe.get("receivers", [])
        }
        assert as_exporter and as_receiver, f"connector {conn} must end one pipeline and start another"
        expected = CONNECTOR_SIGNALS[ctype(conn)]
        if expected is None:
            assert as_exporter == as_receiver, f"{conn}: {as_exporter} -> {as_receiver}"
        else:
            assert as_exporter == {expected[0]} and as_receiver == {expected[1]}, (
                f"{conn}: {as_exporter} -> {as_receiver}, expected {expected}"
            )


@pytest.mark.parametrize("name", CONFIGS)
def test_memory_limiter_first_and_batch_in_every_pipeline_that_receives_otlp(name: str) -> None:
    cfg = config(name)
    for pid, pipe in cfg["service"]["pipelines"].items():
        if "otlp" not in pipe["receivers"]:
            continue
        processors = pipe.get("processors", [])
        assert processors[:1] == ["memory_limiter"], f"{pid}: memory_limiter must come first"
        if name != "gateway.yaml" or pid != "traces/all":  # that one batches after sampling
            assert "batch" in processors, f"{pid}: no batch processor"


@pytest.mark.parametrize("name", CONFIGS)
def test_otlp_receiver_listens_on_grpc_4317_and_http_4318(name: str) -> None:
    protocols = config(name)["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")


@pytest.mark.parametrize("name", ["otelcol.yaml", "gateway.yaml"])
def test_spanmetrics_dimensions_and_units(name: str) -> None:
    spanmetrics = config(name)["connectors"]["spanmetrics"]
    dims = {d["name"] for d in spanmetrics["dimensions"]}
    assert {"gen_ai.request.model", "server.address"} <= dims
    # Pinned explicitly because defaults changed across releases; tests/stack/prom_names.py and the
    # dashboard depend on both.
    assert spanmetrics["namespace"] == "traces.span.metrics"
    assert spanmetrics["histogram"]["unit"] == "s"
    # Exemplars link a point to its trace: right when every trace is stored (single collector),
    # off behind tail sampling, where most of them would point to dropped traces.
    assert spanmetrics["exemplars"]["enabled"] is (name == "otelcol.yaml")


@pytest.mark.parametrize("name", ["otelcol.yaml", "gateway.yaml"])
def test_exporters_jaeger_prometheus_file(name: str) -> None:
    exporters = config(name)["exporters"]
    assert exporters["otlp/jaeger"]["endpoint"] == "jaeger:4317"
    prom = exporters["prometheus"]
    assert prom["endpoint"].endswith(":8889")
    # Exemplars are only exposed in OpenMetrics format: on for the single collector, off for the
    # tail-sampling gateway (see test_spanmetrics_dimensions_and_units).
    assert prom["enable_open_metrics"] is (name == "otelcol.yaml")
    # The Prometheus names in prom_names.py assume the default translation.
    assert "namespace" not in prom
    assert prom.get("add_metric_suffixes", True) is True
    assert (
        prom.get("translation_strategy", "UnderscoreEscapingWithSuffixes") == "UnderscoreEscapingWithSuffixes"
    )
    files = {k: v for k, v in exporters.items() if ctype(k) == "file"}
    assert files, "no file exporter"
    for exp in files.values():
        assert exp["path"].startswith("/otlp-out/"), "file exporter must write into the mounted folder"
        assert exp.get("format", "json") == "json"
        # The exporter's default truncates the file at every collector start.
        assert exp.get("append") is True


@pytest.mark.parametrize("name", CONFIGS)
def test_own_telemetry_reader_keeps_the_documented_metric_names(name: str) -> None:
    """Declaring a reader replaces the collector's default, whose without_* settings keep the
    documented names (otelcol_receiver_accepted_spans without _total): they must be repeated."""
    readers = config(name)["service"]["telemetry"]["metrics"]["readers"]
    for reader in readers:
        prom = reader["pull"]["exporter"]["prometheus"]
        assert prom["without_type_suffix"] is True
        assert prom["without_units"] is True
        assert prom["without_scope_info"] is True


def test_single_collector_sends_traces_to_all_four_destinations() -> None:
    pipes = config("otelcol.yaml")["service"]["pipelines"]
    assert set(pipes["traces"]["exporters"]) == {"otlp/jaeger", "spanmetrics", "file/traces", "debug"}
    assert set(pipes["metrics"]["receivers"]) == {"otlp", "spanmetrics"}
    assert {"prometheus", "file/metrics", "debug"} <= set(pipes["metrics"]["exporters"])


def test_agent_load_balances_by_trace_id() -> None:
    cfg = config("agent.yaml")
    lb = cfg["exporters"]["loadbalancing"]
    assert lb["routing_key"] == "traceID"
    assert "dns" in lb["resolver"] or "k8s" in lb["resolver"] or "static" in lb["resolver"]
    assert cfg["service"]["pipelines"]["traces"]["exporters"] == ["loadbalancing"]


def test_gateway_tail_sampling_keeps_slow_and_failed_llm_traces() -> None:
    cfg = config("gateway.yaml")
    pipes = cfg["service"]["pipelines"]
    # spanmetrics sees every span: it must not sit behind tail_sampling.
    for pid, pipe in pipes.items():
        if "spanmetrics" in pipe.get("exporters", []):
            assert "tail_sampling" not in pipe.get("processors", []), pid
    assert any("tail_sampling" in p.get("processors", []) for p in pipes.values())
    # The file exporter (input of `openai-latency report`) gets every span too: percentiles from
    # the sampled traces would be biased to the slow and failed calls the sampler keeps.
    for pid, pipe in pipes.items():
        if "file/traces" in pipe.get("exporters", []):
            assert "tail_sampling" not in pipe.get("processors", []), pid
    assert "file/traces" in pipes["traces/all"]["exporters"]
    policies = cfg["processors"]["tail_sampling"]["policies"]
    conditions = " ".join(
        cond for p in policies if p["type"] == "ottl_condition" for cond in p["ottl_condition"]["span"]
    )
    assert "STATUS_CODE_ERROR" in conditions
    assert "end_time_unix_nano - start_time_unix_nano" in conditions
    assert 'attributes["gen_ai.operation.name"]' in conditions
    assert 'attributes["openai_latency.time_to_first_token"]' in conditions
    assert cfg["processors"]["tail_sampling"]["decision_wait"]


def built_collector_version() -> str:
    """The collector release of stack/otelcol/go.mod (what `make stack-test` builds and runs)."""
    gomod = (ROOT / "stack" / "otelcol" / "go.mod").read_text()
    found = re.search(r"^\s*go\.opentelemetry\.io/collector/otelcol v(\S+)$", gomod, re.MULTILINE)
    assert found, "stack/otelcol/go.mod requires no go.opentelemetry.io/collector/otelcol"
    return found.group(1)


def test_images_are_the_collector_release_built_and_tested() -> None:
    compose: dict[str, Any] = load_yaml(ROOT / "docker-compose.yml")
    image = compose["services"]["collector"]["image"]
    assert image == f"otel/opentelemetry-collector-contrib:{built_collector_version()}"
    # Every contrib module of the distribution is at that one release.
    gomod = (ROOT / "stack" / "otelcol" / "go.mod").read_text()
    contrib_modules = re.findall(r"collector-contrib/\S+ (v\S+)", gomod)
    assert contrib_modules and set(contrib_modules) == {f"v{built_collector_version()}"}
    override: dict[str, Any] = load_yaml(ROOT / "deploy" / "compose.scale-out.yml")
    assert override["services"]["otel-gateway"]["image"] == image


def test_component_list_has_every_kind() -> None:
    known = contrib()
    for kind in KINDS:
        assert isinstance(known[kind], dict) and len(known[kind]) > 5, kind

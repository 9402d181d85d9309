"""Prometheus names of everything the collector pipeline exposes to Prometheus.

Two sources, translated the way the collector's `prometheus` exporter does it with its default
settings (no `namespace`, translation strategy UnderscoreEscapingWithSuffixes, which is also what
`add_metric_suffixes: true` meant before `translation_strategy` existed):

- the metric name's dots and other invalid characters become `_`;
- the unit becomes a suffix: `s` -> `_seconds`, `ms` -> `_milliseconds`, `By` -> `_bytes`, ...;
  annotations in braces (`{token}`, `{retry}`) are dropped, so they add no suffix; `1` adds
  `_ratio` for gauges only;
- monotonic sums (counters) get `_total`;
- histograms are exposed as `<name>_bucket`, `<name>_sum`, `<name>_count`;
- attribute keys become labels the same way (`gen_ai.request.model` -> `gen_ai_request_model`).

References: the exporter's README (exporter/prometheusexporter, options `namespace`,
`add_metric_suffixes`, `translation_strategy`) and the Prometheus translator it uses
(pkg/translator/prometheus in opentelemetry-collector-contrib); the spanmetrics connector builds
`<namespace>.calls` (sum, no unit) and `<namespace>.duration` (histogram, unit from
`histogram.unit`), see connector/spanmetricsconnector.

Our metrics (README "Metrics") are listed here on purpose and not imported from the package: they are a
public contract, and a change must show up as a failing test next to the dashboard that uses them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["histogram", "counter", "gauge", "updowncounter"]


@dataclass(frozen=True)
class OtelMetric:
    name: str
    unit: str
    kind: Kind
    labels: frozenset[str]


# Labels every series scraped from the collector can carry besides the metric's own attributes.
COMMON_LABELS = frozenset(
    {"job", "instance", "otel_scope_name", "otel_scope_version", "otel_scope_schema_url"}
)

# Metric attributes of the instrumentation (low cardinality, metrics.METRIC_ATTRIBUTES), as OTel keys.
_OUR_ATTRS = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "server.address",
    "server.port",
    "error.type",
    "openai_latency.transport",
)


def label_name(key: str) -> str:
    """OTel attribute key -> Prometheus label name (underscore escaping)."""
    out = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    if out[:1].isdigit():
        out = "key_" + out
    return out


def _attrs(*extra: str) -> frozenset[str]:
    return frozenset(label_name(a) for a in (*_OUR_ATTRS, *extra))


# README, table "Metrics".
OUR_METRICS: tuple[OtelMetric, ...] = (
    OtelMetric("gen_ai.client.operation.duration", "s", "histogram", _attrs()),
    OtelMetric("gen_ai.client.token.usage", "{token}", "histogram", _attrs("gen_ai.token.type")),
    OtelMetric("gen_ai.client.operation.time_to_first_chunk", "s", "histogram", _attrs()),
    OtelMetric("gen_ai.client.operation.time_per_output_chunk", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.time_to_first_token", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.time_to_first_answer_token", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.reasoning.duration", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.time_per_output_token", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.server.queue_time", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.server.prefill_time", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.server.time_to_first_token", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.server.time_per_output_token", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.client_overhead.time_to_first_token", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.time_to_first_audio", "s", "histogram", _attrs()),
    OtelMetric("openai_latency.phase.duration", "s", "histogram", _attrs("openai_latency.phase")),
    OtelMetric("openai_latency.retries", "{retry}", "counter", _attrs()),
)

_UNIT_WORDS = {
    "d": "days",
    "h": "hours",
    "min": "minutes",
    "s": "seconds",
    "ms": "milliseconds",
    "us": "microseconds",
    "ns": "nanoseconds",
    "By": "bytes",
    "KiBy": "kibibytes",
    "MiBy": "mebibytes",
    "GiBy": "gibibytes",
    "KBy": "kilobytes",
    "MBy": "megabytes",
    "GBy": "gigabytes",
    "%": "percent",
    "Hz": "hertz",
    "V": "volts",
    "A": "amperes",
    "J": "joules",
    "W": "watts",
    "g": "grams",
    "Cel": "celsius",
    "m": "meters",
}


def unit_suffix(unit: str, kind: Kind) -> str:
    """The unit part of the Prometheus name ('' when none)."""
    unit = re.sub(r"\{[^}]*\}", "", unit).strip()
    if not unit:
        return ""
    if unit == "1":
        return "ratio" if kind == "gauge" else ""
    if "/" in unit:
        num, den = unit.split("/", 1)
        left = _UNIT_WORDS.get(num, num) if num else ""
        right = {"s": "second", "m": "minute", "h": "hour", "d": "day"}.get(den, den)
        return f"{left}_per_{right}" if left else f"per_{right}"
    return _UNIT_WORDS.get(unit, unit)


def base_name(name: str, unit: str, kind: Kind) -> str:
    """OTel metric -> Prometheus metric family name (without histogram series suffixes)."""
    out = re.sub(r"[^a-zA-Z0-9_:]", "_", name)
    out = re.sub(r"__+", "_", out).strip("_")
    suffix = unit_suffix(unit, kind)
    if suffix and not out.endswith("_" + suffix):
        out += "_" + suffix
    if kind == "counter" and not out.endswith("_total"):
        out += "_total"
    return out


def series_names(name: str, unit: str, kind: Kind) -> set[str]:
    """Every metric name Prometheus stores for one OTel metric."""
    base = base_name(name, unit, kind)
    if kind == "histogram":
        return {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
    return {base}


def spanmetrics_metrics(connector_cfg: dict[str, object]) -> tuple[OtelMetric, OtelMetric]:
    """The two metrics the spanmetrics connector emits for a given connector configuration."""
    namespace = str(connector_cfg.get("namespace", "traces.span.metrics"))
    histogram = connector_cfg.get("histogram") or {}
    assert isinstance(histogram, dict)
    unit = str(histogram.get("unit", "ms"))
    dims = connector_cfg.get("dimensions") or []
    assert isinstance(dims, list)
    labels = frozenset(
        {"service_name", "span_name", "span_kind", "status_code"}
        | {label_name(str(d["name"])) for d in dims if isinstance(d, dict)}
    )
    prefix = f"{namespace}." if namespace else ""
    return (
        OtelMetric(f"{prefix}calls", "", "counter", labels),
        OtelMetric(f"{prefix}duration", unit, "histogram", labels),
    )


def produced(metrics: tuple[OtelMetric, ...] | list[OtelMetric]) -> dict[str, frozenset[str]]:
    """Prometheus metric name -> label names it can carry."""
    out: dict[str, frozenset[str]] = {}
    for m in metrics:
        extra = {"le"} if m.kind == "histogram" else set()
        for series in series_names(m.name, m.unit, m.kind):
            labels = m.labels | COMMON_LABELS
            out[series] = labels | extra if series.endswith("_bucket") else labels
    return out

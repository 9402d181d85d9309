"""The real components' own HTTP APIs: Jaeger's query API and Prometheus's HTTP API."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass
from typing import Any

from openai_latency.cli.spans.names import NO_CALL_OPERATIONS

#: gen_ai.operation.name of spans that are no LLM call (none, or a tool's or an agent's)
NOT_CALLS: frozenset[str | None] = frozenset({None, *NO_CALL_OPERATIONS})


def get_json(url: str, timeout: float = 15.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


# --------------------------------------------------------------------------------------------- Jaeger


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    tags: dict[str, Any]
    start_us: int = 0  # Jaeger's startTime: microseconds since the epoch

    @property
    def is_error(self) -> bool:
        return self.tags.get("otel.status_code") == "ERROR"


@dataclass(frozen=True)
class Trace:
    trace_id: str
    spans: tuple[Span, ...]

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]

    def children(self, span: Span) -> list[Span]:
        return [s for s in self.spans if s.parent_id == span.span_id]

    @property
    def root(self) -> Span | None:
        ids = {s.span_id for s in self.spans}
        roots = [s for s in self.spans if s.parent_id is None or s.parent_id not in ids]
        return roots[0] if len(roots) == 1 else None

    @property
    def operations(self) -> list[Span]:
        """The LLM operation spans (``chat <model>``, ...), in start order: the ones with a
        gen_ai.operation.name that is no tool's or agent's (``execute_tool``, ...)."""
        calls = [s for s in self.spans if s.tags.get("gen_ai.operation.name") not in NOT_CALLS]
        return sorted(calls, key=lambda s: s.start_us)


def parse_trace(data: dict[str, Any]) -> Trace:
    spans = []
    for raw in data["spans"]:
        parents = [r["spanID"].zfill(16) for r in raw.get("references", []) if r.get("refType") == "CHILD_OF"]
        tags = {t["key"]: t["value"] for t in raw.get("tags", [])}
        spans.append(
            Span(
                raw["traceID"].zfill(32),
                raw["spanID"].zfill(16),
                parents[0] if parents else None,
                raw["operationName"],
                tags,
                int(raw.get("startTime", 0)),
            )
        )
    # Jaeger's JSON drops leading zeros of ids; OTLP and exemplars have them.
    return Trace(data["traceID"].zfill(32), tuple(spans))


class JaegerApi:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def services(self) -> list[str]:
        return list(get_json(f"{self.url}/api/services")["data"] or [])

    def traces(self, service: str, operation: str | None = None, limit: int = 5000) -> list[Trace]:
        params = {"service": service, "limit": str(limit), "lookback": "1h"}
        if operation:
            params["operation"] = operation
        data = get_json(f"{self.url}/api/traces?{urllib.parse.urlencode(params)}", timeout=30)
        return [parse_trace(t) for t in data["data"] or []]

    def trace(self, trace_id: str) -> Trace | None:
        try:
            data = get_json(f"{self.url}/api/traces/{trace_id}")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise
        found = data.get("data") or []
        return parse_trace(found[0]) if found else None


def span_names(traces: list[Trace]) -> Counter[str]:
    return Counter(s.name for t in traces for s in t.spans)


# ----------------------------------------------------------------------------------------- Prometheus


class PrometheusApi:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _get(self, path: str, **params: str) -> Any:
        body = get_json(f"{self.url}{path}?{urllib.parse.urlencode(params)}")
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus {path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self._get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def values(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """The finite values of an instant query (NaN from a histogram_quantile with no data dropped)."""
        out = []
        for item in self.query(expr):
            value = float(item["value"][1])
            if math.isfinite(value):
                out.append((item["metric"], value))
        return out

    def exemplars(self, expr: str, start: float, end: float) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/query_exemplars", query=expr, start=str(start), end=str(end)))

    def rules(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/rules")["groups"])

    def alerts(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/alerts")["alerts"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/targets")["activeTargets"])


# ------------------------------------------------------------------------------------ the dashboard

# Template variables of deploy/grafana/dashboards/openai-latency.json, filled as Grafana does with
# "All" selected (allValue ".*") and a $__rate_interval of 4 x the 10 s scrape interval, rounded up.
DASHBOARD_VARIABLES = {"$model": ".*", "${model}": ".*", "$__rate_interval": "1m"}


@dataclass(frozen=True)
class PanelQuery:
    panel: str
    expr: str
    exemplar: bool


def dashboard_queries(dashboard: dict[str, Any]) -> list[PanelQuery]:
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target.get("expr")
            if not expr:
                continue
            for name, value in DASHBOARD_VARIABLES.items():
                expr = expr.replace(name, value)
            assert "$" not in expr, f"unfilled variable in {panel['title']!r}: {expr}"
            queries.append(PanelQuery(panel["title"], expr, bool(target.get("exemplar"))))
    return queries

"""Grafana: every panel queries metric names (and labels) that the pipeline produces.

The produced set is computed, not listed: the spanmetrics connector's names from its config in
collector/otelcol.yaml, and the instrumentation's metrics (README "Metrics") translated to Prometheus
naming, both by tests/stack/prom_names.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import prom_names
from .conftest import ROOT, load_yaml, require_tool

DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "openai-latency.json"
PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"

PROMQL_FUNCTIONS_AND_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "and",
    "or",
    "unless",
    "inf",
    "nan",
    "atan2",
}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")


def produced_metrics() -> dict[str, frozenset[str]]:
    collector: dict[str, Any] = load_yaml(ROOT / "collector" / "otelcol.yaml")
    spanmetrics = prom_names.spanmetrics_metrics(collector["connectors"]["spanmetrics"])
    return prom_names.produced([*prom_names.OUR_METRICS, *spanmetrics])


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def expressions() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    out: list[tuple[str, str]] = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            out.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for var in dashboard()["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            out.append((f"variable {var['name']}", query))
    return out


def strip_strings(expr: str) -> str:
    return re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', expr)


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression (or Grafana label_values()) selects."""
    label_values = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*\w+\s*\)\s*", expr)
    if label_values:
        return {label_values.group(1)}
    text = strip_strings(expr)
    text = GROUPING.sub(" ", text)
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range / subquery durations
    text = re.sub(r"\$\w+", " ", text)  # Grafana variables
    names: set[str] = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        word, is_call = m.group(1), m.group(2)
        if is_call or word in PROMQL_FUNCTIONS_AND_KEYWORDS:
            continue
        names.add(word)
    return names


def labels_used(expr: str) -> dict[str, set[str]]:
    """metric name -> labels its selector matches on; '*' -> labels of grouping clauses."""
    text = strip_strings(expr)
    out: dict[str, set[str]] = {}
    for m in SELECTOR.finditer(text):
        out.setdefault(m.group(1), set()).update(MATCHER_LABEL.findall(m.group(2)))
    for m in GROUPING.finditer(text):
        out.setdefault("*", set()).update(x.strip() for x in m.group(2).split(",") if x.strip())
    return out


def test_prometheus_names_of_the_pipeline_are_pinned() -> None:
    names = set(produced_metrics())
    for expected in (
        "gen_ai_client_operation_duration_seconds_bucket",
        "gen_ai_client_token_usage_sum",
        "gen_ai_client_operation_time_to_first_chunk_seconds_bucket",
        "gen_ai_client_operation_time_per_output_chunk_seconds_bucket",
        "openai_latency_time_to_first_token_seconds_bucket",
        "openai_latency_time_per_output_token_seconds_count",
        "openai_latency_phase_duration_seconds_bucket",
        "openai_latency_retries_total",
        "traces_span_metrics_calls_total",
        "traces_span_metrics_duration_seconds_bucket",
    ):
        assert expected in names


def test_metric_name_extraction() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, span_name) (rate(foo_bucket{span_name=~"a\\\\.b|c"}[5m]))) '
        '/ scalar(sum(rate(bar_count{x="y"}[$__rate_interval]))) + on(job) group_left(instance) baz'
    )
    assert metric_names(expr) == {"foo_bucket", "bar_count", "baz"}
    assert metric_names("label_values(qux_count, model)") == {"qux_count"}
    assert labels_used(expr)["foo_bucket"] == {"span_name"}


def test_every_query_uses_only_produced_metric_names() -> None:
    produced = produced_metrics()
    problems = []
    found_any = False
    for where, expr in expressions():
        names = metric_names(expr)
        if not names and not where.startswith("variable"):
            problems.append(f"{where}: no metric found in {expr!r}")
        found_any = found_any or bool(names)
        for name in names - set(produced):
            problems.append(f"{where}: {name} is not produced by the pipeline")
    assert found_any
    assert not problems, "\n".join(problems)


def test_every_query_uses_only_labels_the_metrics_carry() -> None:
    produced = produced_metrics()
    problems = []
    for where, expr in expressions():
        used = labels_used(expr)
        selected = metric_names(expr)
        allowed_anywhere = set().union(*(produced[n] for n in selected if n in produced))
        for metric, labels in used.items():
            allowed = allowed_anywhere if metric == "*" else produced.get(metric, frozenset())
            for label in labels - set(allowed):
                problems.append(f"{where}: label {label} not carried by {metric}")
    assert not problems, "\n".join(problems)


def test_promql_parses_with_promtool(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    rules = []
    for i, (_, expr) in enumerate(expressions()):
        if expr.startswith("label_values("):
            continue
        concrete = expr.replace("$__rate_interval", "1m").replace("$model", ".*")
        rules.append({"record": f"dashboard:check:{i}", "expr": concrete})
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))  # JSON is YAML
    result = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_json_is_generated_from_make_dashboard() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "grafana" / "make_dashboard.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_dashboard_has_the_required_panels() -> None:
    text = json.dumps(dashboard())
    for metric in (
        "openai_latency_time_to_first_token_seconds_bucket",  # TTFT p50/p95 per model
        "openai_latency_phase_duration_seconds_sum",  # phase breakdown
        "traces_span_metrics_duration_seconds_bucket",  # phase p95 from spanmetrics
        "gen_ai_client_operation_duration_seconds_count",  # error rate by error.type
        "openai_latency_retries_total",  # retries
        "gen_ai_client_token_usage_sum",  # output tokens/s
    ):
        assert metric in text, metric
    ttft = [p for p in dashboard()["panels"] if p["type"] != "row" and "first token" in p["title"].lower()]
    assert ttft and all(t["exemplar"] for t in ttft[0]["targets"])
    assert {"0.5", "0.95"} <= {t["expr"].split(",")[0].split("(")[1] for t in ttft[0]["targets"]}


def test_datasources_link_exemplars_to_jaeger() -> None:
    cfg: dict[str, Any] = load_yaml(PROVISIONING / "datasources" / "datasources.yaml")
    by_uid = {ds["uid"]: ds for ds in cfg["datasources"]}
    assert by_uid["prometheus"]["type"] == "prometheus"
    assert by_uid["jaeger"]["type"] == "jaeger"
    dest = by_uid["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    # The collector's prometheus exporter puts the trace id of an exemplar in label trace_id.
    assert {"name": "trace_id", "datasourceUid": "jaeger"}.items() <= dest[0].items()
    used_uids = {
        p["datasource"]["uid"] for p in dashboard()["panels"] if isinstance(p.get("datasource"), dict)
    }
    assert used_uids <= set(by_uid)


def test_dashboard_provider_points_at_the_mounted_folder() -> None:
    cfg: dict[str, Any] = load_yaml(PROVISIONING / "dashboards" / "dashboards.yaml")
    compose: dict[str, Any] = load_yaml(ROOT / "docker-compose.yml")
    mounts = compose["services"]["grafana"]["volumes"]
    path = cfg["providers"][0]["options"]["path"]
    assert f"./deploy/grafana/dashboards:{path}:ro" in mounts


def test_panel_ids_are_unique() -> None:
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))

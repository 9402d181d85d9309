"""Prometheus configs pass `promtool check config` and scrape what the collector exposes."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from .conftest import ROOT, as_deployed, load_yaml, require_tool

CONFIGS = ["deploy/prometheus/prometheus.yml", "deploy/prometheus/prometheus.scale-out.yml"]


@pytest.mark.parametrize("path", CONFIGS)
def test_promtool_check_config(path: str) -> None:
    promtool = require_tool("promtool")
    result = subprocess.run(
        [promtool, "check", "config", path], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_scrapes_the_collector_prometheus_exporter() -> None:
    cfg: dict[str, Any] = load_yaml(ROOT / CONFIGS[0])
    collector: dict[str, Any] = as_deployed(load_yaml(ROOT / "collector" / "otelcol.yaml"))
    port = collector["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]
    targets = [
        t for job in cfg["scrape_configs"] for sc in job.get("static_configs", []) for t in sc["targets"]
    ]
    assert f"collector:{port}" in targets


def test_scale_out_scrapes_every_gateway() -> None:
    cfg: dict[str, Any] = load_yaml(ROOT / CONFIGS[1])
    gateway: dict[str, Any] = as_deployed(load_yaml(ROOT / "collector" / "gateway.yaml"))
    port = int(gateway["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1])
    sd = [sd for job in cfg["scrape_configs"] for sd in job.get("dns_sd_configs", [])]
    assert any(s["names"] == ["otel-gateway"] and s["port"] == port for s in sd)


def test_scale_out_keeps_the_gateways_series_apart() -> None:
    """Every gateway exports spanmetrics with the same job/instance (from the app's resource): with
    honor_labels the two gateways' counters would become one series that jumps between them."""
    cfg: dict[str, Any] = load_yaml(ROOT / CONFIGS[1])
    (gateway_job,) = [job for job in cfg["scrape_configs"] if job["job_name"] == "otel-gateway"]
    assert gateway_job.get("honor_labels", False) is False


@pytest.mark.parametrize("path", CONFIGS)
def test_alert_rules_are_loaded(path: str) -> None:
    cfg: dict[str, Any] = load_yaml(ROOT / path)
    assert cfg["rule_files"] == ["alerts.yml"]


def test_alert_rules_unit_tests() -> None:
    """`promtool test rules`: each alert fires on the series it is about and stays quiet otherwise."""
    promtool = require_tool("promtool")
    result = subprocess.run(
        [promtool, "test", "rules", "alerts.test.yml"],
        cwd=ROOT / "deploy" / "prometheus",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_unit_test_where_it_fires_and_one_where_it_stays_quiet() -> None:
    rules: dict[str, Any] = load_yaml(ROOT / "deploy" / "prometheus" / "alerts.yml")
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests: dict[str, Any] = load_yaml(ROOT / "deploy" / "prometheus" / "alerts.test.yml")
    cases = [case for t in tests["tests"] for case in t.get("alert_rule_test", [])]
    fires = {c["alertname"] for c in cases if c.get("exp_alerts")}
    quiet = {c["alertname"] for c in cases if not c.get("exp_alerts")}
    assert alerts, "no alerts in alerts.yml"
    assert alerts - fires == set(), "alerts never seen firing in alerts.test.yml"
    assert alerts - quiet == set(), "alerts never seen quiet in alerts.test.yml"

"""The image tags of docker-compose.yml are the versions `make stack-test` builds and runs.

The Collector and Jaeger versions come from scripts/build-stack.sh itself (`--print-versions`: the
same derivation from stack/*/go.mod that names the binaries it builds; no Go needed). Prometheus is
Debian's package: its promtool (installed by scripts/install-stack-tools.sh, same package as the
prometheus binary that `make stack-test` runs) must be the version of the prom/prometheus tag.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from .conftest import ROOT, load_yaml, require_tool

OVERRIDE = "deploy/compose.scale-out.yml"

# Jaeger releases its v1 and v2 lines from one commit; the pairs as Jaeger's CHANGELOG.md names them
# ("v1.75.0 / v2.12.0 (2025-11-18)"; the tags v1.75.0 and v2.12.0 are the same commit, 1c5531b).
# A go.mod bump to a module version not listed here fails until its pair is confirmed there.
JAEGER_CHANGELOG_PAIRS = {
    "v1.73.0": "2.10.0",
    "v1.74.0": "2.11.0",
    "v1.75.0": "2.12.0",
    "v1.76.0": "2.13.0",
}


def build_script_versions() -> dict[str, str]:
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-stack.sh"), "--print-versions"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)


def images(path: str = "docker-compose.yml") -> dict[str, str]:
    data: dict[str, Any] = load_yaml(ROOT / path)
    return {name: svc["image"] for name, svc in data["services"].items() if "image" in svc}


def gomod_require(module_dir: str, module: str) -> str:
    gomod = (ROOT / "stack" / module_dir / "go.mod").read_text()
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)(?:\s+//.*)?$", gomod, re.MULTILINE)
    assert found, f"stack/{module_dir}/go.mod requires no {module}"
    return found.group(1)


def test_build_script_reads_the_go_mod_versions() -> None:
    versions = build_script_versions()
    assert versions["JAEGER_MODULE_VERSION"] == gomod_require("jaeger", "github.com/jaegertracing/jaeger")
    otelcol = gomod_require("otelcol", "go.opentelemetry.io/collector/otelcol")
    assert versions["OTELCOL_VERSION"] == otelcol.removeprefix("v")


def test_jaeger_v2_version_is_the_changelog_pair_of_the_module_version() -> None:
    versions = build_script_versions()
    module = versions["JAEGER_MODULE_VERSION"]
    assert module in JAEGER_CHANGELOG_PAIRS, (
        f"jaeger module {module}: look up its v2 release in Jaeger's CHANGELOG.md and add the pair"
    )
    assert versions["JAEGER_VERSION"] == JAEGER_CHANGELOG_PAIRS[module]


def test_compose_jaeger_image_is_the_version_built() -> None:
    assert images()["jaeger"] == f"jaegertracing/jaeger:{build_script_versions()['JAEGER_VERSION']}"


@pytest.mark.parametrize(
    ("path", "service"), [("docker-compose.yml", "collector"), (OVERRIDE, "otel-gateway")]
)
def test_compose_collector_images_are_the_release_built(path: str, service: str) -> None:
    version = build_script_versions()["OTELCOL_VERSION"]
    assert images(path)[service] == f"otel/opentelemetry-collector-contrib:{version}"


def debian_prometheus_version() -> str:
    """'2.42.0' from 'promtool, version 2.42.0+ds (branch: debian/sid, ...)'."""
    out = subprocess.run(
        [require_tool("promtool"), "--version"], capture_output=True, text=True, timeout=30, check=True
    )
    found = re.search(r"version (\d+\.\d+\.\d+)", out.stdout + out.stderr)
    assert found, out.stdout + out.stderr
    return found.group(1)


def test_compose_prometheus_image_is_the_version_that_runs_here() -> None:
    assert images()["prometheus"] == f"prom/prometheus:v{debian_prometheus_version()}"


def test_stack_doc_names_the_versions_that_ran() -> None:
    doc = (ROOT / "docs" / "STACK.md").read_text()
    versions = build_script_versions()
    for image in (
        f"otel/opentelemetry-collector-contrib:{versions['OTELCOL_VERSION']}",
        f"jaegertracing/jaeger:{versions['JAEGER_VERSION']}",
        f"prom/prometheus:v{debian_prometheus_version()}",
    ):
        assert f"`{image}`" in doc, image
    assert f"module {versions['JAEGER_MODULE_VERSION']}" in doc

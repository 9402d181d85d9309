"""docker-compose.yml: parsed and validated by a real Compose implementation, plus stack rules."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from openai_latency.fake_server.cli import build_parser

from .conftest import ROOT, load_yaml, load_yaml_text, require_tool

OVERRIDE = "deploy/compose.scale-out.yml"
# Built FROM scratch (no shell, no wget/curl): Docker cannot probe them from inside.
# collector-ready probes the collector's health_check extension instead.
NO_IN_CONTAINER_PROBE = {"collector", "otel-gateway"}
# One-shot or client-only services.
NOT_SERVERS = {"collector-ready", "otlp-out-init", "loadgen"}
FAKE_PORT: int = build_parser().get_default("port")


def compose(*files: str) -> subprocess.CompletedProcess[str]:
    exe = require_tool("docker-compose")
    args = [exe]
    for f in files:
        args += ["-f", f]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    return subprocess.run(
        [*args, "config", "-q"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def services(path: str = "docker-compose.yml") -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(ROOT / path)
    return dict(data["services"])


@pytest.mark.parametrize(
    "files", [("docker-compose.yml",), ("docker-compose.yml", OVERRIDE)], ids=["base", "scale-out"]
)
def test_docker_compose_config_validates(files: tuple[str, ...]) -> None:
    result = compose(*files)
    assert result.returncode == 0, result.stderr or result.stdout


def test_services_of_the_stack() -> None:
    assert {"collector", "jaeger", "prometheus", "grafana", "fake-llm", "example", "loadgen"} <= set(
        services()
    )


@pytest.mark.parametrize("path", ["docker-compose.yml", OVERRIDE])
def test_images_are_pinned(path: str) -> None:
    for name, svc in services(path).items():
        image = svc.get("image")
        if image is None:
            continue
        if "build" in svc:  # our own images, built locally
            assert image.startswith("openai-latency/"), name
            continue
        repo, _, tag = image.rpartition(":")
        assert repo and "/" not in tag, f"{name}: {image} has no tag"
        assert tag != "latest" and re.search(r"\d+\.\d+", tag), f"{name}: {image} is not pinned to a version"


def test_health_checks_and_depends_on_conditions() -> None:
    svcs = services()
    for name, svc in svcs.items():
        if name not in NO_IN_CONTAINER_PROBE | NOT_SERVERS:
            assert "healthcheck" in svc, f"{name} has no healthcheck"
        for dep, spec in (svc.get("depends_on") or {}).items():
            assert isinstance(spec, dict) and "condition" in spec, f"{name} -> {dep}: use a condition"
            cond = spec["condition"]
            if "healthcheck" in svcs[dep]:
                assert cond == "service_healthy", f"{name} -> {dep}: {cond}"
            elif dep in ("collector-ready", "otlp-out-init"):
                assert cond == "service_completed_successfully", f"{name} -> {dep}: {cond}"
    # Whatever sends telemetry waits until the collector answers on its health_check port.
    assert "collector-ready" in svcs["example"]["depends_on"]
    probe = " ".join(svcs["collector-ready"]["command"])
    assert "collector:13133" in probe


def test_collector_mounts_config_and_output_folder() -> None:
    volumes = services()["collector"]["volumes"]
    assert "./collector/otelcol.yaml:/etc/otelcol-contrib/config.yaml:ro" in volumes
    assert any(v.endswith(":/otlp-out") for v in volumes)
    ports = {p.split(":")[0] for p in services()["collector"]["ports"]}
    assert {"4317", "4318"} <= ports


def test_bind_mounted_files_exist() -> None:
    for path in ("docker-compose.yml", OVERRIDE):
        for name, svc in services(path).items():
            for vol in svc.get("volumes", []):
                src = vol.split(":")[0]
                if src.startswith("./out/"):
                    continue  # created at run time
                assert (ROOT / src).exists(), f"{path}: {name} mounts missing {src}"


def test_build_targets_exist_in_the_dockerfile() -> None:
    for name, svc in services().items():
        build = svc.get("build")
        if not build:
            continue
        dockerfile = (ROOT / build["context"] / build["dockerfile"]).read_text()
        assert re.search(rf"^FROM .+ AS {re.escape(build['target'])}$", dockerfile, re.M), name
    dockerignore = ROOT / "deploy" / "docker" / "Dockerfile.dockerignore"
    assert dockerignore.exists()


def test_example_runs_under_opentelemetry_instrument_against_the_fake_server() -> None:
    svcs = services()
    example = svcs["example"]
    assert example["command"][0] == "opentelemetry-instrument"
    env = example["environment"]
    assert env["OPENAI_BASE_URL"] == f"http://fake-llm:{FAKE_PORT}/v1"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4317"
    fake = svcs["fake-llm"]["command"]
    assert fake[:3] == ["python", "-m", "openai_latency.fake_server"]


def test_the_fake_server_runs_on_its_default_port_everywhere() -> None:
    """The CLI's default (no known provider's: tests/test_default_port.py) is the port of the compose
    service, its image and the example backend's default base URL."""
    fake = services()["fake-llm"]
    command = fake["command"]
    assert command[command.index("--port") + 1] == str(FAKE_PORT)
    assert fake["ports"] == [f"{FAKE_PORT}:{FAKE_PORT}"]
    assert f"http://127.0.0.1:{FAKE_PORT}/v1/models" in " ".join(fake["healthcheck"]["test"])
    dockerfile = (ROOT / "deploy" / "docker" / "Dockerfile").read_text()
    assert f"EXPOSE {FAKE_PORT}\n" in dockerfile
    assert f'"--port", "{FAKE_PORT}"]' in dockerfile
    app = (ROOT / "examples" / "backend" / "app.py").read_text()
    assert f'"OPENAI_BASE_URL", "http://127.0.0.1:{FAKE_PORT}/v1"' in app


def test_prometheus_runs_with_exemplar_storage() -> None:
    cmd = services()["prometheus"]["command"]
    assert "--enable-feature=exemplar-storage" in cmd


def test_output_folder_belongs_to_the_collector_user_before_it_starts() -> None:
    """With STACK_UID/STACK_GID, a collector running as that user needs ./out/otlp to be its own;
    Docker would create a missing bind-mount source as root (the collector then crash-loops)."""
    svcs = services()
    init = svcs["otlp-out-init"]
    assert init["user"] == "0:0"
    assert "./out/otlp:/otlp-out" in init["volumes"]
    # -R: a file left root-owned in it by an earlier run as root would crash-loop the collector too.
    assert "chown -R ${STACK_UID:-0}:${STACK_GID:-0} /otlp-out" in " ".join(init["command"])
    for path, name in (("docker-compose.yml", "collector"), (OVERRIDE, "otel-gateway")):
        svc = services(path)[name]
        assert svc["depends_on"]["otlp-out-init"]["condition"] == "service_completed_successfully"


def test_output_folder_init_hands_over_files_left_by_a_root_run(tmp_path: Path) -> None:
    """The one-shot's command as Compose resolves it with STACK_UID/STACK_GID set, run by a shell as
    root on a folder holding what an earlier run as root left: folder, files and subfolders end up
    owned by STACK_UID:STACK_GID (busybox's sh and chown take the same arguments)."""
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    exe = require_tool("docker-compose")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    env.update(STACK_UID="4321", STACK_GID="4322")
    resolved = subprocess.run(
        [exe, "config"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    command = load_yaml_text(resolved)["services"]["otlp-out-init"]["command"]
    assert command[:2] == ["sh", "-c"], command
    out = tmp_path / "otlp"
    (out / "old").mkdir(parents=True)
    for leftover in (out / "traces.jsonl", out / "old" / "metrics.jsonl"):
        leftover.write_text("{}\n")
        os.chown(leftover, 0, 0)
    script = command[2].replace("/otlp-out", str(out))
    subprocess.run(["sh", "-c", script], check=True, timeout=30)
    owners = {
        str(p.relative_to(tmp_path)): (p.stat().st_uid, p.stat().st_gid) for p in [out, *out.rglob("*")]
    }
    assert owners == dict.fromkeys(owners, (4321, 4322)), owners
    assert set(owners) == {"otlp", "otlp/old", "otlp/traces.jsonl", "otlp/old/metrics.jsonl"}


def test_jaeger_runs_the_project_config() -> None:
    jaeger = services()["jaeger"]
    assert jaeger["command"] == ["--config=/etc/jaeger/config.yaml"]
    assert "./deploy/jaeger/config.yaml:/etc/jaeger/config.yaml:ro" in jaeger["volumes"]

"""The stack's components on free loopback ports, each run with the project's own config file.

- Collector (stack/otelcol): ``collector/*.yaml`` unchanged; their listen and target addresses come
  from the ``${env:...}`` references in them (the defaults are what docker-compose.yml uses).
- Jaeger v2 (stack/jaeger): ``deploy/jaeger/config.yaml``, the same way.
- Prometheus: ``deploy/prometheus/prometheus*.yml`` with only the scrape targets replaced (Prometheus
  has no environment expansion in its config; everything else, rule files included, is kept).
- The example backend: the ``example`` service's command and environment from docker-compose.yml,
  with the OTLP endpoint and the LLM base URL pointing at the loopback ports.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.processes import disabled_instrumentations, free_port, tool

from .procs import ROOT, Service, Stack, http_ok

COMPOSE = ROOT / "docker-compose.yml"


@dataclass(frozen=True)
class Binaries:
    otelcol: str
    jaeger: str
    prometheus: str
    promtool: str

    @staticmethod
    def from_build_script() -> Binaries:
        """Paths printed by ``scripts/build-stack.sh --print-env`` (fails if a binary is not built)."""
        result = subprocess.run(
            ["bash", str(ROOT / "scripts" / "build-stack.sh"), "--print-env"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                "the stack binaries are not built: run `make stack-test` (or scripts/build-stack.sh)\n"
                + result.stderr
            )
        env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        return Binaries(env["OTELCOL_BIN"], env["JAEGER_BIN"], env["PROMETHEUS_BIN"], env["PROMTOOL_BIN"])


def compose_service(name: str, path: Path = COMPOSE) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    service: dict[str, Any] = data["services"][name]
    return service


# ------------------------------------------------------------------------------------------ collector


@dataclass
class Collector:
    service: Service
    otlp_grpc: int
    otlp_http: int
    health: int
    prometheus: int
    telemetry: int
    out_dir: Path

    @property
    def otlp_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.otlp_grpc}"


def collector_env(out_dir: Path, jaeger_otlp: str | None = None) -> tuple[dict[str, str], dict[str, int]]:
    ports = {name: free_port() for name in ("otlp_grpc", "otlp_http", "health", "prometheus", "telemetry")}
    env = {
        "OTELCOL_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{ports['otlp_grpc']}",
        "OTELCOL_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{ports['otlp_http']}",
        "OTELCOL_HEALTH_ENDPOINT": f"127.0.0.1:{ports['health']}",
        "OTELCOL_PROMETHEUS_ENDPOINT": f"127.0.0.1:{ports['prometheus']}",
        "OTELCOL_TELEMETRY_HOST": "127.0.0.1",
        "OTELCOL_TELEMETRY_PORT": str(ports["telemetry"]),
        "OTELCOL_OUT_DIR": str(out_dir),
    }
    if jaeger_otlp:
        env["JAEGER_OTLP_ENDPOINT"] = jaeger_otlp
    return env, ports


def start_collector(
    stack: Stack,
    name: str,
    binary: str,
    config: Path,
    out_dir: Path,
    jaeger_otlp: str | None = None,
    extra_env: dict[str, str] | None = None,
    sets: tuple[str, ...] = (),
) -> Collector:
    out_dir.mkdir(parents=True, exist_ok=True)
    env, ports = collector_env(out_dir, jaeger_otlp)
    env.update(extra_env or {})
    argv = [binary, f"--config={config}", *(f"--set={s}" for s in sets)]
    health = ports["health"]
    service = stack.start(
        name, argv, env=env, ready=lambda: http_ok(f"http://127.0.0.1:{health}/"), startup_timeout=30
    )
    return Collector(service, out_dir=out_dir, **ports)


def restart_collector(stack: Stack, old: Collector, name: str) -> Collector:
    """The same command, environment and ports again (``old`` must have been stopped)."""
    assert not old.service.running()
    health = old.health
    service = stack.start(
        name,
        old.service.argv,
        env=old.service.env,
        ready=lambda: http_ok(f"http://127.0.0.1:{health}/"),
        startup_timeout=30,
    )
    return Collector(
        service, old.otlp_grpc, old.otlp_http, old.health, old.prometheus, old.telemetry, old.out_dir
    )


# --------------------------------------------------------------------------------------------- jaeger


@dataclass
class Jaeger:
    service: Service
    query: int
    otlp_grpc: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.query}"

    @property
    def otlp_target(self) -> str:
        """host:port for a collector's otlp exporter."""
        return f"127.0.0.1:{self.otlp_grpc}"


def start_jaeger(stack: Stack, name: str, binary: str) -> Jaeger:
    ports = {n: free_port() for n in ("query", "query_grpc", "health", "otlp_grpc", "otlp_http", "telemetry")}
    env = {
        "JAEGER_QUERY_HTTP_ENDPOINT": f"127.0.0.1:{ports['query']}",
        "JAEGER_QUERY_GRPC_ENDPOINT": f"127.0.0.1:{ports['query_grpc']}",
        "JAEGER_HEALTH_ENDPOINT": f"127.0.0.1:{ports['health']}",
        "JAEGER_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{ports['otlp_grpc']}",
        "JAEGER_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{ports['otlp_http']}",
        "JAEGER_TELEMETRY_HOST": "127.0.0.1",
        "JAEGER_TELEMETRY_PORT": str(ports["telemetry"]),
    }
    config = ROOT / "deploy" / "jaeger" / "config.yaml"
    query, health = ports["query"], ports["health"]
    service = stack.start(
        name,
        [binary, f"--config={config}"],
        env=env,
        ready=lambda: (
            http_ok(f"http://127.0.0.1:{health}/status") and http_ok(f"http://127.0.0.1:{query}/api/services")
        ),
    )
    return Jaeger(service, query=query, otlp_grpc=ports["otlp_grpc"])


# ----------------------------------------------------------------------------------------- prometheus


@dataclass
class Prometheus:
    service: Service
    port: int
    config: Path
    changed_keys: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def retarget_prometheus_config(
    source: Path, targets: dict[str, list[str]]
) -> tuple[dict[str, Any], list[str]]:
    """The project's Prometheus config with each job's service discovery replaced by ``targets``
    (job name -> host:port list) and rule files made absolute. Returns the config and what changed."""
    cfg: dict[str, Any] = yaml.safe_load(source.read_text())
    changed: list[str] = []
    for job in cfg["scrape_configs"]:
        name = job["job_name"]
        if name not in targets:
            raise KeyError(f"{source.name}: no loopback target given for job {name!r}")
        for key in ("static_configs", "dns_sd_configs", "file_sd_configs"):
            if key in job:
                del job[key]
                changed.append(f"scrape_configs[{name}].{key}")
        job["static_configs"] = [{"targets": targets[name]}]
    if "rule_files" in cfg:
        cfg["rule_files"] = [str((source.parent / rule).resolve()) for rule in cfg["rule_files"]]
        changed.append("rule_files (made absolute)")
    return cfg, changed


def start_prometheus(
    stack: Stack, name: str, binary: str, source: Path, targets: dict[str, list[str]], work: Path
) -> Prometheus:
    port = free_port()
    targets = {k: [t.replace("$SELF", f"127.0.0.1:{port}") for t in v] for k, v in targets.items()}
    cfg, changed = retarget_prometheus_config(source, targets)
    work.mkdir(parents=True, exist_ok=True)
    config = work / source.name
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    # The compose service's flags, with its paths replaced by ours.
    argv = [binary]
    for flag in compose_service("prometheus")["command"]:
        if flag.startswith("--config.file="):
            flag = f"--config.file={config}"
        elif flag.startswith("--storage.tsdb.path="):
            flag = f"--storage.tsdb.path={work / 'data'}"
        argv.append(flag)
    argv.append(f"--web.listen-address=127.0.0.1:{port}")
    service = stack.start(name, argv, ready=lambda: http_ok(f"http://127.0.0.1:{port}/-/ready"))
    return Prometheus(service, port=port, config=config, changed_keys=changed)


# ------------------------------------------------------------------------------------------- backend


@dataclass
class Backend:
    service: Service
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def backend_env(otlp_endpoint: str, llm_base_url: str) -> dict[str, str]:
    """The compose example service's environment, pointed at the loopback stack."""
    env = {k: str(v) for k, v in compose_service("example")["environment"].items()}
    env.update(
        {
            "OPENAI_BASE_URL": llm_base_url,
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint,
            # Faster than the demo's 5 s, so that a short test sees its metrics.
            "OTEL_METRIC_EXPORT_INTERVAL": "2000",
            # Short batches: the spans of one trace leave the app in several exports.
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            # Only FastAPI (server span) and openai-latency, whatever else the venv holds (as in
            # the image, which installs nothing else).
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disabled_instrumentations(),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def start_backend(
    stack: Stack, name: str, otlp_endpoint: str, llm_base_url: str, extra_env: dict[str, str] | None = None
) -> Backend:
    port = free_port()
    command = list(compose_service("example")["command"])
    assert command[:2] == ["opentelemetry-instrument", "uvicorn"], command
    argv = [tool("opentelemetry-instrument"), tool("uvicorn"), *command[2:]]
    argv[argv.index("--host") + 1] = "127.0.0.1"
    argv[argv.index("--port") + 1] = str(port)
    service = stack.start(
        name,
        argv,
        env={**backend_env(otlp_endpoint, llm_base_url), **(extra_env or {})},
        ready=lambda: http_ok(f"http://127.0.0.1:{port}/healthz"),
        startup_timeout=40,
    )
    return Backend(service, port)


def start_fake_llm(stack: Stack, name: str) -> tuple[Service, str]:
    """``python -m openai_latency.fake_server`` (the compose fake-llm command) on a free port."""
    port = free_port()
    command = list(compose_service("fake-llm")["command"])
    command[0] = sys.executable
    command[command.index("--host") + 1] = "127.0.0.1"
    command[command.index("--port") + 1] = str(port)
    service = stack.start(name, command, ready=lambda: http_ok(f"http://127.0.0.1:{port}/v1/models"))
    return service, f"http://127.0.0.1:{port}/v1"


def start_loadgen(stack: Stack, name: str, target: str, rps: float, duration: float, seed: int) -> Service:
    """The compose load generator (``python -m examples.loadgen``), bounded."""
    argv = [
        sys.executable,
        "-m",
        "examples.loadgen",
        "--target",
        target,
        "--rps",
        str(rps),
        "--duration",
        str(duration),
        "--seed",
        str(seed),
    ]
    return stack.start(name, argv, env={"PYTHONPATH": str(ROOT)})


def start_traces(
    stack: Stack, binaries: Binaries, out_dir: Path, config: Path = ROOT / "collector" / "otelcol.yaml"
) -> tuple[Jaeger, Collector]:
    """Jaeger, and the collector (the project's config unless ``config``) sending its traces there."""
    jaeger = start_jaeger(stack, "jaeger", binaries.jaeger)
    collector = start_collector(stack, "collector", binaries.otelcol, config, out_dir, jaeger.otlp_target)
    return jaeger, collector

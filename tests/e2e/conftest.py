"""Fixtures of the end-to-end test: OTLP receiver, fake LLM server, example backends (all torn down)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from openai_latency.fake_server import FakeServer, SpawnedServer

from .otlp_receiver import OtlpReceiver
from .processes import (
    WANTED_INSTRUMENTATIONS,
    Backend,
    disabled_instrumentations,
    installed_instrumentations,
)

PROTOCOLS = ("grpc", "http/protobuf")


@dataclass(frozen=True)
class BackendSpec:
    key: str
    protocol: str
    propagate: bool

    @property
    def service(self) -> str:
        return f"e2e-example-{self.key}"


SPECS = {
    "grpc": BackendSpec("grpc", "grpc", propagate=True),
    "http/protobuf": BackendSpec("http", "http/protobuf", propagate=True),
    "no-propagate": BackendSpec("no-propagate", "http/protobuf", propagate=False),
}


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as rx:
        yield rx


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[SpawnedServer]:
    # A first token that takes a visible while, a few chunks: every phase has a duration.
    with FakeServer.spawn({"ttft-ms": 30, "chunks": 4, "chunk-delay-ms": 5}) as fake:
        yield fake


def backend_env(spec: BackendSpec, receiver: OtlpReceiver, fake: SpawnedServer) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "sk-fake-e2e",
        "EXAMPLE_MAX_RETRIES": "2",
        "OTEL_SERVICE_NAME": spec.service,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": spec.protocol,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint(spec.protocol),
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
        "OTEL_PROPAGATORS": "tracecontext,baggage",
        # Only FastAPI (server span) and openai-latency are active, whatever else the venv holds:
        # the traceparent the LLM server sees can then only come from our instrumentation.
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disabled_instrumentations(),
        "OPENAI_LATENCY_PHASE_SPANS": "detailed",
        "OPENAI_LATENCY_PHASE_METRICS": "true",
        "OPENAI_LATENCY_PROPAGATE": "true" if spec.propagate else "false",
    }


@pytest.fixture(scope="module")
def backends(
    receiver: OtlpReceiver, fake_llm: SpawnedServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Backend]]:
    """The three example backends, started concurrently (interpreter start-up dominates)."""
    missing = set(WANTED_INSTRUMENTATIONS) - installed_instrumentations()
    assert not missing, f"instrumentations not installed: {missing} (pip install -e '.[test]')"
    logs = tmp_path_factory.mktemp("e2e-backends")
    started: dict[str, Backend] = {}
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=len(SPECS)) as pool:
        futures = {
            key: pool.submit(
                Backend, backend_env(spec, receiver, fake_llm), logs / f"{spec.key}.log", startup_timeout=25.0
            )
            for key, spec in SPECS.items()
        }
        for key, future in futures.items():
            try:
                started[key] = future.result()
            except BaseException as exc:
                errors.append(exc)
    try:
        if errors:
            raise errors[0]
        yield started
    finally:
        for backend in started.values():
            backend.stop()

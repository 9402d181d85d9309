"""Shared fixtures: the real OTel SDK with in-memory exporters, the instrumentor, the fake server."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openai_latency import OpenAILatencyInstrumentor
from openai_latency.fake_server import FakeServer, SpawnedServer
from tests.support.otel_capture import full  # noqa: F401  (spans + metrics with exemplars + logs)
from tests.support.span_checks import Captured

# tests/installed installs the built wheel into a fresh venv (pip, about a minute): `make dist-check` only
collect_ignore = [] if os.environ.get("OPENAI_LATENCY_DIST") else ["installed"]

PRIMARY_ONLY = ("cli", "fake_server", "stack", "test_architecture.py")
"""What ``--sdk-leg=secondary`` leaves out: the command-line tool, the fake server, the stack's files
and the layer rules test the project's own code, the same on every SDK generation; they run on the
matrix's primary leg (the newest openai) and in ``make unit``. Tests marked ``every_sdk`` among them
run on every leg: bench and report end to end through each SDK generation."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow-suite",
        action="store_true",
        help="run only the tests marked slow (make slow-test); without it they are left out, so that one"
        " run of the suite stays under 5 minutes on 2 cores",
    )
    parser.addoption(
        "--sdk-leg",
        choices=("primary", "secondary"),
        default="primary",
        help="secondary: leave out the tests that do not depend on the openai SDK's generation "
        f"({', '.join(PRIMARY_ONLY)}), except those marked every_sdk (scripts/test-matrix.sh)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "every_sdk: run on every SDK leg of the matrix, not only the primary")
    config.addinivalue_line(
        "markers", "slow: long by design (load, starvation, whole runs); its own run: make slow-test"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    slow_suite = config.getoption("--slow-suite")
    secondary = config.getoption("--sdk-leg") == "secondary"
    kept, left_out = [], []
    for item in items:
        top = os.path.relpath(str(item.path), here).split(os.sep)[0]
        primary_only = top in PRIMARY_ONLY and item.get_closest_marker("every_sdk") is None
        slow = item.get_closest_marker("slow") is not None
        leave = slow != slow_suite or (secondary and primary_only)
        (left_out if leave else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="session")
def tracer_provider(span_exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    return provider


@pytest.fixture
def instrument(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> Iterator[Callable[..., Captured]]:
    """``instrument(**settings)`` -> a :class:`Captured` view of what the calls export.

    Instruments with a fresh metric reader; uninstruments at teardown.
    """
    instrumentor = OpenAILatencyInstrumentor()

    def setup(**settings: Any) -> Captured:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        reader = InMemoryMetricReader()
        instrumentor.instrument(
            tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader]), **settings
        )
        span_exporter.clear()
        return Captured(span_exporter, reader)

    yield setup
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    span_exporter.clear()


@pytest.fixture
def detailed_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    """``phase_spans=detailed`` unless a test passes its own: for tests of the ``http.*`` sub-phase
    spans (the default mode, ``phases``, puts their durations on network_wait as attributes)."""
    monkeypatch.setenv("OPENAI_LATENCY_PHASE_SPANS", "detailed")


@pytest.fixture
def captured(instrument: Callable[..., Captured]) -> Captured:
    """Instrumented with default settings."""
    return instrument()


@pytest.fixture(scope="session")
def server() -> Iterator[FakeServer]:
    """In-process fake server (own thread and loop): for behaviour tests."""
    with FakeServer() as fake:
        yield fake


@pytest.fixture(scope="session")
def timing_server() -> Iterator[SpawnedServer]:
    """Fake server in its own process, off the client's GIL: for timing tests."""
    with FakeServer.spawn() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _no_gc_pause(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests on a timing server compare client marks with the server's log within ±3 ms. A cyclic
    garbage collection inside the timed window (several ms late in a long session) is real client
    time, but not what these tests prove; it can also end a stream an earlier test abandoned, whose
    span would land among this test's. Collect first, then hold automatic passes off until the test
    ends (an explicit ``gc.collect()`` still runs)."""
    if not any(name.endswith("timing_server") for name in request.fixturenames):
        yield
        return
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

"""Runs a pytest session with openai-latency instrumenting the openai SDK (``scripts/peer-suite.sh``).

Load with ``PYTHONPATH=tests/peer pytest -p openai_latency_peer_plugin``. Every process that runs
tests (the single process, or each pytest-xdist worker) instruments itself at ``pytest_configure``
with an SDK tracer provider (in-memory exporter) and meter provider (in-memory reader), and
uninstruments at ``pytest_unconfigure``. An xdist controller runs no tests: it instruments nothing
and adds up what its workers report back through ``workeroutput``.

At the end the session reports how many spans and metric points were produced and how many
internal errors the instrumentation logged (``openai_latency._guard.report``). A session that ran
tests but exported no operation span fails: the instrumentation was not really active.
``OPENAI_LATENCY_PEER_REPORT=path`` also writes that summary as JSON.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from openai_latency import OpenAILatencyInstrumentor

REPORT_ENV = "OPENAI_LATENCY_PEER_REPORT"
_OUTPUT_KEY = "openai_latency_peer"
_COUNTERS = ("processes", "tests", "spans", "operation_spans", "phase_spans", "error_spans", "metric_points")


class _ErrorLog(logging.Handler):
    """Counts what the instrumentation logs at WARNING and above (its internal-error reports)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages[record.getMessage()] += 1


class _Worker:
    """Instrumentation of one test-running process."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.errors = _ErrorLog()
        self.logger = logging.getLogger("openai_latency")
        self.logger.addHandler(self.errors)
        self.instrumentor = OpenAILatencyInstrumentor()
        self.instrumentor.instrument(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)
        self.tests = 0

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.tests += 1

    def summary(self) -> dict[str, Any]:
        self.tracer_provider.force_flush()
        spans = self.exporter.get_finished_spans()
        operations = [span for span in spans if span.kind == SpanKind.CLIENT]
        attributes = [span.attributes or {} for span in operations]
        return {
            "processes": 1,
            "tests": self.tests,
            "spans": len(spans),
            "operation_spans": len(operations),
            "phase_spans": sum(1 for span in spans if "openai_latency.phase" in (span.attributes or {})),
            "error_spans": sum(1 for span in operations if not span.status.is_ok),
            "metric_points": _metric_points(self.reader),
            "operations": dict(Counter(str(a.get("gen_ai.operation.name", "openai")) for a in attributes)),
            "stream_end_states": dict(
                Counter(
                    str(a["openai_latency.stream.end_state"])
                    for a in attributes
                    if "openai_latency.stream.end_state" in a
                )
            ),
            "internal_errors": dict(self.errors.messages),
        }

    def close(self) -> None:
        self.instrumentor.uninstrument()
        self.logger.removeHandler(self.errors)
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def _metric_points(reader: InMemoryMetricReader) -> int:
    data = reader.get_metrics_data()
    if data is None:
        return 0
    return sum(
        len(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    )


def _merge(total: dict[str, Any], part: dict[str, Any]) -> None:
    for key in _COUNTERS:
        total[key] = total.get(key, 0) + part.get(key, 0)
    for key in ("operations", "stream_end_states", "internal_errors"):
        merged = Counter(total.get(key, {}))
        merged.update(part.get(key, {}))
        total[key] = dict(merged)


_WORKER = pytest.StashKey[_Worker]()
_TOTAL = pytest.StashKey[dict[str, Any]]()


def _is_xdist_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") != "no"


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_TOTAL] = {}
    if _is_xdist_controller(config):
        config.pluginmanager.register(_Controller(config), "openai_latency_peer_controller")
    else:
        worker = _Worker()
        config.stash[_WORKER] = worker
        config.pluginmanager.register(worker, "openai_latency_peer_worker")


class _Controller:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        part = getattr(node, "workeroutput", {}).get(_OUTPUT_KEY)
        if part:
            _merge(self.config.stash[_TOTAL], json.loads(part))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    worker = config.stash.get(_WORKER, None)
    if worker is not None:
        summary = worker.summary()
        workeroutput = getattr(config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: the controller adds it up and judges
            workeroutput[_OUTPUT_KEY] = json.dumps(summary)
            return
        _merge(config.stash[_TOTAL], summary)
    total = config.stash[_TOTAL]
    total["ok"] = not total.get("tests") or total.get("operation_spans", 0) > 0
    if not total["ok"] and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    path = os.environ.get(REPORT_ENV)
    if path:
        with open(path, "w", encoding="utf-8") as file:
            json.dump(total, file, indent=2, sort_keys=True)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    total = config.stash.get(_TOTAL, None)
    if total is None or hasattr(config, "workerinput"):
        return
    counts = ", ".join(f"{total.get(key, 0)} {key.replace('_', ' ')}" for key in _COUNTERS)
    terminalreporter.write_sep("-", "openai-latency peer plugin")
    terminalreporter.write_line(f"instrumented: {counts}")
    terminalreporter.write_line(f"operations: {total.get('operations', {})}")
    terminalreporter.write_line(f"stream end states: {total.get('stream_end_states', {})}")
    errors = total.get("internal_errors", {})
    terminalreporter.write_line(f"internal errors logged by openai_latency: {sum(errors.values())}")
    for message, count in sorted(errors.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"  {count}x {message}")
    if not total.get("ok", True):
        terminalreporter.write_line(
            "FAIL: tests ran but no operation span was exported: the instrumentation was not active", red=True
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    worker = config.stash.get(_WORKER, None)
    if worker is not None:
        worker.close()
        del config.stash[_WORKER]

"""All three signals in memory: spans (session exporter), metrics with exemplars, log records.

``full(**settings)`` instruments like the ``instrument`` fixture, with a MeterProvider whose exemplar
filter keeps every exemplar and a LoggerProvider that exports to memory. Import the fixture into a
test module (``tests/conftest.py`` does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import AlwaysOnExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Metric
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from openai_latency import OpenAILatencyInstrumentor
from tests.support.span_checks import Captured


@dataclass
class Full:
    captured: Captured
    logs: InMemoryLogRecordExporter

    def metrics(self) -> dict[str, Metric]:
        """The ``openai_latency`` meter's metrics by name (cumulative since ``full()``)."""
        data = self.captured.metric_reader.get_metrics_data()
        out: dict[str, Metric] = {}
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                if scope_metrics.scope.name == "openai_latency":
                    out.update({metric.name: metric for metric in scope_metrics.metrics})
        return out

    def log_records(self) -> list[ReadableLogRecord]:
        return list(self.logs.get_finished_logs())

    def everything_exported(self) -> str:
        """Spans, log records and metrics as one JSON text, for "never exported" scans."""
        texts = [span.to_json() for span in self.captured.spans()]
        texts += [record.to_json() for record in self.log_records()]
        data = self.captured.metric_reader.get_metrics_data()
        if data is not None:
            texts.append(data.to_json())
        return "\n".join(texts)


@pytest.fixture
def full(
    tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> Iterator[Callable[..., Full]]:
    instrumentor = OpenAILatencyInstrumentor()

    def setup(**settings: Any) -> Full:
        instrumentor.uninstrument()
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader], exemplar_filter=AlwaysOnExemplarFilter())
        logs = InMemoryLogRecordExporter()
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
        instrumentor.instrument(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            **settings,
        )
        span_exporter.clear()
        return Full(Captured(span_exporter, reader), logs)

    yield setup
    instrumentor.uninstrument()
    span_exporter.clear()

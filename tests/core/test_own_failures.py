"""Our own failures stay ours: a telemetry pipeline that raises everywhere changes nothing for the app.

Faults go in through the OpenTelemetry SDK's public interfaces (span exporter, span processor, metric
exporter, metric reader, exemplar filter, log record processor) and through what the application
passes (a model name whose ``str()`` raises, a provider's chunk of the wrong shape); our code is not
touched. A metric reader fails in two places: when it is collected (``_receive_metrics``, while a
scraper thread collects it over and over during the calls) and on the record path (the aggregation it
prefers raises when the SDK creates a series for a new attribute set). For each:
the calls return what they return without instrumentation, streams yield the same chunks, every span
that starts ends once, and the ``openai_latency`` logger warns once per kind of failure, not per call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics._internal.exemplar import ExemplarFilter
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import Aggregation
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from openai_latency import OpenAILatencyInstrumentor, _guard
from openai_latency.fake_server import FakeServer
from tests.support import network
from tests.support.span_checks import calls_in_metrics

MESSAGES = [{"role": "user", "content": "hello"}]
ROUNDS = 4


class Boom(RuntimeError):
    pass


class RaisingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise Boom("exporter")


class RaisingProcessor(SpanProcessor):
    def __init__(self, on: str) -> None:
        self.on = on

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.on == "start":
            raise Boom("on_start")

    def on_end(self, span: ReadableSpan) -> None:
        if self.on == "end":
            raise Boom("on_end")


class RaisingMetricExporter(MetricExporter):
    def __init__(self) -> None:
        super().__init__()

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        raise Boom("metric exporter")

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


class RaisingAggregation(Aggregation):
    """Raises when the SDK creates the aggregation of a new series (on the record path)."""

    def _create_aggregation(self, *args: Any, **kwargs: Any) -> Any:
        raise Boom("aggregation")


class RaisingReader(MetricReader):
    """A metric reader (say, a pull exporter's) whose every collection raises; with ``on_record``,
    the aggregation it prefers for our histograms and counter raises as well."""

    def __init__(self, on_record: bool) -> None:
        preferred: dict[type, Aggregation] | None = None
        if on_record:
            preferred = {Histogram: RaisingAggregation(), Counter: RaisingAggregation()}
        super().__init__(preferred_aggregation=preferred)

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
        raise Boom("metric reader")

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


class Scraper:
    """Collects a reader over and over on its own thread (as a Prometheus scrape would), counting
    collections and the ones that raised."""

    def __init__(self, reader: MetricReader) -> None:
        self.reader = reader
        self.collections = 0
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.collections += 1
            try:
                self.reader.collect()
            except Exception as exc:
                self.failures.append(exc)

    @contextmanager
    def running(self) -> Iterator[Scraper]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(10)


class RaisingExemplarFilter(ExemplarFilter):
    def should_sample(self, value: Any, time_unix_nano: int, attributes: Any, context: Any) -> bool:
        raise Boom("exemplar filter")


class RaisingLogProcessor(LogRecordProcessor):
    def on_emit(self, log_record: Any) -> None:
        raise Boom("log processor")

    emit = on_emit

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class EvilModel(str):
    """A model name the SDK sends as is (JSON encodes the str value) but whose ``str()`` raises."""

    def __str__(self) -> str:
        raise Boom("str(model)")


class Ended(SpanProcessor):
    """Counts starts and ends per span, to prove every started span ends exactly once."""

    def __init__(self) -> None:
        self.started: dict[int, int] = {}
        self.ended: dict[int, int] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        span_id = span.context.span_id
        self.started[span_id] = self.started.get(span_id, 0) + 1

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        span_id = span.context.span_id
        self.ended[span_id] = self.ended.get(span_id, 0) + 1


SCENARIOS = [
    "span-exporter",
    "span-processor-on-start",
    "span-processor-on-end",
    "span-processor-on-end-no-phases",
    "metric-exporter",
    "metric-reader-collect",
    "metric-reader-record",
    "exemplar-filter",
    "log-processor",
    "model-str-raises",
    "wrong-shape-chunks",
]


def _providers(scenario: str, ended: Ended) -> tuple[dict[str, Any], list[Any]]:
    """The keyword arguments of ``instrument()``, and the metric readers of its meter provider."""
    tracer_provider = TracerProvider()
    # processors run in order and a raising one stops the rest: the counter sees on_start after a
    # raising on_start (a span whose start raised never existed) and on_end before a raising on_end
    if scenario == "span-processor-on-start":
        tracer_provider.add_span_processor(RaisingProcessor("start"))
    tracer_provider.add_span_processor(ended)
    if scenario == "span-exporter":
        tracer_provider.add_span_processor(SimpleSpanProcessor(RaisingExporter()))
    elif scenario.startswith("span-processor-on-end"):
        tracer_provider.add_span_processor(RaisingProcessor("end"))
    if scenario == "metric-exporter":
        readers: list[Any] = [
            PeriodicExportingMetricReader(RaisingMetricExporter(), export_interval_millis=20)
        ]
    elif scenario.startswith("metric-reader"):
        # next to a healthy reader: the failing one must not cost the other its points
        readers = [RaisingReader(on_record=scenario.endswith("record")), InMemoryMetricReader()]
    else:
        readers = [InMemoryMetricReader()]
    meter_kwargs: dict[str, Any] = {"metric_readers": readers}
    if scenario == "exemplar-filter":
        meter_kwargs["exemplar_filter"] = RaisingExemplarFilter()
    logger_provider = LoggerProvider()
    if scenario == "log-processor":
        logger_provider.add_log_record_processor(RaisingLogProcessor())
    providers = {
        "tracer_provider": tracer_provider,
        "meter_provider": MeterProvider(**meter_kwargs),
        "logger_provider": logger_provider,
        "capture_content": "span_and_event" if scenario == "log-processor" else "no_content",
        "phase_spans": "off" if scenario.endswith("no-phases") else "detailed",
    }
    return providers, readers


def _norm(item: Any) -> Any:
    data = item.model_dump(warnings=False)
    data.pop("id", None)
    return (type(item), data)


async def _calls(server: FakeServer, scenario: str) -> list[Any]:
    """ROUNDS x (sync, async) x (json, stream) calls; what the caller got, normalized."""
    model: Any = EvilModel("gpt-4o-mini") if scenario == "model-str-raises" else "gpt-4o-mini"
    headers = {"x-fake-corrupt": "wrong-shape"} if scenario == "wrong-shape-chunks" else {}
    sync_client = network.client(server.base_url, max_retries=0)
    async_client = network.client(server.base_url, is_async=True, max_retries=0)
    out: list[Any] = []
    for _ in range(ROUNDS):
        kwargs = {"model": model, "messages": MESSAGES, "extra_headers": headers}
        if scenario != "wrong-shape-chunks":  # the corrupt body is for streams here
            out.append(_norm(sync_client.chat.completions.create(**kwargs)))
            out.append(_norm(await async_client.chat.completions.create(**kwargs)))
        out.append([_norm(c) for c in sync_client.chat.completions.create(stream=True, **kwargs)])
        stream = await async_client.chat.completions.create(stream=True, **kwargs)
        out.append([_norm(c) async for c in stream])
    return out


@pytest.fixture
def fresh_reports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Forget which failures were already reported, so this test sees each kind's first warning."""
    monkeypatch.setattr(_guard, "_reported", set())
    yield


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_own_failures_never_reach_the_app(
    server: FakeServer, caplog: pytest.LogCaptureFixture, fresh_reports: None, scenario: str
) -> None:
    baseline = await _calls(server, scenario)
    ended = Ended()
    providers, readers = _providers(scenario, ended)
    instrumentor = OpenAILatencyInstrumentor()
    caplog.set_level(logging.WARNING)
    instrumentor.instrument(**providers)
    try:
        if isinstance(readers[0], RaisingReader):
            with Scraper(readers[0]).running() as scraper:
                got = await _calls(server, scenario)
            # what a collection raised went to its caller, the scraper (the SDK skips _receive_metrics
            # while there is nothing to collect, and with the raising aggregation there never is)
            assert all(isinstance(exc, Boom) for exc in scraper.failures), scraper.failures[:3]
            if scenario == "metric-reader-collect":
                assert scraper.failures  # the fault fired, during the calls
                assert calls_in_metrics(readers[1]) == len(got)  # the healthy reader got every call
        else:
            got = await _calls(server, scenario)
    finally:
        instrumentor.uninstrument()
        providers["meter_provider"].shutdown()
    assert got == baseline  # same types, same fields, same chunks

    # every span that started ended exactly once (a processor failing in on_end gets no second end())
    assert set(ended.ended) == set(ended.started)
    assert set(ended.started.values()) <= {1} and set(ended.ended.values()) <= {1}
    assert not [r for r in caplog.records if "ended span" in r.getMessage()]

    ours = [r.getMessage() for r in caplog.records if r.name == "openai_latency"]
    assert len(ours) == len(set(ours)), ours  # once per kind of failure, not once per call
    # a failing exporter or collection is the OTel SDK's business (the exporter's thread, the
    # collector's call): nothing of ours runs there; wrong-shape chunks are read with defaults, so
    # nothing of ours fails on them (they still must reach the caller unchanged, spans ended once)
    quiet = ("span-exporter", "metric-exporter", "metric-reader-collect", "wrong-shape-chunks")
    reaches_our_code = scenario not in quiet
    assert bool(ours) is reaches_our_code, ours
    if scenario.startswith("span-processor-on-end"):
        assert ended.ended  # spans still ended (and were handed to the other processors)


def test_report_warns_once_then_logs_at_debug(caplog: pytest.LogCaptureFixture, fresh_reports: None) -> None:
    """The guard's contract on its own: the first failure of a kind warns with its traceback."""
    caplog.set_level(logging.DEBUG, logger="openai_latency")

    @_guard.guarded(default="fallback")
    def hook() -> str:
        raise Boom("ours")

    results = [hook() for _ in range(5)]
    assert results == ["fallback"] * 5
    levels = [r.levelno for r in caplog.records if r.name == "openai_latency"]
    assert levels == [logging.WARNING] + [logging.DEBUG] * 4
    assert caplog.records[0].exc_info is not None

"""Traces built span by span with the OTel SDK at exact times (milliseconds from a fixed origin), in
several services, written as the collector's file exporter writes them (:func:`~.otlp_files.write_jsonl`):
the input of ``report --by trace`` whose critical path is known exactly."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import Span, SpanKind

from tests.support.otlp_files import write_jsonl

#: The origin of every built trace (epoch ns); times are given in ms from it.
ORIGIN_NS = 1_764_900_000_000_000_000
MS = 1_000_000


class TraceBuilder:
    """Spans at exact times; ``export=False`` makes a span that never arrives (its children do)."""

    def __init__(self, origin_ns: int = ORIGIN_NS) -> None:
        self.origin_ns = origin_ns
        self._providers: dict[str, TracerProvider] = {}
        self.exported: list[ReadableSpan] = []

    def _tracer(self, service: str) -> trace.Tracer:
        provider = self._providers.get(service)
        if provider is None:
            provider = self._providers[service] = TracerProvider(
                resource=Resource.create({"service.name": service})
            )
        return provider.get_tracer("tests.turns")

    def span(
        self,
        name: str,
        start_ms: float,
        end_ms: float,
        parent: Span | None = None,
        *,
        service: str = "app",
        attributes: dict[str, Any] | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        export: bool = True,
    ) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self._tracer(service).start_span(
            name, context=context, kind=kind, attributes=attributes or {},
            start_time=self.origin_ns + round(start_ms * MS),
        )  # fmt: skip
        span.end(end_time=self.origin_ns + round(end_ms * MS))
        if export:
            assert isinstance(span, ReadableSpan)
            self.exported.append(span)
        return span

    def tool(self, name: str, start_ms: float, end_ms: float, parent: Span, **kw: Any) -> Span:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        return self.span(f"execute_tool {name}", start_ms, end_ms, parent, attributes=attributes, **kw)

    def llm(
        self,
        start_ms: float,
        phases: Sequence[tuple[str, float]],
        parent: Span,
        *,
        model: str = "gpt-4o-mini",
        tokens: tuple[int, int] = (100, 20),
        error: str | None = None,
        service: str = "app",
    ) -> tuple[Span, dict[str, Span]]:
        """A chat call as the instrumentation writes it: the operation span and its phase spans back
        to back (``phases``: (phase, ms) in order); returns the operation and its last span per phase."""
        end_ms = start_ms + sum(ms for _, ms in phases)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
            "gen_ai.provider.name": "openai", "server.address": "localhost", "server.port": 8000,
            "gen_ai.usage.input_tokens": tokens[0], "gen_ai.usage.output_tokens": tokens[1],
        }  # fmt: skip
        if error is not None:
            attributes["error.type"] = error
        operation = self.span(
            f"chat {model}", start_ms, end_ms, parent, attributes=attributes, kind=SpanKind.CLIENT,
            service=service,
        )  # fmt: skip
        children: dict[str, Span] = {}
        at = start_ms
        for phase, ms in phases:
            children[phase] = self.span(
                f"openai.{phase}", at, at + ms, operation, attributes={"openai_latency.phase": phase},
                service=service,
            )  # fmt: skip
            at += ms
        return operation, children

    def write(self, path: Path, batch: int = 7) -> Path:
        return write_jsonl(path, self.exported, batch=batch)


def trace_id(span: Span) -> str:
    return f"{span.get_span_context().trace_id:032x}"

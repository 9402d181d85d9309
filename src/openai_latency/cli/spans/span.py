"""What every reader of spans produces (:class:`Span`), what a read counts (:class:`ReadStats`), and
the one error a read reports to the user (:class:`InputError`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

#: Stored per read; the count in :attr:`ReadStats.skipped_count` is complete.
MAX_SKIPPED_KEPT = 20


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_error: bool = False
    service: str | None = None

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


T = TypeVar("T")

#: What a reader makes of each span, given the span's fields in :class:`Span`'s order: :class:`Span`
#: itself, or (``report --by trace``) a node built straight from the decoder's fields, without a
#: :class:`Span` in between.
SpanMaker = Callable[[str, str, str, str, int, int, dict[str, Any], bool, str | None], T]


def remade(spans: Iterable[Span], make: SpanMaker[T]) -> Iterator[T]:
    """``spans`` as ``make`` makes them (for the readers that build a :class:`Span` first)."""
    for span in spans:
        yield make(
            span.trace_id, span.span_id, span.parent_span_id, span.name, span.start_ns, span.end_ns,
            span.attributes, span.status_error, span.service,
        )  # fmt: skip


class InputError(Exception):
    """The input cannot be read at all (no files, a missing path): the message is for the user."""


@dataclass(frozen=True, slots=True)
class Skipped:
    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class ReadStats:
    files: list[str] = field(default_factory=list)
    lines: int = 0
    blank_lines: int = 0
    trace_documents: int = 0
    #: Valid OTLP objects without spans (``resourceMetrics``/``resourceLogs`` lines of a shared directory).
    other_documents: int = 0
    spans: int = 0
    #: Spans without ids or timestamps, left out.
    bad_spans: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    skipped_count: int = 0
    #: The Jaeger query URL when the spans came from Jaeger (then ``files`` names the services read
    #: and ``lines`` counts traces).
    jaeger: str | None = None

    def skip(self, file: str, line: int, reason: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_SKIPPED_KEPT:
            self.skipped.append(Skipped(file, line, reason))

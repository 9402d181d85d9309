"""Finished SDK spans -> the indented tree with durations that the README draws (``demo --trees``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..spans import names
from .text import format_duration

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


# Attributes worth a glance next to each span, in this order.
_SHOWN = (
    names.RESEND_COUNT,
    names.STATUS_CODE,
    names.ERROR_TYPE,
    names.CONNECTION_REUSED,
    names.RETRY_REASON,
    names.RETRY_DELAY_SOURCE,
    names.STREAM_END_STATE,
    names.STREAM_CHUNKS,
    names.STREAM_CONSUMER_TIME,
    names.TIME_TO_FIRST_TOKEN,
    names.TIME_PER_OUTPUT_TOKEN,
    names.DOMINANT_PHASE,
)


def _duration(span: ReadableSpan) -> float:
    return ((span.end_time or 0) - (span.start_time or 0)) / 1e9


def _details(span: ReadableSpan) -> str:
    attributes = span.attributes or {}
    parts = []
    for key in _SHOWN:
        if key in attributes:
            value = attributes[key]
            if isinstance(value, float):
                value = format_duration(value)
            parts.append(f"{key.rsplit('.', 1)[-1]}={value}")
    return "  ".join(parts)


def render(spans: Iterable[ReadableSpan]) -> list[str]:
    """One line per span, children indented under their parent, siblings by start time."""
    ordered: Sequence[ReadableSpan] = sorted(spans, key=lambda s: s.start_time or 0)
    ids = {s.context.span_id for s in ordered}
    children: dict[int, list[ReadableSpan]] = {}
    roots = []
    for span in ordered:
        parent = span.parent.span_id if span.parent is not None else None
        if parent is not None and parent in ids:
            children.setdefault(parent, []).append(span)
        else:
            roots.append(span)
    width = 2 + max((len(s.name) for s in ordered), default=0) + 6
    lines: list[str] = []

    def walk(span: ReadableSpan, prefix: str, branch: str) -> None:
        label = f"{prefix}{branch}{span.name}"
        lines.append(f"{label:<{width}} {format_duration(_duration(span)):>9}   {_details(span)}".rstrip())
        kids = children.get(span.context.span_id, [])
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            extension = "" if not branch else ("   " if branch == "└─ " else "│  ")
            walk(kid, prefix + extension, "└─ " if last else "├─ ")

    for root in roots:
        walk(root, "", "")
    return lines

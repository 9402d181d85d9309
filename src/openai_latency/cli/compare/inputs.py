"""Where ``compare`` reads a side: OTLP JSON files, a ``bench --format json`` result, or Jaeger.

- A file, directory or glob of OTLP JSON lines (``bench --out``, production spans under the file
  exporter or the collector's file exporter): read as ``report`` reads them.
- A ``bench --format json`` result: its percentiles alone cannot be resampled, so the spans file it
  names (``"out"``, from ``bench --out``) is read; relative to the result's folder, else the current one.
- ``jaeger:URL?service=NAME&lookback=1h&limit=N``: Jaeger's query API (the service and the window
  pick the side: two services, or one service now against a stored file).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from ..spans.files import read_spans
from ..spans.jaeger import DEFAULT_LIMIT, DEFAULT_LOOKBACK, parse_lookback, read_jaeger
from ..spans.span import InputError, ReadStats, Span

JAEGER = "jaeger:"
BENCH_TOOL = "openai-latency bench"


@dataclass(frozen=True)
class Source:
    text: str  # as given
    described: str  # what was read


def open_side(text: str, stats: ReadStats) -> tuple[Iterator[Span], Source]:
    """The spans of one side; :class:`InputError` when it cannot be read."""
    if text.startswith(JAEGER):
        return _jaeger(text, stats)
    path = Path(text)
    spans_path = _bench_spans(path) if path.is_file() else None
    if spans_path is not None:
        return read_spans([spans_path], stats), Source(text, f"{text} (bench result; spans {spans_path})")
    return read_spans([text], stats), Source(text, text)


def _bench_spans(path: Path) -> str | None:
    """The spans file a bench JSON result names; None when the file is not a bench result."""
    try:
        with path.open("rb") as handle:
            if handle.read(1) != b"{":
                return None
            handle.seek(0)
            document = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("tool") != BENCH_TOOL:
        return None
    out = document.get("out")
    if not out:
        raise InputError(
            f"{path} is a bench result without its spans: its percentiles cannot be resampled."
            " Run bench with --out FILE (the result then names it) and compare that file"
        )
    for candidate in (path.parent / out, Path(out)):
        if candidate.is_file():
            return str(candidate)
    raise InputError(f"{path} names its spans file {out}, which is not there (looked beside it and in .)")


def _jaeger(text: str, stats: ReadStats) -> tuple[Iterator[Span], Source]:
    url = urlsplit(text[len(JAEGER) :])
    query = parse_qs(url.query)
    unknown = set(query) - {"service", "lookback", "limit"}
    if unknown:
        raise InputError(
            f"{text}: unknown query key(s) {', '.join(sorted(unknown))} (service, lookback, limit)"
        )
    try:
        lookback = parse_lookback(query.get("lookback", [DEFAULT_LOOKBACK])[0])
        limit = int(query.get("limit", [str(DEFAULT_LIMIT)])[0])
    except ValueError as exc:
        raise InputError(f"{text}: {exc}") from None
    base = urlunsplit((url.scheme, url.netloc, url.path, "", ""))
    service = query.get("service", [None])[0]
    spans = read_jaeger(base, stats, service=service, lookback_s=lookback, limit=limit)
    return spans, Source(text, f"Jaeger at {base}" + (f", service {service}" if service else ""))

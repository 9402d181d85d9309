"""Where ``openai-latency report`` reads its spans: OTLP JSON files (default) or Jaeger's query API."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TypeVar, cast

from .. import args as arguments
from ..spans.files import read_spans_as
from ..spans.jaeger import DEFAULT_LIMIT, DEFAULT_LOOKBACK, parse_lookback, read_jaeger
from ..spans.span import ReadStats, Span, SpanMaker, remade

T = TypeVar("T")


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    jaeger = parser.add_argument_group("reading from Jaeger instead of files")
    jaeger.add_argument(
        "--jaeger",
        metavar="URL",
        help="read traces from Jaeger's HTTP query API at URL (e.g. http://localhost:16686) instead of files",
    )
    jaeger.add_argument(
        "--service", metavar="NAME", help="with --jaeger: only this service (default: every service)"
    )
    jaeger.add_argument(
        "--lookback",
        type=_lookback,
        metavar="DURATION",
        help=f"with --jaeger: traces of the last DURATION: 90s, 30m, 1h, 2d (default: {DEFAULT_LOOKBACK})",
    )
    jaeger.add_argument(
        "--limit",
        type=arguments.count,
        metavar="N",
        help=f"with --jaeger: at most N traces per service (default: {DEFAULT_LIMIT})",
    )


def open_spans(
    parser: argparse.ArgumentParser, args: argparse.Namespace, default: str, stats: ReadStats
) -> Iterator[Span]:
    """The spans the arguments name (usage errors exit 2 here); :class:`InputError` when unreadable."""
    return open_spans_as(parser, args, default, stats, Span)


def open_spans_as(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    default: str,
    stats: ReadStats,
    make: SpanMaker[T],
    lazy_values: bool = False,
) -> Iterator[T]:
    """:func:`open_spans`, each span as ``make`` makes it from its fields, ``lazy_values`` for a file
    (:func:`..spans.files.read_spans_as`)."""
    if args.jaeger is None:
        for name in ("service", "lookback", "limit"):
            if getattr(args, name) is not None:
                parser.error(f"--{name} needs --jaeger URL")
        return read_spans_as(args.paths or [default], stats, make, lazy_values)
    if args.paths:
        parser.error("give trace files or --jaeger URL, not both")
    spans = read_jaeger(
        args.jaeger,
        stats,
        service=args.service,
        lookback_s=args.lookback if args.lookback is not None else parse_lookback(DEFAULT_LOOKBACK),
        limit=args.limit if args.limit is not None else DEFAULT_LIMIT,
    )
    return cast("Iterator[T]", spans) if make is Span else remade(spans, make)


def _lookback(text: str) -> float:
    try:
        return parse_lookback(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

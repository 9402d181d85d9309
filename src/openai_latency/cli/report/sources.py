"""Where ``openai-latency report`` reads its spans: OTLP JSON files (default) or Jaeger's query API."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from .. import args as arguments
from ..spans.files import read_spans
from ..spans.jaeger import DEFAULT_LIMIT, DEFAULT_LOOKBACK, parse_lookback, read_jaeger
from ..spans.span import ReadStats, Span


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
    if args.jaeger is None:
        for name in ("service", "lookback", "limit"):
            if getattr(args, name) is not None:
                parser.error(f"--{name} needs --jaeger URL")
        return read_spans(args.paths or [default], stats)
    if args.paths:
        parser.error("give trace files or --jaeger URL, not both")
    return read_jaeger(
        args.jaeger,
        stats,
        service=args.service,
        lookback_s=args.lookback if args.lookback is not None else parse_lookback(DEFAULT_LOOKBACK),
        limit=args.limit if args.limit is not None else DEFAULT_LIMIT,
    )


def _lookback(text: str) -> float:
    try:
        return parse_lookback(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

"""``openai-latency report``: exported traces -> p50/p95/p99 per phase and endpoint; why slow calls were slow.

Reads OTLP/JSON (the collector's file exporter writes ./out/otlp/traces.jsonl), finds the operation
spans (``chat gpt-4o``, ``embeddings ...``, ``openai GET /models``) and their phase spans, groups the
calls (default: endpoint = server.address:port, plus model) and prints per group: calls, errors by
error.type, p50/p95/p99 of the call duration, of each phase (summed per call, over the calls that had
the phase), of time to first token and time per output token (streams), and the dominant phase of the
slow calls (duration >= the group's p95, or >= --slow-threshold): the phase that was the largest part
of the most slow calls, with its median share.

Percentiles: linear interpolation between the closest ranks (numpy's default, Hyndman-Fan type 7).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from typing import TextIO

from .. import args as arguments
from ..args import EXIT_FAILED, EXIT_OK, Parser, add_by_option, by_keys, write_output
from ..render.triage import triage_lines
from ..render.waterfall import waterfall_json, waterfall_lines
from ..spans.calls import Call, Collected
from ..spans.collect import collect_calls
from ..spans.files import without_gc
from ..spans.names import GROUP_KEYS
from ..spans.span import InputError, ReadStats
from ..stats.groups import DEFAULT_BY_TEXT, default_by, group, summarize
from ..stats.triage import slow_limit, triage
from .output import compare_lines, group_lines, header_lines, json_report, source_text
from .sources import add_source_arguments, open_spans

DEFAULT_INPUT = "out/otlp"


def _parser(out: TextIO | None = None, err: TextIO | None = None) -> argparse.ArgumentParser:
    parser = Parser(
        prog="openai-latency report",
        out=out,
        err=err,
        description=(
            "Turn exported traces (OTLP JSON lines, e.g. the collector's ./out/otlp/traces.jsonl) into"
            " p50/p95/p99 per phase, compare endpoints, and name the dominant phase of slow calls."
        ),
        epilog=(
            "Percentiles use linear interpolation between the closest ranks (numpy's default,"
            " Hyndman-Fan type 7). Phase percentiles are over the calls that had the phase (column"
            " 'calls'); 'share' is the phase's part of the group's total call time. Slow calls: duration"
            " >= the group's p95 (so at least the slowest call), or >= --slow-threshold."
        ),
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help=f"OTLP JSON files (.jsonl, .json, .gz) or directories to search (default: {DEFAULT_INPUT})",
    )
    add_by_option(parser, GROUP_KEYS, DEFAULT_BY_TEXT)
    parser.add_argument(
        "--compare", action="store_true", help="print the groups side by side, one row per phase"
    )
    parser.add_argument(
        "--slow-threshold",
        type=arguments.duration,
        metavar="SECONDS",
        help="slow calls are those taking at least this long (default: the group's p95)",
    )
    parser.add_argument(
        "--client-timeout",
        type=arguments.duration,
        metavar="SECONDS",
        help="triage: the client timeout the calls ran with (a failure near it is a slow failure)",
    )
    parser.add_argument(
        "--http",
        action="store_true",
        help="also show the http.* sub-phases of network_wait (summed per call)",
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default: text)"
    )
    parser.add_argument(
        "--waterfall",
        type=_calls_to_draw,
        metavar="N",
        help="also draw the N slowest calls' phases as bars on one time axis (--http: with sub-phases)",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write charts (distributions, phases, time, slowest calls) as one page that opens offline",
    )
    add_source_arguments(parser)
    return parser


def _calls_to_draw(text: str) -> int:
    """:func:`~..args.count`, in the words ``report --help`` has always used."""
    try:
        return arguments.count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1: {text!r}") from None


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _parser(out, err)
    args = parser.parse_args(argv)
    keys = by_keys(parser, args.by, GROUP_KEYS)
    stats = ReadStats()
    try:
        spans = open_spans(parser, args, DEFAULT_INPUT, stats)
        with without_gc():
            collected = collect_calls(spans, intervals=bool(args.waterfall or args.html))
    except InputError as exc:
        hint = ""
        if not args.paths and not args.jaeger:
            hint = " (the collector writes ./out/otlp/traces.jsonl: see docs/STACK.md)"
        print(f"openai-latency report: {exc}{hint}", file=err)
        return EXIT_FAILED
    if not collected.calls:
        print(
            f"openai-latency report: no operation spans found. {_found_instead(stats, collected)}", file=err
        )
        return EXIT_FAILED
    if stats.skipped_count:
        first = stats.skipped[0]
        print(
            f"openai-latency report: warning: skipped {stats.skipped_count} unreadable line(s);"
            f" first: {first}",
            file=err,
        )
    by = default_by(collected.calls) if keys is None else keys
    groups = summarize(group(collected.calls, by), args.slow_threshold)
    limit = args.client_timeout
    triaged = [
        triage(entry.group.members, slow_limit(entry.duration, args.slow_threshold), limit)
        for entry in groups
    ]
    if args.format == "json":
        report = json_report(stats, collected, by, groups, args.slow_threshold)
        for entry, buckets in zip(report["groups"], triaged, strict=True):
            entry["triage"] = {name: bucket.as_dict() for name, bucket in buckets.items()}
        if args.waterfall:
            report["waterfall"] = waterfall_json(collected.calls, args.waterfall, http=args.http)
        text = json.dumps(report, indent=2)
    else:
        lines = header_lines(stats, collected, by, args.slow_threshold)
        lines += compare_lines(groups, args.http) if args.compare else group_lines(groups, args.http)
        for entry, buckets in zip(groups, triaged, strict=True):
            lines += ["", f"{entry.label}:" if len(groups) > 1 else "", *triage_lines(buckets, entry.calls)]
        if args.waterfall:
            drawn = waterfall_lines(collected.calls, args.waterfall, width=_width(out), http=args.http)
            lines += ["", *drawn]
        text = "\n".join(lines)
    if args.html:
        _write_html(args.html, collected.calls, stats, err)
    write_output(out, text)
    return EXIT_OK


def _write_html(path: str, calls: Sequence[Call], stats: ReadStats, err: TextIO) -> None:
    from ...version import __version__
    from ..render.html import write_page

    write_page("report", path, f"openai-latency report: {source_text(stats)}", [], calls, __version__, err)


def _width(out: TextIO) -> int:
    if out.isatty():
        return max(shutil.get_terminal_size().columns, 60)
    return 100


def _found_instead(stats: ReadStats, collected: Collected) -> str:
    files = source_text(stats)
    if not stats.spans:
        detail = f"Read {files} and found no spans at all"
        parts = []
        if stats.skipped_count:
            parts.append(
                f"{stats.skipped_count} line(s) were not OTLP trace JSON (first: {stats.skipped[0]})"
            )
        if stats.other_documents:
            parts.append(f"{stats.other_documents} line(s) held metrics or logs, not traces")
        if stats.bad_spans:
            parts.append(f"{stats.bad_spans} span(s) lacked ids or timestamps")
        return detail + (": " + "; ".join(parts) if parts else "") + "."
    names = collected.other_names.most_common(5)
    listed = ", ".join(f"{name!r} ({count})" for name, count in names)
    more = len(collected.other_names) - len(names)
    text = f"Read {files} with {stats.spans} span(s) of other names: {listed}"
    text += f" and {more} more name(s)." if more > 0 else "."
    if collected.phase_spans:
        text += f" {collected.phase_spans} phase span(s) had no exported operation span (parent)."
    return text + " Were the calls made with OpenAILatencyInstrumentor enabled?"

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
import contextlib
import json
import math
import os
import shutil
import sys
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, TextIO

from . import args as arguments
from .args import Parser
from .otlp_json import InputError, ReadStats, without_gc
from .report_sources import add_source_arguments, open_spans
from .report_stats import (
    GROUP_KEYS,
    HTTP_PHASES,
    Call,
    Dist,
    GroupStats,
    PhaseStats,
    SlowCalls,
    collect_calls,
    summarize,
)
from .tree import format_duration
from .triage import triage, triage_lines
from .waterfall import waterfall_json, waterfall_lines

DEFAULT_INPUT = "out/otlp"
DEFAULT_BY = ("endpoint", "model")
PERCENTILE_METHOD = "linear interpolation between closest ranks (numpy 'linear', Hyndman-Fan type 7)"


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="openai-latency report",
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
    parser.add_argument(
        "--by",
        action="append",
        metavar="KEYS",
        help=(
            f"group calls by these keys, comma-separated or repeated: {', '.join(GROUP_KEYS)}, or 'none'"
            f" for one group (default: {','.join(DEFAULT_BY)}; endpoint = server.address:server.port)"
        ),
    )
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
        type=_positive_int,
        metavar="N",
        help="also draw the N slowest calls' phases as bars on one time axis (--http: with sub-phases)",
    )
    add_source_arguments(parser)
    return parser


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1: {text!r}")
    return int(text)


def _group_keys(parser: argparse.ArgumentParser, values: list[str] | None) -> list[str] | None:
    """The ``--by`` keys, checked; None when not given (see :func:`_default_by`)."""
    if values is None:
        return None
    keys: list[str] = []
    for value in values:
        for item in (part.strip() for part in value.split(",")):
            if item == "none":
                continue
            if item not in GROUP_KEYS:
                parser.error(f"--by: unknown key {item!r} (choose from {', '.join(GROUP_KEYS)}, none)")
            if item not in keys:
                keys.append(item)
    return keys


def _default_by(calls: Sequence[Call]) -> tuple[str, ...]:
    """endpoint and model; the target (and load level of a sweep) for the spans of ``bench --out``."""
    if calls and all(call.keys["target"] != "-" for call in calls):
        return ("target", "load") if len({call.keys["load"] for call in calls}) > 1 else ("target",)
    return DEFAULT_BY


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _parser()
    args = parser.parse_args(argv)
    keys = _group_keys(parser, args.by)
    stats = ReadStats()
    try:
        spans = open_spans(parser, args, DEFAULT_INPUT, stats)
        with without_gc():
            collected = collect_calls(spans, intervals=bool(args.waterfall))
    except InputError as exc:
        hint = ""
        if not args.paths and not args.jaeger:
            hint = " (the collector writes ./out/otlp/traces.jsonl: see docs/STACK.md)"
        print(f"openai-latency report: {exc}{hint}", file=err)
        return 1
    if not collected.calls:
        print(
            f"openai-latency report: no operation spans found. {_found_instead(stats, collected)}", file=err
        )
        return 1
    if stats.skipped_count:
        first = stats.skipped[0]
        print(
            f"openai-latency report: warning: skipped {stats.skipped_count} unreadable line(s);"
            f" first: {first}",
            file=err,
        )
    by = list(_default_by(collected.calls)) if keys is None else keys
    groups = summarize(collected.calls, by, args.slow_threshold)
    members = _members(collected.calls, by)
    limit = args.client_timeout
    triaged = [triage(members[tuple(group.key.values())], group.slow.threshold, limit) for group in groups]
    if args.format == "json":
        report = _json_report(stats, collected, by, groups, args.slow_threshold)
        for entry, buckets in zip(report["groups"], triaged, strict=True):
            entry["triage"] = {name: bucket.as_dict() for name, bucket in buckets.items()}
        if args.waterfall:
            report["waterfall"] = waterfall_json(collected.calls, args.waterfall, http=args.http)
        text = json.dumps(report, indent=2)
    else:
        lines = _header(stats, collected, by, args.slow_threshold)
        lines += _compare_lines(groups, args.http) if args.compare else _group_lines(groups, args.http)
        for group, buckets in zip(groups, triaged, strict=True):
            lines += ["", f"{group.label}:" if len(groups) > 1 else "", *triage_lines(buckets, group.calls)]
        if args.waterfall:
            drawn = waterfall_lines(collected.calls, args.waterfall, width=_width(out), http=args.http)
            lines += ["", *drawn]
        text = "\n".join(lines)
    try:
        out.write(text + "\n")
        out.flush()
    except BrokenPipeError:  # `report ... | head`: the reader has gone, which is fine
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, out.fileno())
    return 0


def _members(calls: Sequence[Call], by: Sequence[str]) -> dict[tuple[str, ...], list[Call]]:
    """The calls of each group (by its key values, in ``by`` order), in one pass."""
    members: dict[tuple[str, ...], list[Call]] = defaultdict(list)
    for call in calls:
        members[tuple(call.keys[name] for name in by)].append(call)
    return members


def _width(out: TextIO) -> int:
    if out.isatty():
        return max(shutil.get_terminal_size().columns, 60)
    return 100


def _source(stats: ReadStats) -> str:
    if stats.jaeger is not None:
        return f"{stats.lines} trace(s) from Jaeger at {stats.jaeger} ({len(stats.files)} service(s))"
    return f"{len(stats.files)} file(s), {stats.lines} line(s)"


def _found_instead(stats: ReadStats, collected: Any) -> str:
    files = _source(stats)
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


# ---------------------------------------------------------------------------------------------- text


def _header(stats: ReadStats, collected: Any, by: Sequence[str], threshold: float | None) -> list[str]:
    files = f"{len(stats.files)} file" + ("s" if len(stats.files) != 1 else "") + f", {stats.lines} lines"
    if stats.jaeger is not None:
        files = _source(stats)
    lines = [
        f"openai-latency report: {len(collected.calls)} calls (operation spans) in {stats.spans} spans,"
        f" {files}"
    ]
    if stats.skipped_count:
        lines.append(f"  skipped {stats.skipped_count} unreadable line(s); first: {stats.skipped[0]}")
    if stats.bad_spans:
        lines.append(f"  left out {stats.bad_spans} span(s) without ids or timestamps")
    slow = f">= {format_duration(threshold)}" if threshold is not None else ">= the group's p95"
    lines.append(f"grouped by: {', '.join(by) or 'none'}; slow calls: duration {slow}")
    lines.append(f"percentiles: {PERCENTILE_METHOD}")
    return lines


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    result = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)
        ]
        result.append((indent + "   ".join(cells)).rstrip())
    return result


def _share(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value * 100:.0f}%" if value >= 0.1 else f"{value * 100:.1f}%"


def _dist_row(name: str, dist: Dist | None, share: str = "") -> list[str]:
    if dist is None:
        return [name, "0", share, "-", "-", "-", "-"]
    cells = [format_duration(value) for value in (dist.p50, dist.p95, dist.p99, dist.max)]
    return [name, str(dist.n), share, *cells]


def _errors_text(group: GroupStats) -> str:
    if not group.errors:
        return "no errors"
    listed = ", ".join(f"{name} {count}" for name, count in group.errors.items())
    return f"{group.error_count} error{'s' if group.error_count != 1 else ''} ({listed})"


def _slow_text(slow: SlowCalls, calls: int) -> str:
    limit = f">= {'p95 ' if slow.rule == 'p95' else ''}{format_duration(slow.threshold)}"
    if not slow.calls:
        return f"slow calls ({limit}): none"
    text = f"slow calls ({limit}): {slow.calls} of {calls}"
    if slow.dominant is None:
        return text + "; no phases recorded"
    text += f"; dominant phase {slow.dominant} in {slow.dominant_calls} of {slow.calls}"
    if not math.isnan(slow.median_share):
        text += f", median share {_share(slow.median_share)}"
    others = [f"{name} {count}" for name, count in slow.by_phase.items() if name != slow.dominant]
    return text + (f" (others: {', '.join(others)})" if others else "")


def _group_lines(groups: list[GroupStats], http: bool) -> list[str]:
    lines: list[str] = []
    for group in groups:
        calls = f"{group.calls} call{'s' if group.calls != 1 else ''}"
        lines += ["", f"== {group.label}: {calls}, {_errors_text(group)}", ""]
        rows = [
            ["phase", "calls", "share", "p50", "p95", "p99", "max"],
            _dist_row("total", group.duration, "100%"),
        ]
        for phase in group.phases:
            rows.append(_dist_row(phase.name, phase.dist, _share(phase.share)))
            if http and phase.name == "network_wait":
                rows += [_dist_row(f"  http.{sub.name}", sub.dist, _share(sub.share)) for sub in group.http]
        for name, dist in (
            ("time_to_first_token", group.ttft),
            ("time_per_output_token", group.tpot),
            ("stream.consumer_time", group.consumer_time),
        ):
            if dist is not None:
                rows.append(_dist_row(name, dist))
        lines += _table(rows)
        lines += ["", "  " + _slow_text(group.slow, group.calls)]
    return lines


def _triple(dist: Dist | None) -> str:
    if dist is None:
        return "-"
    return " / ".join(format_duration(value) for value in (dist.p50, dist.p95, dist.p99))


def _compare_lines(groups: list[GroupStats], http: bool) -> list[str]:
    names: list[str] = []
    for group in groups:
        names += [phase.name for phase in group.phases if phase.name not in names]
    order = [phase.name for group in groups for phase in group.phases]
    names.sort(key=order.index)
    by_phase = [{phase.name: phase for phase in group.phases} for group in groups]
    by_http = [{phase.name: phase for phase in group.http} for group in groups]
    http_names = sorted({name for table in by_http for name in table}, key=_http_order) if http else []
    two = len(groups) == 2
    header = ["p50 / p95 / p99", *(group.label for group in groups)] + (["B/A p50"] if two else [])
    rows = [header, ["calls", *(str(group.calls) for group in groups)] + ([""] if two else [])]
    rows.append(["errors", *(str(group.error_count) for group in groups)] + ([""] if two else []))

    def add(name: str, dists: list[Dist | None]) -> None:
        row = [name, *(_triple(dist) for dist in dists)]
        if two:
            row.append(_ratio(dists[0], dists[1]))
        rows.append(row)

    add("total", [group.duration for group in groups])
    for name in names:
        add(name, [_dist(table.get(name)) for table in by_phase])
        if name == "network_wait":
            for sub in http_names:
                add(f"  http.{sub}", [_dist(table.get(sub)) for table in by_http])
    add("time_to_first_token", [group.ttft for group in groups])
    add("time_per_output_token", [group.tpot for group in groups])
    slow_row = ["slow: dominant phase"]
    for group in groups:
        slow = group.slow
        share = "" if math.isnan(slow.median_share) else f", {_share(slow.median_share)}"
        slow_row.append(
            f"{slow.dominant} ({slow.dominant_calls}/{slow.calls}{share})" if slow.dominant else "-"
        )
    rows.append(slow_row + ([""] if two else []))
    legend = [f"B/A p50: {groups[1].label} over {groups[0].label}"] if two else []
    return ["", *_table(rows, indent=""), *legend]


def _dist(phase: PhaseStats | None) -> Dist | None:
    return None if phase is None else phase.dist


def _http_order(name: str) -> tuple[int, str]:
    return (HTTP_PHASES.index(name) if name in HTTP_PHASES else len(HTTP_PHASES), name)


def _ratio(a: Dist | None, b: Dist | None) -> str:
    if a is None or b is None or a.p50 <= 0:
        return "-"
    return f"x{b.p50 / a.p50:.2f}"


# ---------------------------------------------------------------------------------------------- json


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def _json_report(
    stats: ReadStats, collected: Any, by: Sequence[str], groups: list[GroupStats], threshold: float | None
) -> dict[str, Any]:
    return {
        "input": {
            "files": stats.files,
            "lines": stats.lines,
            "blank_lines": stats.blank_lines,
            "skipped_lines": stats.skipped_count,
            "skipped": [{"file": s.file, "line": s.line, "reason": s.reason} for s in stats.skipped],
            "non_trace_documents": stats.other_documents,
            "spans": stats.spans,
            "bad_spans": stats.bad_spans,
            "operation_spans": len(collected.calls),
            "phase_spans": collected.phase_spans,
        },
        "percentile_method": "linear",
        "group_by": list(by),
        "slow_rule": {"rule": "p95" if threshold is None else "threshold", "threshold": threshold},
        "groups": [_json_group(group) for group in groups],
    }


def _json_phases(phases: list[PhaseStats]) -> dict[str, Any]:
    return {phase.name: {**phase.dist.as_dict(), "share": phase.share} for phase in phases}


def _json_group(group: GroupStats) -> dict[str, Any]:
    slow = group.slow
    return {
        "key": group.key,
        "label": group.label,
        "calls": group.calls,
        "errors": {"count": group.error_count, "by_type": group.errors},
        "duration": group.duration.as_dict(),
        "phases": _json_phases(group.phases),
        "http_phases": _json_phases(group.http),
        "time_to_first_token": group.ttft.as_dict() if group.ttft else None,
        "time_per_output_token": group.tpot.as_dict() if group.tpot else None,
        "stream_consumer_time": group.consumer_time.as_dict() if group.consumer_time else None,
        "slow": {
            "rule": slow.rule,
            "threshold": slow.threshold,
            "calls": slow.calls,
            "dominant_phase": slow.dominant,
            "dominant_calls": slow.dominant_calls,
            "median_share": _number(slow.median_share),
            "by_phase": slow.by_phase,
        },
    }

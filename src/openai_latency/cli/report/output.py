"""``openai-latency report`` output: the text tables and the JSON document of the per-group numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..render.server_split import split_lines
from ..render.tables import table
from ..render.text import format_duration, format_share, triple
from ..spans.calls import Collected
from ..spans.names import HTTP_PHASES, phase_sort_key
from ..spans.span import ReadStats
from ..stats.groups import GroupStats, PhaseStats, SlowCalls, phases_dict
from ..stats.percentiles import Dist, dist_dict, json_number
from ..stats.server_split import server_json
from ..stats.verdict import RATIO_FLOOR_S

PERCENTILE_METHOD = "linear interpolation between closest ranks (numpy 'linear', Hyndman-Fan type 7)"


def source_text(stats: ReadStats) -> str:
    if stats.jaeger is not None:
        return f"{stats.lines} trace(s) from Jaeger at {stats.jaeger} ({len(stats.files)} service(s))"
    return f"{len(stats.files)} file(s), {stats.lines} line(s)"


# ---------------------------------------------------------------------------------------------- text


def header_lines(
    stats: ReadStats, collected: Collected, by: Sequence[str], threshold: float | None
) -> list[str]:
    files = f"{len(stats.files)} file" + ("s" if len(stats.files) != 1 else "") + f", {stats.lines} lines"
    if stats.jaeger is not None:
        files = source_text(stats)
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
        text += f", median share {format_share(slow.median_share)}"
    others = [f"{name} {count}" for name, count in slow.by_phase.items() if name != slow.dominant]
    return text + (f" (others: {', '.join(others)})" if others else "")


def group_lines(groups: list[GroupStats], http: bool) -> list[str]:
    lines: list[str] = []
    for group in groups:
        calls = f"{group.calls} call{'s' if group.calls != 1 else ''}"
        lines += ["", f"== {group.label}: {calls}, {_errors_text(group)}", ""]
        rows = [
            ["phase", "calls", "share", "p50", "p95", "p99", "max"],
            _dist_row("total", group.duration, "100%"),
        ]
        for phase in group.phases:
            rows.append(_dist_row(phase.name, phase.dist, format_share(phase.share)))
            if http and phase.name == "network_wait":
                rows += [
                    _dist_row(f"  http.{sub.name}", sub.dist, format_share(sub.share)) for sub in group.http
                ]
        for name, dist in (
            ("time_to_first_token", group.ttft),
            ("time_to_first_answer_token", group.ttft_answer if group.reasoning else None),
            ("reasoning.duration", group.reasoning),
            ("time_per_output_token", group.tpot),
            ("stream.consumer_time", group.consumer_time),
        ):
            if dist is not None:
                rows.append(_dist_row(name, dist))
        lines += table(rows)
        lines += ["", "  " + _slow_text(group.slow, group.calls)]
        lines += split_lines([("server", group.group.members)], indent="  ")
    return lines


def compare_lines(groups: list[GroupStats], http: bool) -> list[str]:
    names: list[str] = []
    for group in groups:
        names += [phase.name for phase in group.phases if phase.name not in names]
    order = [phase.name for group in groups for phase in group.phases]
    names.sort(key=order.index)
    by_phase = [{phase.name: phase for phase in group.phases} for group in groups]
    by_http = [{phase.name: phase for phase in group.http} for group in groups]
    http_names = (
        sorted(
            {name for table in by_http for name in table}, key=lambda name: phase_sort_key(name, HTTP_PHASES)
        )
        if http
        else []
    )
    two = len(groups) == 2
    header = ["p50 / p95 / p99", *(group.label for group in groups)] + (["B/A p50"] if two else [])
    rows = [header, ["calls", *(str(group.calls) for group in groups)] + ([""] if two else [])]
    rows.append(["errors", *(str(group.error_count) for group in groups)] + ([""] if two else []))

    def add(name: str, dists: list[Dist | None]) -> None:
        row = [name, *(triple(dist) for dist in dists)]
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
    if any(group.reasoning for group in groups):
        add("time_to_first_answer_token", [group.ttft_answer for group in groups])
        add("reasoning.duration", [group.reasoning for group in groups])
    add("time_per_output_token", [group.tpot for group in groups])
    slow_row = ["slow: dominant phase"]
    for group in groups:
        slow = group.slow
        share = "" if math.isnan(slow.median_share) else f", {format_share(slow.median_share)}"
        slow_row.append(
            f"{slow.dominant} ({slow.dominant_calls}/{slow.calls}{share})" if slow.dominant else "-"
        )
    rows.append(slow_row + ([""] if two else []))
    legend = [f"B/A p50: {groups[1].label} over {groups[0].label}"] if two else []
    return ["", *table(rows, indent=""), *legend]


def _dist(phase: PhaseStats | None) -> Dist | None:
    return None if phase is None else phase.dist


def _ratio(a: Dist | None, b: Dist | None) -> str:
    """B/A of the p50s, only where both are well above the clock's resolution (no x0.00, no x347)."""
    if a is None or b is None or min(a.p50, b.p50) < RATIO_FLOOR_S:
        return "-"
    return f"x{b.p50 / a.p50:.2f}"


# ---------------------------------------------------------------------------------------------- json


def json_report(
    stats: ReadStats,
    collected: Collected,
    by: Sequence[str],
    groups: list[GroupStats],
    threshold: float | None,
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


def _json_group(group: GroupStats) -> dict[str, Any]:
    slow = group.slow
    return {
        "key": group.key,
        "label": group.label,
        "calls": group.calls,
        "errors": {"count": group.error_count, "by_type": group.errors},
        "duration": group.duration.as_dict(),
        "phases": phases_dict(group.phases),
        "http_phases": phases_dict(group.http),
        "time_to_first_token": dist_dict(group.ttft),
        "time_to_first_token_from_request_sent": dist_dict(group.ttft_sent),
        "time_to_first_answer_token": dist_dict(group.ttft_answer),
        "reasoning_duration": dist_dict(group.reasoning),
        "time_per_output_token": dist_dict(group.tpot),
        "stream_consumer_time": dist_dict(group.consumer_time),
        "server": server_json(group.group.members),
        "slow": {
            "rule": slow.rule,
            "threshold": slow.threshold,
            "calls": slow.calls,
            "dominant_phase": slow.dominant,
            "dominant_calls": slow.dominant_calls,
            "median_share": json_number(slow.median_share),
            "by_phase": slow.by_phase,
        },
    }

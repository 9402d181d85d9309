"""A waterfall of the slowest calls: each phase as a bar on one time axis, in plain text.

One scale for every call drawn (the slowest call fills the bar area), so bars compare across calls:

    1. chat gpt-4o-mini  1.93 s  request req_7f3a  dominant stream_drain (43%)
       request_build    █                                                     0.4 ms
       network_wait     ██                                                     52 ms
       retry_backoff      ███████                                             250 ms
       ...

Each bar starts at the phase's offset from the call's start; its width is proportional to its
duration (at least one cell, so short phases stay visible). With ``http`` the http.* sub-phases of
each network_wait follow it, indented. Calls read without phase spans (only the summed
``openai_latency.phase.*`` attributes) are drawn in phase order without gaps, and say so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..spans.calls import Call, Interval
from ..spans.names import phase_rank
from .text import format_duration

BAR = "█"
ASCII_BAR = "#"
_LABEL = 18
_DURATION = 10
_MIN_BAR = 10


def waterfall_lines(
    calls: Sequence[Call], n: int, width: int = 80, http: bool = False, ascii_only: bool = False
) -> list[str]:
    """The ``n`` slowest calls, slowest first; ``width`` columns per line; no ANSI codes."""
    slowest = sorted(calls, key=lambda call: call.duration, reverse=True)[: max(n, 0)]
    if not slowest:
        return []
    # each attempt's network_wait row ends with its outcome ("  -> 429"): room for the longest
    suffix = max(
        (len(o) + 5 for call in slowest if call.intervals for o in attempt_outcomes(call)), default=0
    )
    bar_width = max(width - _LABEL - _DURATION - 5 - suffix, _MIN_BAR)  # 3 indent + 2 spaces
    longest = max(_span_ns(call) for call in slowest)
    scale = bar_width / longest if longest > 0 else 0.0
    cell = ASCII_BAR if ascii_only else BAR
    lines = [
        f"waterfall: the {len(slowest)} slowest call{'s' if len(slowest) != 1 else ''},"
        f" one time axis (full width = {format_duration(longest / 1e9)})"
    ]
    for rank, call in enumerate(slowest, 1):
        lines.append("")
        lines += _header(rank, call, width)
        intervals, exact = _intervals(call, http)
        origin = _origin(call, intervals)
        outcomes = iter(attempt_outcomes(call) if exact else ())
        for interval in intervals:
            label = ("  http." if interval.depth else "") + interval.phase
            offset = round((interval.start_ns - origin) * scale)
            length = max(1, round((interval.end_ns - interval.start_ns) * scale))
            offset = min(max(offset, 0), bar_width - 1)
            length = min(length, bar_width - offset)
            bar = (" " * offset + cell * length).ljust(bar_width)
            seconds = (interval.end_ns - interval.start_ns) / 1e9
            line = f"   {label[:_LABEL]:<{_LABEL}} {bar} {format_duration(seconds):>{_DURATION}}"
            if interval.phase == "network_wait" and not interval.depth:  # one per attempt, in order
                line += f"  -> {next(outcomes, '?')}"
            lines.append(line)
        if not intervals:
            lines.append("   (no phases recorded)")
        elif not exact:
            lines.append("   (no phase spans exported: phases from the call's summed attributes, in order)")
    return lines


def waterfall_json(calls: Sequence[Call], n: int, http: bool = False) -> list[dict[str, Any]]:
    """The same ``n`` slowest calls as data: offsets and durations in seconds from the call's start."""
    result = []
    for call in sorted(calls, key=lambda call: call.duration, reverse=True)[: max(n, 0)]:
        intervals, exact = _intervals(call, http)
        origin = _origin(call, intervals)
        found = call.dominant()
        result.append({
            "name": call.name,
            "target": call.keys["target"] if call.keys["target"] != "-" else None,
            "duration": call.duration,
            "request_id": call.request_id,
            "trace_id": call.trace_id,
            "attempts": attempt_outcomes(call),
            "error_type": call.error_type,
            "dominant_phase": found[0] if found else None,
            "from_phase_spans": exact,
            "phases": [
                {
                    "phase": i.phase,
                    "depth": i.depth,
                    "start": (i.start_ns - origin) / 1e9,
                    "duration": (i.end_ns - i.start_ns) / 1e9,
                }
                for i in intervals
            ],
        })  # fmt: skip
    return result


def _header(rank: int, call: Call, width: int) -> list[str]:
    """One line, or two when it would be wider than ``width``."""
    target = call.keys["target"]
    identity = f"request {call.request_id}" if call.request_id else f"trace {call.trace_id or '-'}"
    first = [
        f"{rank}. {call.name}",
        *([f"target {target}"] if target != "-" else []),
        format_duration(call.duration),
    ]
    first.append(identity)
    second = []
    outcomes = attempt_outcomes(call)
    if len(outcomes) > 1:
        second.append(f"attempts {' -> '.join(outcomes)}")
    found = call.dominant()
    if found is not None:
        phase, share = found
        second.append(f"dominant {phase}" + ("" if math.isnan(share) else f" ({share * 100:.0f}%)"))
    if call.error_type:
        second.append(f"error {call.error_type}")
    line = "  ".join(first + second)
    if len(line) <= width or not second:
        return [line]
    rest = "   " + "  ".join(second)
    if len(rest) <= width or len(second) == 1:
        return ["  ".join(first), rest]
    return ["  ".join(first), "   " + second[0], "   " + "  ".join(second[1:])]


def attempt_outcomes(call: Call) -> list[str]:
    """Each attempt's outcome in order: the retried ones' error types (``429``, a timeout), then the
    last one's (``ok`` when the call succeeded)."""
    return [*call.retry_reasons, call.error_type or "ok"]


def _intervals(call: Call, http: bool) -> tuple[list[Interval], bool]:
    if call.intervals:
        return [i for i in call.intervals if http or i.depth == 0], True
    # only the summed attributes: one bar per phase, in the order of a call, back to back
    start = call.start_ns
    result = []
    for phase in sorted(call.phases, key=phase_rank):
        end = start + round(call.phases[phase] * 1e9)
        result.append(Interval(phase, start, end, 0))
        start = end
    return result, False


def _origin(call: Call, intervals: list[Interval]) -> int:
    starts = [interval.start_ns for interval in intervals]
    if call.start_ns and (not starts or call.start_ns <= min(starts)):
        return call.start_ns
    return min(starts) if starts else call.start_ns


def _span_ns(call: Call) -> float:
    """What the call occupies on the axis: its duration, or its phases' extent when that is longer."""
    duration = call.duration * 1e9
    if call.intervals:
        origin = _origin(call, call.intervals)
        duration = max(duration, max(interval.end_ns for interval in call.intervals) - origin)
    return duration

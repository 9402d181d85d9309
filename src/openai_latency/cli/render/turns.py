"""``report --by trace`` in words and as JSON: a sentence per root name ("agent turn p50 2.10 s: model
1.50 s (first_token 900.0 ms, stream_drain 500.0 ms), tools 400.0 ms, own code 200.0 ms"), the p50/p95
table of the path's categories, the LLM calls' totals, the server's split, the slow turns; and the
JSON of DESIGN.md §12 (``traces[]``, ``groups[]``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from ..spans.names import phase_sort_key
from ..stats.critical_path import CATEGORIES, Turn, TurnCall
from ..stats.percentiles import Dist, dist_dict
from ..stats.server_join import JOINED, NO_SERVER_SPAN
from ..stats.turns import SlowTurn, TurnGroup
from .tables import table
from .text import format_duration, format_share

#: :func:`phase_sort_key` of each phase name, computed once: a trace's JSON sorts its phases, 73,000
#: times on 1 M spans.
_phase_key = lru_cache(maxsize=256)(phase_sort_key)

#: The categories in words.
WORDS: Final = {"llm": "model", "tool": "tools", "other": "other spans", "self": "own code"}
RULE: Final = (
    "critical path: from the root's end backwards, the child span that ended last before the current"
    " point, recursively (Jaeger's rule); model = LLM calls (not entered), tools = execute_tool spans,"
    " other spans = any other span's own time, own code = time on the path no span covers"
)


def _phases_text(phases: dict[str, float], limit: int = 2) -> str:
    top = sorted(((seconds, name) for name, seconds in phases.items() if seconds > 0), reverse=True)
    return ", ".join(f"{name} {format_duration(seconds)}" for seconds, name in top[:limit])


def sentence(group: TurnGroup) -> str:
    """The group's p50 in one sentence a person can act on."""
    parts = []
    for name in CATEGORIES:
        seconds = group.path[name].p50
        if seconds <= 0 and name != "llm":
            continue
        text = f"{WORDS[name]} {format_duration(seconds)}"
        if name == "llm":
            phases = _phases_text({phase: dist.p50 for phase, dist in group.llm_phases.items()})
            text += f" ({phases})" if phases else ""
        parts.append(text)
    count = len(group.turns)
    return (
        f"{group.root} p50 {format_duration(group.duration.p50)}: {', '.join(parts)}"
        f" (p95 {format_duration(group.duration.p95)}, {count} turn{'s' if count != 1 else ''})"
    )


def slow_text(slow: SlowTurn) -> str:
    turn = slow.turn
    text = (
        f"{turn.trace_id} {format_duration(turn.duration)}: {WORDS[slow.category]}"
        f" {format_duration(slow.seconds)} ({format_share(slow.share)})"
    )
    if slow.phase is not None:
        text += f", mostly {slow.phase} {format_duration(slow.phase_seconds)}"
    if turn.server_path is not None:
        text += f"; server: {_split_text(turn.server_path.as_dict())}"
    return text


def _split_text(split: dict[str, float | int]) -> str:
    return ", ".join(
        f"{name} {format_duration(float(split[name]))}" for name in ("queue", "prefill", "decode", "rest")
    )


def _table(group: TurnGroup) -> list[str]:
    rows = [["part of the turn", "p50", "p95", "share p50", "share p95"]]
    duration = group.duration
    rows.append(["duration", format_duration(duration.p50), format_duration(duration.p95), "", ""])
    for name in CATEGORIES:
        dist, share = group.path[name], group.share[name]
        rows.append(
            [WORDS[name], format_duration(dist.p50), format_duration(dist.p95),
             format_share(share.p50), format_share(share.p95)]
        )  # fmt: skip
        if name == "llm":
            for phase in sorted(group.llm_phases, key=phase_sort_key):
                phase_dist = group.llm_phases[phase]
                rows.append(
                    [f"  {phase}", format_duration(phase_dist.p50), format_duration(phase_dist.p95), "", ""]
                )
    return table(rows, indent="  ")


def _server_lines(group: TurnGroup) -> list[str]:
    status = group.server_status
    joined = status.get(JOINED, 0)
    failed = {name: count for name, count in status.items() if name not in (JOINED, NO_SERVER_SPAN)}
    detached = sum(turn.detached_server_spans for turn in group.turns)
    lines = []
    if group.server_path is not None:
        lines.append(
            f"  server's own span joined for {joined} of {group.llm_calls} calls; on the path, summed over"
            f" the turns: {_split_text(group.server_path.as_dict())} (rest = network and client)"
        )
    if failed:
        listed = ", ".join(f"{name.replace('_', ' ')} {count}" for name, count in sorted(failed.items()))
        lines.append(f"  server split not given for {sum(failed.values())} call(s): {listed}")
    if detached:
        lines.append(
            f"  {detached} server span(s) below no LLM call: the server dropped the traceparent or exported"
            " its spans as siblings (no split for those calls)"
        )
    return lines


def _notes(turns: list[Turn]) -> list[str]:
    counts = {
        "without their root span (from the earliest start to the latest end)": sum(
            t.root_missing for t in turns
        ),
        "with spans whose parent never arrived (attached to the root)": sum(bool(t.orphans) for t in turns),
        "with spans clamped to their parent (clock skew)": sum(bool(t.clamped) for t in turns),
        "with spans wholly outside their parent (left off the path)": sum(bool(t.outside) for t in turns),
    }
    lines = [f"  {count} turn(s) {what}" for what, count in counts.items() if count]
    largest = max((t.clamp_max for t in turns), default=0.0)
    if largest:
        lines.append(f"  largest clamp: {format_duration(largest)}")
    return lines


def group_lines(group: TurnGroup, slow: bool = True) -> list[str]:
    """The group in words; ``slow``: with its slow turns (the demo's one turn goes without)."""
    calls = (
        f"  LLM calls: {group.llm_calls} ({group.off_path_calls} off the path, overlapped;"
        f" {group.calls_in_tools} inside tools), tokens {group.input_tokens} in / {group.output_tokens} out,"
        f" {group.retries} retr{'y' if group.retries == 1 else 'ies'}, {group.errors} error(s)"
    )
    rule = "p95 " if group.slow_rule == "p95" else ""
    lines = [sentence(group), *_table(group), calls, *_server_lines(group), *_notes(group.turns)]
    if not slow:
        return lines
    lines.append(
        f"  slow turns (>= {rule}{format_duration(group.slow_threshold)}):"
        f" {len(group.slow)} of {len(group.turns)}"
    )
    lines += [f"    {slow_text(slow)}" for slow in group.slow[:10]]
    if len(group.slow) > 10:
        lines.append(f"    ... and {len(group.slow) - 10} more (--format json lists them all)")
    return lines


# ---------------------------------------------------------------------------------------------- JSON


def _call_json(call: TurnCall, start_ns: int) -> dict[str, Any]:
    """One call of a turn that started at ``start_ns``."""
    return {
        "span_id": call.span_id, "name": call.name, "start": (call.start_ns - start_ns) / 1e9,
        "duration": (call.end_ns - call.start_ns) / 1e9, "on_path": call.on_path, "in_tool": call.in_tool,
        "phases": call.phases, "input_tokens": call.input_tokens, "output_tokens": call.output_tokens,
        "retries": call.retries, "error_type": call.error_type, "server_status": call.server_status,
        "server": call.server.as_dict() if call.server is not None else None,
    }  # fmt: skip


def turn_json(turn: Turn) -> dict[str, Any]:
    """One trace as DESIGN.md §12 names it (seconds; ``trace_id`` 32 lowercase hex digits)."""
    calls = turn.calls
    off_path = input_tokens = output_tokens = retries = errors = 0
    for call in calls:  # one pass (a trace's JSON is written for each of 73,000 traces of 1 M spans)
        off_path += not call.on_path
        input_tokens += call.input_tokens or 0
        output_tokens += call.output_tokens or 0
        retries += call.retries
        errors += call.error_type is not None
    start_ns = turn.start_ns
    llm_phases = turn.llm_phases
    return {
        "trace_id": turn.trace_id,
        "root": turn.root,
        "service": turn.service,
        "start": start_ns / 1e9,
        "duration": (turn.end_ns - start_ns) / 1e9,
        "llm_calls": len(calls),
        "llm_calls_off_path": off_path,
        "tokens": {"input": input_tokens, "output": output_tokens},
        "retries": retries,
        "errors": errors,
        "critical_path": {
            **turn.path,
            "llm_phases": {name: llm_phases[name] for name in sorted(llm_phases, key=_phase_key)},
            "server": turn.server_path.as_dict() if turn.server_path is not None else None,
        },
        "dominant": turn.dominant(),
        "path": [
            {
                "name": s.name,
                "category": s.category,
                "span_id": s.span_id,
                "start": (s.start_ns - start_ns) / 1e9,
                "duration": (s.end_ns - s.start_ns) / 1e9,
            }
            for s in turn.segments
        ],
        "calls": [_call_json(call, start_ns) for call in calls],
        "spans": turn.spans,
        "clamped": turn.clamped,
        "clamp_max": turn.clamp_max,
        "outside_parent": turn.outside,
        "orphans": turn.orphans,
        "detached_server_spans": turn.detached_server_spans,
        "notes": turn.notes,
    }


def _dists(dists: dict[str, Dist]) -> dict[str, Any]:
    return {name: dist_dict(dist) for name, dist in dists.items()}


def group_json(group: TurnGroup) -> dict[str, Any]:
    return {
        "root": group.root,
        "traces": len(group.turns),
        "sentence": sentence(group),
        "duration": dist_dict(group.duration),
        "critical_path": {
            **_dists(group.path),
            "llm_phases": _dists(dict(sorted(group.llm_phases.items(), key=lambda i: phase_sort_key(i[0])))),
        },
        "share": _dists(group.share),
        "llm_calls": group.llm_calls,
        "llm_calls_off_path": group.off_path_calls,
        "llm_calls_in_tools": group.calls_in_tools,
        "tokens": {"input": group.input_tokens, "output": group.output_tokens},
        "retries": group.retries,
        "errors": group.errors,
        "server": group.server_path.as_dict() if group.server_path is not None else None,
        "server_status": group.server_status,
        "slow": {
            "rule": group.slow_rule,
            "threshold": group.slow_threshold,
            "turns": [
                {
                    "trace_id": s.turn.trace_id,
                    "duration": s.turn.duration,
                    "dominant": s.category,
                    "seconds": s.seconds,
                    "share": s.share,
                    "phase": s.phase,
                    "phase_seconds": s.phase_seconds,
                }
                for s in group.slow
            ],
        },
    }

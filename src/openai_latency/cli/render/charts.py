"""The charts of ``--html`` as Plotly figures (plain dicts), from calls: numbers to pictures, no page.

Per group (target, or target and load level in a sweep): TTFT and e2e as empirical CDFs on a log
axis; each phase's p50 stacked with a p95 marker; latency and throughput against the load level (a
``--sweep``'s knee marked on it: a vertical line, its level, and how it was found);
requests over time (start against duration, failed and retried calls marked); the slowest calls phase
by phase, with their target, request id (else trace id) and each attempt's outcome. A chart without
data is left out. The page around them is :mod:`.html`'s.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..spans.calls import Call
from ..spans.names import phase_rank
from ..stats.groups import Group, GroupStats, group, summarize, throughput
from ..stats.metric_table import COUNTS_WORDS, METRIC, Metric
from .waterfall import attempt_outcomes

COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")
PHASE_COLORS = {
    "request_build": "#bab0ac",
    "network_wait": "#4c78a8",
    "retry_backoff": "#e45756",
    "first_token": "#f58518",
    "reasoning": "#b279a2",
    "stream_drain": "#54a24b",
    "response_read": "#72b7b2",
}
SLOWEST = 10
_LAYOUT: dict[str, Any] = {
    "margin": {"l": 70, "r": 30, "t": 40, "b": 50},
    "height": 380,
    "hovermode": "closest",
}


@dataclass(frozen=True)
class Knee:
    """Where a sweep found the knee: the load level (a label of the calls' ``load`` key) and, in
    words, how it was found (the chart says both)."""

    level: str
    rule: str


KNEE_COLOR = "#d62728"


def _natural(text: str) -> list[tuple[int, int | str]]:
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p]


def _label(call: Call, by_load: bool) -> str:
    keys = call.keys
    name = keys["target"] if keys["target"] != "-" else f"{keys['endpoint']} {keys['model']}"
    return f"{name} {keys['load']}" if by_load and keys["load"] != "-" else name


def chart_data(
    calls: Sequence[Call], slowest: int = SLOWEST, knee: Knee | None = None
) -> dict[str, dict[str, Any]]:
    """The charts as Plotly figures (id -> {"title", "data", "layout"}); a chart without data is left
    out. ``knee``: a sweep's, marked on the chart of latency and throughput against the load level."""
    loads = {call.keys["load"] for call in calls}
    groups: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        groups[_label(call, len(loads) > 1)].append(call)
    ordered = sorted(groups, key=_natural)
    # each group's numbers: stats/'s (summarize), the ones report's and bench's tables print
    found = summarize([Group({"label": label}, groups[label]) for label in ordered])
    summaries = {label: stats for label, stats in zip(ordered, found, strict=True)}
    colors = {label: COLORS[i % len(COLORS)] for i, label in enumerate(ordered)}
    charts = {
        "ttft": _cdf(METRIC["ttft"], ordered, groups, colors),
        "e2e": _cdf(METRIC["e2e"], ordered, groups, colors),
        "phases": _phases(ordered, summaries, colors),
        "sweep": _sweep(calls, knee),
        "timeline": _timeline(calls, ordered, groups, colors),
        "waterfall": _waterfall(calls, slowest, len(loads) > 1),
    }
    return {name: chart for name, chart in charts.items() if chart is not None}


def _cdf(
    metric: Metric, ordered: list[str], groups: dict[str, list[Call]], colors: dict[str, str]
) -> dict[str, Any] | None:
    """The metric's values over the calls its table entry counts (:mod:`..stats.metric_table`)."""
    title = f"{metric.title.capitalize()} ({COUNTS_WORDS[metric.counts]})"
    data = []
    for label in ordered:
        values = sorted(v for v in metric.values(groups[label]) if v > 0)
        if not values:
            continue
        n = len(values)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": label,
                "line": {"shape": "hv", "color": colors[label]},
                "marker": {"size": 4},
                "x": [v * 1000 for v in values],
                "y": [(i + 1) / n for i in range(n)],
                "hovertemplate": "%{x:.1f} ms: %{y:.0%} of calls<extra>" + html.escape(label) + "</extra>",
            }
        )
    if not data:
        return None
    layout = {
        **_LAYOUT,
        "title": {"text": title},
        "xaxis": {"type": "log", "title": {"text": "ms (log)"}},
        "yaxis": {"title": {"text": "share of calls at or below"}, "tickformat": ".0%", "range": [0, 1.02]},
    }
    return {"title": title, "data": data, "layout": layout}


def _phases(
    ordered: list[str], summaries: dict[str, GroupStats], colors: dict[str, str]
) -> dict[str, Any] | None:
    """Each group's phases as :func:`..stats.groups.summarize` gave them (the tables' numbers)."""
    found = {label: {phase.name: phase for phase in summaries[label].phases} for label in ordered}
    names = sorted({name for phases in found.values() for name in phases}, key=phase_rank)
    data = []
    for name in names:
        p50s, p95s, texts, patterns = [], [], [], []
        for label in ordered:
            phase, calls = found[label].get(name), summaries[label].calls
            p50, p95 = (phase.dist.p50, phase.dist.p95) if phase else (0.0, 0.0)
            n, share = (phase.dist.n, phase.share) if phase else (0, 0.0)
            p50s.append(p50 * 1000)
            p95s.append((p95 - p50) * 1000)
            patterns.append("/" if 0 < n < calls else "")  # not every call had it
            texts.append(
                f"{name}: p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, {share:.0%} of the time,"
                f" in {n} of {calls} calls"
            )
        data.append(
            {
                "type": "bar",
                "name": name,
                "x": ordered,
                "y": p50s,
                "marker": {"color": PHASE_COLORS.get(name), "pattern": {"shape": patterns}},
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": p95s,
                    "arrayminus": [0] * len(p95s),
                    "color": "#333",
                    "thickness": 1.5,
                    "width": 6,
                },
                "hovertext": texts,
                "hoverinfo": "text",
            }
        )
    if not data:
        return None
    title = "Phases: p50 stacked, a p95 marker on each (over the calls that had it; hatched: not every call)"
    layout = {**_LAYOUT, "barmode": "stack", "title": {"text": title}, "yaxis": {"title": {"text": "ms"}}}
    return {"title": title, "data": data, "layout": layout}


def _sweep(calls: Sequence[Call], knee: Knee | None = None) -> dict[str, Any] | None:
    levels = sorted({call.keys["load"] for call in calls}, key=_natural)
    if len(levels) < 2:
        return None
    targets = sorted({call.keys["target"] for call in calls}, key=_natural)
    # the (target, level) groups and their numbers: stats/'s, as bench's tables give them
    found = {(s.key["target"], s.key["load"]): s for s in summarize(group(calls, ("target", "load")))}
    data: list[dict[str, Any]] = []
    for index, target in enumerate(targets):
        color = COLORS[index % len(COLORS)]
        rows = []
        for level in levels:
            stats = found.get((target, level))
            if stats is None:
                continue
            rate = throughput(stats.group.members)
            rows.append((level, stats.duration.p50, stats.duration.p95, rate or 0))
        x = [row[0] for row in rows]
        for position, (name, dash) in enumerate((("e2e p50", "solid"), ("e2e p95", "dash"))):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{target} {name}",
                    "x": x,
                    "y": [row[1 + position] * 1000 for row in rows],
                    "line": {"color": color, "dash": dash},
                }
            )
        data.append(
            {
                "type": "bar",
                "name": f"{target} output tokens/s",
                "x": x,
                "y": [row[3] for row in rows],
                "yaxis": "y2",
                "opacity": 0.35,
                "marker": {"color": color},
            }
        )
    title = "Latency and throughput against the load level"
    layout: dict[str, Any] = {
        **_LAYOUT,
        "title": {"text": title},
        "xaxis": {"title": {"text": "load level"}, "type": "category", "categoryorder": "array",
                  "categoryarray": levels},
        "yaxis": {"title": {"text": "e2e ms"}},
        "barmode": "group",
        "yaxis2": {"title": {"text": "output tokens/s"}, "overlaying": "y", "side": "right"},
    }  # fmt: skip
    if knee is not None and knee.level in levels:
        layout.update(_knee_marks(knee, levels.index(knee.level)))
        layout["title"] = {"text": f"{title}<br><sub>knee: {html.escape(knee.rule)}</sub>"}
        layout["margin"] = {**_LAYOUT["margin"], "t": 80}
    return {"title": title, "data": data, "layout": layout}


def _knee_marks(knee: Knee, position: int) -> dict[str, Any]:
    """A vertical line at the knee's level (its position on the category axis) across the plot,
    labelled with the level."""
    line = {"color": KNEE_COLOR, "width": 2, "dash": "dash"}
    return {
        "shapes": [{"type": "line", "xref": "x", "yref": "paper", "x0": position, "x1": position,
                    "y0": 0, "y1": 1, "line": line, "name": "knee"}],
        "annotations": [{"xref": "x", "yref": "paper", "x": position, "y": 1, "yanchor": "top",
                         "xanchor": "left", "xshift": 4,
                         "text": f"knee: {html.escape(knee.level)}", "showarrow": False,
                         "font": {"color": KNEE_COLOR}, "bgcolor": "rgba(255,255,255,0.8)"}],
    }  # fmt: skip


def _timeline(
    calls: Sequence[Call], ordered: list[str], groups: dict[str, list[Call]], colors: dict[str, str]
) -> dict[str, Any] | None:
    if not calls:
        return None
    start = min(call.start_ns for call in calls)
    data: list[dict[str, Any]] = []
    for label in ordered:
        members = groups[label]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": label,
                "marker": {"color": colors[label], "size": 6},
                "x": [(c.start_ns - start) / 1e9 for c in members],
                "y": [c.duration * 1000 for c in members],
                "text": [_outcome(c) for c in members],
                "hovertemplate": "%{x:.2f} s: %{y:.1f} ms, %{text}",
            }
        )
    for name, symbol, chosen in (
        ("failed", "x-thin-open", [c for c in calls if c.error_type is not None]),
        ("retried", "diamond-open", [c for c in calls if c.retry_reasons]),
    ):
        if chosen:
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": name,
                    "marker": {"symbol": symbol, "size": 13, "color": "#d62728", "line": {"width": 2}},
                    "x": [(c.start_ns - start) / 1e9 for c in chosen],
                    "y": [c.duration * 1000 for c in chosen],
                    "text": [_outcome(c) for c in chosen],
                    "hovertemplate": "%{text}",
                }
            )
    title = "Requests over time: start against duration (warm-up, drift, bursts)"
    layout = {
        **_LAYOUT,
        "title": {"text": title},
        "xaxis": {"title": {"text": "start, s after the first call"}},
        "yaxis": {"title": {"text": "duration ms (log)"}, "type": "log"},
    }
    return {"title": title, "data": data, "layout": layout}


def _outcome(call: Call) -> str:
    identity = f"request {call.request_id}" if call.request_id else f"trace {call.trace_id}"
    return f"{identity}; attempts: {', '.join(attempt_outcomes(call))}"


def _waterfall(calls: Sequence[Call], slowest: int, by_load: bool) -> dict[str, Any] | None:
    chosen = [
        c for c in sorted(calls, key=lambda c: c.duration, reverse=True)[:slowest] if c.intervals or c.phases
    ]
    if not chosen:
        return None
    rows: dict[str, dict[str, list[Any]]] = defaultdict(lambda: {"y": [], "x": [], "base": [], "text": []})
    labels = []
    for rank, call in enumerate(chosen, 1):
        identity = call.request_id or f"trace {call.trace_id[:16]}"
        label = f"{rank}. {_label(call, by_load)} · {identity} · {' → '.join(attempt_outcomes(call))}"
        labels.append(label)
        parts = (
            [
                (i.phase, (i.start_ns - call.start_ns) / 1e6, (i.end_ns - i.start_ns) / 1e6)
                for i in call.intervals
                if i.depth == 0
            ]
            if call.intervals
            else _stacked(call)
        )
        for phase, offset, length in parts:
            row = rows[phase]
            row["y"].append(label)
            row["x"].append(max(length, 0.0))
            row["base"].append(offset)
            row["text"].append(f"{phase} {length:.1f} ms")
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": phase,
            "marker": {"color": PHASE_COLORS.get(phase)},
            "hovertemplate": "%{text} at %{base:.1f} ms",
            "textposition": "none",
            **rows[phase],
        }
        for phase in sorted(rows, key=phase_rank)
    ]
    title = f"The {len(chosen)} slowest calls, phase by phase (target · request id or trace id · attempts)"
    layout = {
        **_LAYOUT,
        "title": {"text": title},
        "barmode": "overlay",
        "height": 120 + 34 * len(chosen),
        "margin": {"l": 420, "r": 30, "t": 40, "b": 50},
        "xaxis": {"title": {"text": "ms from the call's start"}},
        "yaxis": {
            "autorange": "reversed",
            "categoryorder": "array",
            "categoryarray": labels,
            "automargin": True,
        },
    }
    return {"title": title, "data": data, "layout": layout}


def _stacked(call: Call) -> list[tuple[str, float, float]]:
    """Phases in call order without gaps (calls read without phase spans)."""
    parts, offset = [], 0.0
    for phase in sorted(call.phases, key=phase_rank):
        length = call.phases[phase] * 1000
        parts.append((phase, offset, length))
        offset += length
    return parts

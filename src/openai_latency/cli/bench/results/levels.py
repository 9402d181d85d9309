"""The per-level parts of bench's output: the client's own cost at each load level (and whether it
was the bottleneck there), and the ``--sweep`` table with its knee."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...render.tables import Rows, markdown_table, table
from ...render.text import format_duration
from ...stats.percentiles import Dist
from ..run.runner import LAG_WARNING_S, RunState
from ..run.sweep import Sweep
from .stats import TargetStats


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def level_client(load: str, level: Sequence[TargetStats], state: RunState) -> dict[str, Any] | None:
    """The client's own cost at one load level (run in this process), and whether it was the bottleneck."""
    lags = state.level_lag.get(load.split(" turn ")[0])
    cpu = state.level_cpu.get(load.split(" turn ")[0])
    if cpu is None:
        return None
    requests = sum(s.requests + s.cancelled for s in level)
    lag = Dist.of(lags or [])
    return {
        "cpu_s": cpu,
        "cpu_per_request_s": cpu / requests if requests else None,
        "loop_lag_p95": lag.p95 if lag else None,
        "bottleneck": bool(lag and lag.p95 > LAG_WARNING_S),
    }


def level_client_lines(client: dict[str, Any] | None) -> list[tuple[str, str | None]]:
    if client is None:
        return []
    per = client["cpu_per_request_s"]
    text = f"client at this level: CPU {client['cpu_s']:.1f} s" + (
        f" ({per * 1000:.1f} ms per request)" if per else ""
    )
    if client["loop_lag_p95"] is not None:
        text += f", event-loop lag p95 {format_duration(client['loop_lag_p95'])}"
    lines: list[tuple[str, str | None]] = [(text, None)]
    if client["bottleneck"]:
        lines.append((
            "warning: at this level the client, not the server, is the bottleneck (its event loop ran"
            f" late by more than {LAG_WARNING_S * 1000:.0f} ms at p95): its TTFT and gaps include that"
            " delay. Use --workers N or lower the load.",
            "yellow",
        ))  # fmt: skip
    return lines


def sweep_lines(
    sweep: Sweep, stats: list[TargetStats], clients: dict[str, dict[str, Any] | None], markdown: bool
) -> list[tuple[str, str | None]]:
    """Latency and throughput against load, one row per level in the order run, the knee marked (bold),
    and the client's event-loop lag at each level (``clients``, :func:`level_client` of each level,
    computed once; ``!``: the client was the bottleneck there)."""
    names = list(dict.fromkeys(s.label for s in stats))
    found = {(s.group.key.get("load", ""), s.label): s for s in stats}
    header = ["sweep", *(f"{n} req/s | ttft p50 | e2e p50" for n in names), "client lag p95", ""]
    rows: Rows = [header]
    bottlenecks = []
    for load in sweep.levels:
        cells = []
        for name in names:
            s = found.get((load.label, name))
            if s is None:
                cells.append("-")
                continue
            ttft = format_duration(s.ttft.p50) if s.ttft else "-"
            cells.append(f"{_rate(s.requests_per_s)} | {ttft} | {format_duration(s.e2e.p50)}")
        client = clients.get(load.label)
        lag = client["loop_lag_p95"] if client else None
        lag_text = "-" if lag is None else format_duration(lag)
        if client and client["bottleneck"]:
            lag_text += " !"
            bottlenecks.append(load.label)
        mark = "<- knee" if load.label == sweep.knee else ""
        if load.label in sweep.stopped:
            mark = "stopped: over-saturated"
        rows.append([load.label, *cells, lag_text, mark])
    lines: list[tuple[str, str | None]] = [
        (line, None) for line in (markdown_table(rows) if markdown else table(rows, indent=""))
    ]
    if sweep.knee:
        top = sweep.max_throughput or 0.0
        lines.append((
            f"knee: {sweep.knee} (throughput stops growing past it; highest {top:,.1f} requests/s per"
            " target): more load adds queueing time, not throughput",
            "bold",
        ))  # fmt: skip
    if bottlenecks:
        lines.append((
            f"the client, not the server, was the bottleneck at {', '.join(bottlenecks)} (event-loop lag"
            f" p95 above {LAG_WARNING_S * 1000:.0f} ms, marked !): those levels measure the client too."
            " Give the client a core of its own, or measure past this load with -c or --rate and"
            " --workers N.",
            None,
        ))  # fmt: skip
    return lines
